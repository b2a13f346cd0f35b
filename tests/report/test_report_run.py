"""Run reports: golden summary figures, every chart from real output and edge cases, the documents."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from report_synth import simulate, write_run

from qbench.errors import QbenchError
from qbench.report.build import build_report
from qbench.report.chart_columns import RunColumns, fmt_s, time_bins
from qbench.report.charts import RUN_CHARTS, latency_distribution, render_run_charts
from qbench.report.rundir import read_run
from qbench.run.records.schema import RequestRecord, read_records

# ---------------------------------------------------------------- golden figures
# tests/report/data/golden_records.jsonl: 1 warm-up request (excluded), 8 ok, 1 queue_full, 1 timeout.
# ok latencies (completed - intended) are 1.0 1.2 1.4 1.6 1.8 2.0 3.0 5.0 s; queue waits (started - sent)
# 0.1 0.2 0.3 0.4 0.5 0.6 1.6 3.6 s; every send is 10 ms late. Linear percentiles, rank = q (n - 1):
#   latency p50 = (1.6 + 1.8) / 2 = 1.7; p90 = 3.0 + 0.3 * 2.0 = 3.6; p95 = 3.0 + 0.65 * 2.0 = 4.3;
#   p99 = 3.0 + 0.93 * 2.0 = 4.86; mean = 17 / 8 = 2.125
#   queue wait p50 = 0.45; p95 = 1.6 + 0.65 * 2.0 = 2.9
#   service = latency - 0.01 - queue wait = 0.89 0.99 1.09 1.19 1.29 1.39 1.39 1.39 -> p50 = 1.24
# Window: first measured intended send 0.5 s to the later of the last ok completion (9.0 s) and the last
# send (5.01 s) = 8.5 s; the timeout given up at 15.5 s does not stretch it. So throughput = 8 / 8.5; error
# rate = 2 errors / 10 sent; goodput under the SLO p95_latency_s <= 2 counts the 6 ok requests with latency
# <= 2 s: 6 / 8.5 = 0.706 req/s.

GOLDEN = {
    ("latency_s", "p50"): 1.7, ("latency_s", "p90"): 3.6, ("latency_s", "p95"): 4.3,
    ("latency_s", "p99"): 4.86, ("latency_s", "mean"): 2.125, ("latency_s", "max"): 5.0,
    ("queue_wait_s", "p50"): 0.45, ("queue_wait_s", "p95"): 2.9, ("service_s", "p50"): 1.24,
    ("send_lag_s", "p50"): 0.01,
}


def test_golden_summary_figures(golden_run: Path) -> None:
    run = read_run(golden_run)
    s = run.summary
    for (phase, stat), expected in GOLDEN.items():
        assert getattr(s.phase(phase), stat) == pytest.approx(expected, abs=1e-9), (phase, stat)
    assert (s.requests, s.sent, s.completed_ok, s.errors) == (10, 10, 8, 2)
    assert s.errors_by_kind == {"queue_full": 1, "timeout": 1}
    assert s.duration_s == pytest.approx(8.5)
    assert s.throughput_rps == pytest.approx(8 / 8.5)
    assert s.goodput_rps == pytest.approx(6 / 8.5)
    assert s.error_rate == pytest.approx(0.2)
    assert not s.slo_passed and s.failed_checks()[0].name == "p95_latency_s"
    assert "records.parquet is missing" in run.notes[0]


def test_golden_markdown(golden_run: Path, tmp_path: Path) -> None:
    files = build_report(golden_run, tmp_path / "out")
    md = files.markdown.read_text()
    assert "- **latency p50 / p95 / p99**: 1.7 s / 4.3 s / 4.86 s" in md
    assert "- **ok / errors**: 8 / 2 (error rate 20.00%)" in md
    assert "- **throughput**: 0.94 req/s over 8.50 s" in md
    assert "- **goodput**: 0.71 req/s" in md
    assert "- **SLO**: FAILED: p95_latency_s" in md
    assert "- **requests**: 10 measured (10 sent, 0 not sent); 1 warm-up excluded" in md
    assert "| latency from intended send | 8 | 2.12 s | 1.7 s | 3.6 s | 4.3 s | 4.86 s | 5 s |" in md
    assert "| queue_full | 1 | 10.0% | Queue is full. Max size is 2 and size is 2. |" in md
    # 2 of 10 sent requests failed: the SLO's p95 (failures ranked slowest) falls among them, so a reason
    assert "| p95_latency_s | <= 2 | 20.0% of sent requests failed: the p95 falls among them | FAIL |" in md
    for spec in RUN_CHARTS:
        assert f"(charts/{spec.name}.png)" in md
        assert (tmp_path / "out" / "charts" / f"{spec.name}.png").exists()
    assert not (golden_run / "report.html").exists(), "--out must keep the source folder untouched"


def test_html_holds_every_chart_and_the_run_metadata(golden_run: Path) -> None:
    files = build_report(golden_run)
    html = files.html.read_text()
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == len(RUN_CHARTS) == len(files.charts)
    for spec in RUN_CHARTS:
        assert f'id="chart-{spec.name}"' in html
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert "http://" not in html.replace("http://127.0.0.1:7860", "")  # nothing fetched from the network
    for text in ("Scenario", "Server status (/status)", "Environment", "&#34;hostname&#34;: &#34;ci&#34;",
                 "sse_v3", "Queue is full."):
        assert text in html


# ---------------------------------------------------------------- every chart, real output and edge cases


def _ok(i: int, t: float) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=False,
                         intended_at_s=t, sent_at_s=t, joined_at_s=t, estimation_at_s=t, rank=0, queue_size=1,
                         rank_eta_s=0.2,
                         started_at_s=t + 0.05, completed_at_s=t + 0.3, outcome="ok")


def _failed(i: int, kind: str) -> RequestRecord:
    t = i * 0.1
    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=False,
                         intended_at_s=t, sent_at_s=t, completed_at_s=t + 0.01, error_kind=kind,
                         http_status=503)


def _never_sent(i: int) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=False,
                         intended_at_s=i * 0.1, error_kind="interrupted")


EDGE_CASES = {
    "real_run": simulate(n=300, max_queue=20, fail_every=40),
    "all_errors": [_failed(i, ("queue_full", "connect", "http_5xx")[i % 3]) for i in range(30)],
    "single_request": [_ok(0, 0.0)],
    "no_completions": [_never_sent(i) for i in range(10)],
    "no_records": [],
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_every_chart_builds(case: str, tmp_path: Path) -> None:
    charts = render_run_charts(EDGE_CASES[case], tmp_path)
    assert [c.name for c in charts] == [s.name for s in RUN_CHARTS]
    for chart in charts:
        with Image.open(chart.path) as img:
            assert img.format == "PNG" and img.width >= 800 and img.height >= 300
            pixels = np.asarray(img.convert("L"), dtype=float)
            assert pixels.std() > 5, f"{chart.name} looks blank"


@pytest.mark.parametrize("case", ["all_errors", "single_request", "no_completions", "no_records"])
def test_report_of_edge_case_runs(case: str, tmp_path: Path) -> None:
    run = tmp_path / case
    run.mkdir()
    (run / "records.jsonl").write_text("")
    if EDGE_CASES[case]:
        write_run(run, EDGE_CASES[case])
    files = build_report(run)
    html = files.html.read_text()
    assert html.count('<img src="data:image/png;base64,') == len(RUN_CHARTS)
    if case == "all_errors":
        assert "| queue_full | 10 | 33.3% |" in files.markdown.read_text()


def test_missing_run_json_and_no_records(tmp_path: Path) -> None:
    with pytest.raises(QbenchError, match="no records.parquet or records.jsonl"):
        build_report(tmp_path)
    with pytest.raises(QbenchError, match="not a directory"):
        build_report(tmp_path / "nope")
    (tmp_path / "records.jsonl").write_text((Path(__file__).parent / "data/golden_records.jsonl").read_text())
    files = build_report(tmp_path)
    assert "run.json is missing" in files.notes
    (tmp_path / "records.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(QbenchError, match="the records could not be read"):
        build_report(tmp_path)
    (tmp_path / "records.parquet").unlink()
    assert "No run metadata (run.json) was found." in files.html.read_text()


def test_parquet_run_matches_jsonl(golden_run: Path, tmp_path: Path) -> None:
    records = read_records(golden_run)
    parquet_run = write_run(tmp_path / "pq", records)
    assert read_run(parquet_run).summary.latency == read_run(golden_run).summary.latency


# ---------------------------------------------------------------- pieces


def test_distribution_shows_the_phases_that_exist() -> None:
    streamed = [_ok(i, i * 0.1) for i in range(5)]
    for r in streamed:
        r.first_output_at_s = r.intended_at_s + 0.1
    labels = latency_distribution(RunColumns.from_records(streamed)).axes[0].get_legend_handles_labels()[1]
    assert labels == ["total (from intended send)", "queue wait", "service", "time to first output"]
    unstreamed = latency_distribution(RunColumns.from_records([_ok(8, 0.0), _ok(9, 1.0)]))
    assert "time to first output" not in unstreamed.axes[0].get_legend_handles_labels()[1]


def test_in_flight_counts_queued_and_running() -> None:
    data = RunColumns.from_records([_ok(0, 0.0), _ok(1, 0.1), _never_sent(2)])
    queued, running = data.in_flight(np.array([0.0, 0.06, 0.12, 0.2, 0.35, 0.5]))
    assert queued.tolist() == [1, 0, 1, 0, 0, 0]
    assert running.tolist() == [0, 1, 1, 2, 1, 0]


@pytest.mark.parametrize(("span", "width", "bins"), [
    ((0.0, 10.0), 0.1, 100), ((0.0, 1.0), 0.01, 100), ((0.0, 600.0), 10, 60), ((0.0, 0.05), 0.001, 50),
])
def test_time_bins_have_round_widths(span: tuple[float, float], width: float, bins: int) -> None:
    edges = time_bins(span)
    assert np.diff(edges) == pytest.approx(width)
    assert len(edges) - 1 in (bins, bins + 1) and edges[0] <= span[0] and edges[-1] >= span[1]


@pytest.mark.parametrize(("value", "text"), [(0.0123, "12.3 ms"), (2.5, "2.5 s"), (1.0, "1 s"),
                                             (float("nan"), "n/a")])
def test_fmt_s(value: float, text: str) -> None:
    assert fmt_s(value) == text


def test_ten_thousand_records_render_in_seconds(tmp_path: Path) -> None:
    """Brief: a 10,000-record run renders all charts in a few seconds (generous bound: busy machine)."""
    records = simulate(n=10_000, rate_rps=22, service_s=0.09, max_queue=30, fail_every=50)
    start = time.perf_counter()
    render_run_charts(records, tmp_path)
    assert time.perf_counter() - start < 30


def _phased(i: int, endpoint: str, fn_s: float) -> RequestRecord:
    """An ok request of 100 ms from the send: 10 ms queued, 5 + fn + 15 ms processed, 5 ms unnamed."""
    r = RequestRecord(request_id=i, user_id=0, session_id="s", endpoint=endpoint, warmup=False,
                      intended_at_s=i * 0.1, sent_at_s=i * 0.1, started_at_s=i * 0.1 + 0.03,
                      completed_at_s=i * 0.1 + 0.1, outcome="ok")
    r.server_queue_wait_s, r.server_preprocess_s, r.server_fn_s = 0.01, 0.005, fn_s
    r.server_postprocess_s, r.server_streaming_diff_s = 0.015, 0.0
    r.server_total_s = 0.005 + fn_s + 0.015 + 0.005
    return r


def test_where_the_time_went_per_endpoint(tmp_path: Path) -> None:
    from qbench.report.phase_chart import medians

    records = [_phased(i, "/a", 0.02 + 0.01 * i) for i in range(3)] + [_phased(3, "/b", 0.05)]
    split = medians(records)
    assert split["/a"]["server_fn_s"] == pytest.approx(0.03)  # median of 20, 30, 40 ms
    assert split["/a"]["server_other"] == pytest.approx(0.005)
    assert split["/a"]["client_only_s"] == pytest.approx(0.1 - 0.01 - 0.055)  # less queue wait and total
    assert medians([_ok(0, 0.0)]) == {}  # no server phases: no chart
    files = build_report(write_run(tmp_path / "run", records))
    assert "phases" in [c.name for c in files.charts]
    markdown = files.markdown.read_text()
    assert "Where the time went in /a" in markdown and "Where the time went in /b" in markdown
    assert "| server: function | 3 | 30 ms |" in markdown
