"""Where the time went (qbench.report.phase_chart): which records count, the computed segments, and
the stacked bars read back from the Figure. (One endpoint-level check through the report is in
test_report_run.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.patches import Rectangle

from qbench.report.phase_chart import SEGMENTS, medians, phase_bars, render_phase_chart
from qbench.run.records import RequestRecord


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
