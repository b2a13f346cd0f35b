"""Where the time went (qbench.report.phase_chart): which records count, the computed segments, and
the stacked bars read back from the Figure. (One endpoint-level check through the report is in
test_report_run.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from qbench.report.phase_chart import SEGMENTS, medians, phase_bars, render_phase_chart
from qbench.run.records.schema import RequestRecord


def rec(endpoint: str = "/a", fn_s: float = 0.04, *, ok: bool = True, warmup: bool = False,
        total_s: float | None = 0.06, queue_s: float | None = 0.01) -> RequestRecord:
    """A request of 100 ms from the send with the server's phases (total None: without them)."""
    r = RequestRecord(request_id=0, user_id=0, session_id="s", endpoint=endpoint, warmup=warmup,
                      intended_at_s=0.0, sent_at_s=0.0, completed_at_s=0.1, outcome="ok" if ok else "error")
    r.server_queue_wait_s, r.server_fn_s, r.server_total_s = queue_s, fn_s, total_s
    return r


def test_only_ok_measured_records_with_the_servers_phases_count() -> None:
    records = [rec(fn_s=0.04), rec(fn_s=1.0, ok=False), rec(fn_s=1.0, warmup=True),
               rec(fn_s=1.0, total_s=None)]
    assert medians(records) == {"/a": {"client_only_s": pytest.approx(0.03), "server_queue_wait_s": 0.01,
                                       "server_fn_s": 0.04, "server_other": pytest.approx(0.02)}}
    assert medians([]) == {}


def test_a_phase_no_record_has_is_absent_and_a_negative_rest_is_zero() -> None:
    split = medians([rec(fn_s=0.08, total_s=0.05, queue_s=None)])  # the named phases exceed the total
    assert split["/a"]["server_other"] == 0.0
    assert "server_queue_wait_s" not in split["/a"] and "server_upload_s" not in split["/a"]


def test_endpoints_are_sorted_and_each_gets_a_stacked_bar() -> None:
    split = medians([rec("/b", 0.02), rec("/a", 0.04), rec("/a", 0.06)])
    assert list(split) == ["/a", "/b"] and split["/a"]["server_fn_s"] == pytest.approx(0.05)
    fig = phase_bars(split)
    (ax,) = fig.axes
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    drawn = [name for name in SEGMENTS if any(name in row for row in split.values())]
    assert len(bars) == 2 * len(drawn)  # one bar per endpoint per segment present
    ends: dict[int, float] = {}
    for bar in bars:
        ends[round(bar.get_y())] = max(ends.get(round(bar.get_y()), 0.0), bar.get_x() + bar.get_width())
    assert sorted(ends.values()) == pytest.approx([100.0, 100.0])  # ms: stacked to the time from the send
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["client-only (network, protocol)", "queue wait", "function", "other server processing"]


def test_the_chart_is_drawn_only_with_the_servers_phases(tmp_path: Path) -> None:
    assert render_phase_chart([rec(total_s=None)], tmp_path) == []
    assert not (tmp_path / "phases.png").exists()
    (chart,) = render_phase_chart([rec()], tmp_path)
    assert chart.name == "phases" and chart.path == tmp_path / "phases.png" and chart.path.stat().st_size > 0


def _old_medians(records: list[RequestRecord]) -> dict[str, dict[str, float]]:
    """The medians as they were computed before the columns, one record at a time."""
    from qbench.report.phase_chart import NAMED, SEGMENTS

    by_endpoint: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.ok and not r.warmup and r.server_total_s is not None:
            by_endpoint.setdefault(r.endpoint, []).append(r)
    out: dict[str, dict[str, float]] = {}
    for endpoint, rs in sorted(by_endpoint.items()):
        row = {}
        for name in SEGMENTS:
            if name == "server_other":
                values = [None if r.server_total_s is None else
                          r.server_total_s - sum(getattr(r, n) or 0.0 for n in NAMED) for r in rs]
            else:
                values = [getattr(r, name) for r in rs]
            present = [v for v in values if v is not None]
            if present:
                row[name] = max(float(np.median(present)), 0.0)
        out[endpoint] = row
    return out


def test_the_medians_from_parquet_columns_are_the_records_medians(tmp_path: Path) -> None:
    import sys

    from qbench.run.records.columns import Columns
    from qbench.run.records.schema import write_parquet

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from end_of_run import chunk_records

    rows, _ = chunk_records(np.random.default_rng(5), 0, 3000, 0.0, 1000.0, 1.0, 0.3)
    for k, r in enumerate(rows):
        if r.ok and k % 4:
            r.server_total_s = (r.completed_at_s or 0.0) - (r.sent_at_s or 0.0) - 0.001 * (k % 3)
            r.server_queue_wait_s = None if k % 5 == 0 else 0.0003 * (k % 11)
            r.server_fn_s, r.server_preprocess_s = 0.6 * r.server_total_s, 0.001 if k % 2 else None
            r.server_streaming_diff_s = 0.0002 if r.endpoint == "chat" else None
            r.result_at_s = r.completed_at_s - 0.002 if k % 9 == 0 else None  # output files fetched
    write_parquet(rows, tmp_path / "records.parquet")
    want = _old_medians(rows)
    assert set(want) == {"chat", "embed"} and "server_other" in want["chat"]
    assert medians(Columns.read(tmp_path, keep=2)) == want
    assert medians(rows) == want
