"""The live line and the summary tables `qbench run` prints."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from qbench.run.console import (
    SHORT_PHASE_LABELS,
    LiveView,
    live_line,
    phase_table,
    render_summary,
)
from qbench.run.load.generator import LiveStats
from qbench.run.records import gap_histogram
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import GeneratorStats, Stats, summarize
from qbench.run.results.words import bottleneck_warnings
from qbench.run.scenario.schema import Slo, parse_scenario


def records(lag: float) -> list[RequestRecord]:
    out = []
    for i in range(10):
        r = RequestRecord(
            request_id=i, user_id=i, session_id="s", endpoint="e", warmup=False, intended_at_s=i * 0.1
        )
        r.sent_at_s, r.started_at_s, r.completed_at_s, r.outcome = (
            r.intended_at_s + lag,
            i * 0.1 + 0.1,
            i * 0.1 + 0.3,
            "ok",
        )
        out.append(r)
    return out


def test_summary_table_shows_headline_phases_and_slo() -> None:
    console = Console(record=True, width=140)
    summary = summarize(
        records(0.0), Slo(p95_latency_s=0.1), generator=GeneratorStats(cpu_s=0.1, cpu_percent=5.0)
    )
    render_summary(summary, console)
    text = console.export_text()
    for expected in (
        "throughput",
        "goodput",
        "total (sent)",
        "queue wait",
        "service time",
        "p95_latency_s",
        "FAIL",
        "generator CPU",
    ):
        assert expected in text
    assert bottleneck_warnings(summary) == []
    assert "Where the time went" not in text  # the server reported no phases: no section
    assert "device:" not in text  # nor forward passes


def test_the_forward_passes_beside_the_served_rate() -> None:
    """10 requests over 1.2 s, each alone in a forward pass of 60 ms: 0.6 s of forward time, 8.3 req/s
    served against 16.7 req/s back to back."""
    rs = records(0.0)
    for r in rs:
        r.server_forward_s, r.server_batch_size = 0.06, 1
    console = Console(record=True, width=200)
    summary = summarize(rs)
    render_summary(summary, console)
    assert summary.duration_s == pytest.approx(1.2)
    assert ("device: served 8.3 req/s, 50% of what its forward passes could serve back to back (16.7 req/s "
            "at batches of 1.0, 60.0 ms each)") in console.export_text()


def test_where_the_time_went_and_how_the_traces_were_read() -> None:
    from qbench.run.results.server_phases import FunctionTimes, TraceReport

    rs = records(0.0)  # 300 ms from the send: 10 ms queued, 150 ms processed, of which 120 the function
    for r in rs:
        r.server_queue_wait_s, r.server_fn_s, r.server_total_s = 0.01, 0.12, 0.15
        r.server_streaming_diff_s = 0.0
    report = TraceReport("traces", traces=10, expected=10, matched=10)
    console = Console(record=True, width=80)
    render_summary(summarize(rs, server_traces=report), console)
    text = console.export_text()
    assert "Where the time went" in text and "server: function" in text and "120ms" in text
    assert "client-only (network, protocol)  10  140ms" in text  # 300 - 10 - 150 ms
    assert "streaming diff" not in text  # a phase this endpoint does not have
    assert "10 of 10 requests that reached the server matched its traces" in text
    monitoring = TraceReport("monitoring", functions={"predict": FunctionTimes(40, 1.0, 0.1, 0.2, 0.3)},
                             note="the server's process time per function (/monitoring/summary); hint")
    console = Console(record=True, width=80)
    render_summary(summarize(records(0.0), server_traces=monitoring), console)
    text = console.export_text()
    assert "Server process time per function" in text and "predict" in text and "hint" in text


def test_phase_table_fits_an_80_column_terminal_without_wrapping() -> None:
    console = Console(record=True, width=80)
    render_summary(summarize(records(0.0), generator=GeneratorStats(cpu_s=0.1, cpu_percent=5.0)), console)
    lines = console.export_text().splitlines()
    phase_rows = [line for line in lines if line.lstrip().startswith(("total", "queue wait"))]
    assert len(phase_rows) == 3  # intended, sent, queue wait: one line each, none wrapped
    assert all(len(line) <= 80 for line in lines)


@pytest.mark.parametrize("value", [0.0123, -0.0123, 0.0000123, -0.0000456, 1e-8, 0.9996, 123.4, -99999.0])
def test_large_counts_and_the_widest_figures_print_whole_at_80_columns(value: float) -> None:
    wide = Stats(count=12_345_678, mean=value, p50=value, p90=value, p95=value, p99=value, max=value)
    summary = summarize(records(0.0))
    summary.latency = {name: wide for name in SHORT_PHASE_LABELS}
    summary.eta_error = Stats(count=10_000_000, mean=-value, p50=value, p90=value, p95=value, p99=value)
    console = Console(record=True, width=80)
    console.print(phase_table(summary))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines) and not any("…" in line for line in lines)
    assert sum("12,345,678" in line for line in lines) == len(SHORT_PHASE_LABELS)
    assert any(line.lstrip().startswith("ETA error") and "10,000,000" in line for line in lines)
    assert any(line.lstrip().startswith("total (sent)") for line in lines)


def test_live_line() -> None:
    stats = LiveStats(
        elapsed_s=3,
        planned_s=10,
        sent=5,
        completed=4,
        in_flight=1,
        errors_by_kind={"timeout": 1},
        p50_latency_s=0.12,
        p95_latency_s=1.5,
    )
    line = live_line(stats)
    assert "in flight 1" in line and "timeout 1" in line and "p50 120.0 ms" in line and "remaining 7s" in line
    assert not line.startswith("workers")  # one generator: nothing to say
    from qbench.run.load.executor import combine

    lost = LiveStats(sent=3, completed=3, errors_by_kind={"generator_lost": 2}, lost_workers=1)
    total = live_line(combine([stats, lost]))
    assert total.startswith("workers 2 (1 LOST)  sent 8") and "generator_lost 2" in total


def test_a_burst_reports_its_send_time_instead_of_warning() -> None:
    console = Console(record=True, width=140)
    summary = summarize(records(0.02), generator=GeneratorStats(cpu_percent=60.0))
    render_summary(summary, console, burst=True)
    text = console.export_text()
    assert "the burst of 10 requests took 20.0 ms to send" in text and "warning" not in text


def test_live_view_ends_its_line_in_a_log_file() -> None:
    """Redirected (CI logs, 2>&1), the last live line must not run into the summary printed after it."""
    out = io.StringIO()
    raw = {
        "name": "t",
        "endpoint": {"api_name": "p"},
        "payload": {"inputs": [{"value": 1}]},
        "load": {"burst": 1},
    }
    with LiveView(parse_scenario(raw, source="t"), "http://x", console=Console(file=out)) as view:
        view.update(LiveStats(elapsed_s=1, sent=1, completed=1))
    assert out.getvalue().endswith("\n")


def test_worker_table_and_warnings_name_a_saturated_or_lost_generator() -> None:
    from qbench.run.results.summary import WorkerStats

    workers = [
        WorkerStats(0, "node a", requests=5, cpu_percent=97.0, p99_send_lag_s=0.02, clock_uncertainty_s=4e-4),
        WorkerStats(1, "node b", requests=5, cpu_percent=20.0, lost="actor 1 on node b: ActorDiedError"),
    ]
    gen = GeneratorStats(cpu_s=1.0, cpu_percent=117.0, processes=2, executor="ray", workers=workers,
                         clock_uncertainty_s=4e-4)
    summary = summarize(records(0.0), generator=gen)
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=120))
    text = out.getvalue()
    assert "Generators (ray)" in text and "LOST" in text and "97%" in text
    assert "clocks of the generator nodes agree to +-400µs" in text
    warnings = bottleneck_warnings(summary)
    assert any("generator 0 (node a) at 97%" in w for w in warnings)
    assert any("generator 1 was lost mid-run" in w for w in warnings)


@pytest.mark.parametrize(
    ("load", "title"),
    [({}, "(gradio, burst)"), ({"processes": 2}, "(gradio, burst, 2 processes)"),
     ({"executor": "ray"}, "(gradio, burst, Ray actors)")],
)
def test_live_view_title_says_where_the_generators_run(load: dict[str, object], title: str) -> None:
    raw = {"name": "t", "endpoint": {"api_name": "p"}, "load": {"burst": 1, **load}}
    assert LiveView(parse_scenario(raw, source="t"), "http://x", enabled=False).title.endswith(title)


def test_a_phase_finding_is_labelled_a_time_split_not_a_limit() -> None:
    from qbench.run.console import finding_label
    from qbench.run.diagnose.finding import Finding

    upload = Finding("phase_share", "upload is 78% of service time")
    assert finding_label(upload) == "time split (phase_share)"
    assert finding_label(Finding("per_request_work", "...")) == "limit (per_request_work)"
    assert finding_label(Finding("usage", "...")) == "server use"


def test_streamed_inputs_show_their_chunks_and_chunk_latency_within_80_columns() -> None:
    streams = records(0.0)
    for r in streams:
        r.chunks_sent, r.chunks_answered, r.chunk_latency_count = 20, 18, 17
        r.chunk_latency_mean_s = r.chunk_latency_p50_s = 0.04
        r.chunk_latency_p95_s = r.chunk_latency_max_s = 0.09
        r.chunk_latency_hist = gap_histogram.encode(gap_histogram.histogram([0.04] * 9 + [0.09] * 8))
        r.output_gap_p95_s = r.output_gap_mean_s = r.output_gap_max_s = 0.5
        r.output_gap_count = 17
        r.output_gap_hist = gap_histogram.encode(gap_histogram.histogram([0.5] * 17))
    console = Console(record=True, width=80)
    render_summary(summarize(streams), console)
    text = console.export_text()
    assert "200 sent, 180 answered (90%; others were replaced)" in text
    row = next(line for line in text.splitlines() if line.startswith(" all "))
    assert row.split() == ["all", "10", "200", "180", "40ms", "90ms", "500ms"]
    assert all(len(line) <= 80 for line in text.splitlines())
