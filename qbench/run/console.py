"""What `qbench run` shows: a rich live progress line during the run, a summary table after it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from qbench.run.diagnose.limits import Finding
from qbench.run.diagnose.phases import KINDS as PHASE_KINDS
from qbench.run.load.generator import LiveStats
from qbench.run.results.server_phases import TraceReport
from qbench.run.results.summary import JourneyStats, Stats, Summary
from qbench.run.results.words import (
    SERVER_PHASE_LABELS,
    bottleneck_warnings,
    chunk_line,
    journey_line,
    seconds,
    time_split,
    token_line,
)
from qbench.run.scenario.schema import Scenario


class LiveView:
    """Context manager; `update(stats)` is called by the load generator's ticker (~4 Hz)."""

    def __init__(
        self, scenario: Scenario, target: str, *, enabled: bool = True, console: Console | None = None
    ) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        load = scenario.load
        split = ", Ray actors" if load.executor == "ray" else ""
        if load.processes > 1:
            split = f", {load.processes} processes"
        self.title = f"{scenario.name} -> {target} ({scenario.protocol}, {load.shape}{split})"
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self.task = self.progress.add_task(self.title, total=None)
        self.live: Live | None = None
        self.line = Text("")

    def __enter__(self) -> LiveView:
        if self.enabled:
            self.live = Live(
                Group(self.progress, self.line), console=self.console, refresh_per_second=4, transient=False
            )
            self.live.__enter__()
        return self

    def update(self, stats: LiveStats) -> None:
        if self.live is None:
            return
        if stats.planned_s:  # by time when the run has a planned length, else by requests done
            done = min(stats.elapsed_s, stats.planned_s)
            self.progress.update(self.task, completed=done, total=stats.planned_s)
        else:
            self.progress.update(self.task, completed=stats.completed, total=stats.scheduled)
        self.line = Text(live_line(stats))
        self.live.update(Group(self.progress, self.line))

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None
            if not self.console.is_terminal:  # rich ends a non-terminal render without a newline
                self.console.line()


def live_line(s: LiveStats) -> str:
    errors = ", ".join(f"{k} {v}" for k, v in sorted(s.errors_by_kind.items())) or "none"
    remaining = "" if s.planned_s is None else f"  remaining {max(s.planned_s - s.elapsed_s, 0):.0f}s"
    lost = f" ({s.lost_workers} LOST)" if s.lost_workers else ""
    workers = f"workers {s.workers}{lost}  " if s.workers > 1 else ""
    return (
        f"{workers}sent {s.sent}  completed {s.completed}  in flight {s.in_flight}  errors: {errors}  "
        f"p50 {_fmt(s.p50_latency_s)}  p95 {_fmt(s.p95_latency_s)}  elapsed {s.elapsed_s:.0f}s{remaining}"
    )


def render_summary(
    summary: Summary,
    console: Console | None = None,
    *,
    open_loop: bool = True,
    burst: bool = False,
    findings: Sequence[Finding] = (),
) -> None:
    """Print the summary table, SLO checks, generator warnings and where the limit was (`findings`)."""
    console = console or Console()
    console.print(overview_table(summary))
    if summary.error_samples:
        console.print(error_table(summary))
    console.print(phase_table(summary, open_loop=open_loop))
    if summary.endpoints:
        console.print(endpoint_table(summary, open_loop=open_loop))
    if summary.chunks_sent:
        console.print(stream_table(summary))
    for label, part in time_split(summary):
        console.print(time_split_table(label, part))
    traces = summary.server_traces
    if traces is not None and traces.functions:
        console.print(functions_table(traces))
    if traces is not None and (traces.source != "none" or traces.note):
        console.print(traces.line())
    if summary.device is not None and summary.device.line():
        console.print(summary.device.line())
    if summary.journeys is not None:
        console.print(journey_table(summary.journeys))
        console.print(journey_line(summary.journeys))
    if summary.generator.workers:
        console.print(worker_table(summary))
    if summary.checks():
        console.print(slo_table(summary))
    lag = summary.phase("send_lag_s")
    if burst and lag.max is not None:
        console.print(f"the burst of {summary.sent} requests took {lag.max * 1000:.1f} ms to send")
    for warning in bottleneck_warnings(summary, burst=burst):
        console.print(f"[bold yellow]warning:[/] {warning}")
    for finding in findings:
        console.print(f"[bold]{finding_label(finding)}:[/] {finding.message}")


def finding_label(finding: Finding) -> str:
    """What a finding is, in the console: a limit, or a description of where the time went."""
    if finding.kind == "usage":
        return "server use"
    if finding.kind in PHASE_KINDS:
        return f"time split ({finding.kind})"
    return f"limit ({finding.kind})"


def overview_table(s: Summary) -> Table:
    table = Table(title="Run", show_header=False, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("requests", f"{s.requests} ({s.sent} sent, {s.not_sent} not sent)")
    table.add_row("ok / errors", f"{s.completed_ok} / {s.errors}  (error rate {s.error_rate:.2%})")
    errors = ", ".join(f"{k}: {v}" for k, v in s.errors_by_kind.items()) or "none"
    table.add_row("errors by kind", errors)
    table.add_row("window", f"{s.duration_s:.2f} s")
    table.add_row("offered", f"{s.offered_rps:.2f} req/s")
    table.add_row("throughput", f"{s.throughput_rps:.2f} req/s")
    table.add_row("goodput", f"{s.goodput_rps:.2f} req/s (ok and within the SLO's latency thresholds)")
    if s.output_tokens:
        table.add_row("tokens", token_line(s))
    if s.chunks_sent:
        table.add_row("input chunks", chunk_line(s))
    g = s.generator
    cpu = "-" if g.cpu_s is None else f"{g.cpu_s:.2f} s ({g.cpu_percent or 0:.0f}% of a core)"
    table.add_row("generator CPU", cpu)
    table.add_row("send lag p99", _fmt(s.phase("send_lag_s").p99))
    cap = "uncapped" if g.in_flight_cap is None else f"cap {g.in_flight_cap}"
    table.add_row("max in flight", f"{g.max_in_flight} ({cap})")
    return table


def error_table(s: Summary) -> Table:
    """One sample message per error kind (the first record's), so a failure is never just a count."""
    table = Table(title="Errors: a sample per kind", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("kind", no_wrap=True)
    table.add_column("n", justify="right")
    table.add_column("sample message", overflow="fold")
    for kind, message in s.error_samples.items():
        table.add_row(kind, str(s.errors_by_kind.get(kind, 0)), message[:300])
    return table


#: The same phases, short enough for an 80-column terminal table.
SHORT_PHASE_LABELS = {
    "latency_s": "total",
    "latency_from_send_s": "total (sent)",
    "queue_wait_s": "queue wait",
    "service_s": "service time",
    "ttfo_s": "first output",
    "send_lag_s": "send lag",
    "ttft_s": "TTFT (sent)",
    "tpot_s": "TPOT",
    "itl_s": "ITL",
    "download_s": "download",
    "chunk_latency_s": "chunk",
    "output_gap_s": "output gap",
}


def time_split_table(label: str, s: Summary) -> Table:
    """Where the time went: client-only time and each server phase, p50 and p90 of ok requests."""
    table = Table(title=f"Where the time went{' in ' + label if label else ''}", title_justify="left",
                  caption="ok requests, from the send", caption_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    for col in ("phase", "n", "p50", "p90"):
        table.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)
    for name, stats in s.server_phases.items():
        if not stats.max:  # a phase this endpoint does not have (streaming diff of a plain function)
            continue
        cells = [f"{getattr(stats, k):.3g}" if name == "server_batch_size" else seconds(getattr(stats, k))
                 for k in ("p50", "p90")]
        table.add_row(SERVER_PHASE_LABELS.get(name, name), f"{stats.count:,}", *cells,
                      style="bold" if name == "client_only_s" else None)
    return table


def functions_table(traces: TraceReport) -> Table:
    """Gradio's /monitoring/summary: process time per function (the server's recent events)."""
    table = Table(title="Server process time per function (/monitoring/summary)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("function", "requests", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if col == "function" else "right", no_wrap=True)
    for name, f in traces.functions.items():
        requests = "-" if f.requests is None else f"{f.requests:,}"
        table.add_row(name, requests, seconds(f.p50_s), seconds(f.p90_s), seconds(f.p99_s))
    return table


def stream_table(s: Summary) -> Table:
    """Streamed inputs per endpoint (one row without a mix): chunks, chunk latency and output gaps."""
    table = Table(title="Streamed inputs (ok requests; chunk: its send -> its answer)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("endpoint", "streams", "chunks", "answered", "chunk p50", "chunk p95", "gap p95"):
        table.add_column(col, justify="left" if col == "endpoint" else "right", no_wrap=col != "endpoint")
    rows = [(label, e) for label, e in s.endpoints.items() if e.chunks_sent] or [("all", s)]
    for label, e in rows:
        chunk, gap = e.phase("chunk_latency_s"), e.phase("output_gap_s")
        table.add_row(label, f"{e.completed_ok:,}", f"{e.chunks_sent:,}", f"{e.chunks_answered:,}",
                      seconds(chunk.p50), seconds(chunk.p95), seconds(gap.p95))
    return table


def phase_table(s: Summary, *, open_loop: bool = True) -> Table:
    """Each phase of ok requests (count, mean, p50 to p99, max), fitting 80 columns with every cell whole."""
    clock = s.generator.clock_uncertainty_s
    across = "" if clock is None else f"; clocks of the generator nodes agree to +-{seconds(clock)}"
    table = Table(
        title=f"Latency of ok requests (total: from the intended send time{across})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in ("phase", "n", "mean", "p50", "p90", "p95", "p99", "max"):
        table.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)
    for name, label in SHORT_PHASE_LABELS.items():
        stats = s.phase(name)
        if stats.count == 0:
            continue
        style = "bold" if name == ("latency_s" if open_loop else "latency_from_send_s") else None
        table.add_row(label, *_stat_cells(stats), style=style)
    if s.eta_error.count:
        table.add_row("ETA error", *_stat_cells(s.eta_error))
    return table


def endpoint_table(s: Summary, *, open_loop: bool = True) -> Table:
    """One row per endpoint of a mix, then the total: counts, rate, ok requests' times, its SLO verdict."""
    total = "latency_s" if open_loop else "latency_from_send_s"
    table = Table(title="Per endpoint (ok requests; total time from the "
                  f"{'intended' if open_loop else 'actual'} send)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("endpoint", "n", "errors", "ok/s", "wait p95", "svc p50", "svc p95", "tot p50", "tot p95",
                "SLO"):
        table.add_column(col, justify="left" if col == "endpoint" else "right", no_wrap=col != "endpoint")
    rows = [*s.endpoints.items(), ("all", s)]
    for label, e in rows:
        checks = e.checks() if label == "all" else e.slo
        verdict = "" if not checks else "[green]pass[/]" if e.slo_passed else "[bold red]FAIL[/]"
        wait, service, lat = e.phase("queue_wait_s"), e.phase("service_s"), e.phase(total)
        table.add_row(label, f"{e.requests:,}", f"{e.errors:,}", f"{e.throughput_rps:.2f}", seconds(wait.p95),
                      seconds(service.p50), seconds(service.p95), seconds(lat.p50), seconds(lat.p95), verdict,
                      style="bold" if label == "all" else None)
    return table


def journey_table(j: JourneyStats) -> Table:
    """One row per journey step: requests, errors, queue wait, service and latency from the send."""
    table = Table(title="Per journey step (ok requests; latency from the actual send)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("step", "n", "errors", "wait p50", "wait p95", "svc p50", "svc p95", "lat p50", "lat p95"):
        table.add_column(col, justify="left" if col == "step" else "right", no_wrap=col != "step")
    for key, e in j.steps.items():
        wait, service, lat = e.phase("queue_wait_s"), e.phase("service_s"), e.phase("latency_from_send_s")
        table.add_row(key, f"{e.requests:,}", f"{e.errors:,}", seconds(wait.p50), seconds(wait.p95),
                      seconds(service.p50), seconds(service.p95), seconds(lat.p50), seconds(lat.p95))
    return table


def worker_table(s: Summary) -> Table:
    """One row per generator worker (process or Ray actor): a saturated or lost one stands out."""
    table = Table(title=f"Generators ({s.generator.executor})", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("#", "where", "requests", "CPU", "send lag p99", "max", "clock +-"):
        table.add_column(col, justify="left" if col == "where" else "right", overflow="fold")
    for w in s.generator.workers:
        cpu = "-" if w.cpu_percent is None else f"{w.cpu_percent:.0f}%"
        where = w.where if w.lost is None else f"{w.where} [bold red]LOST[/]"
        table.add_row(str(w.index), where, f"{w.requests:,}", cpu, seconds(w.p99_send_lag_s),
                      seconds(w.max_send_lag_s), seconds(w.clock_uncertainty_s))
    return table


def slo_table(s: Summary) -> Table:
    table = Table(title="SLO", title_justify="left")
    for col in ("threshold", "limit", "actual", "verdict"):
        table.add_column(col)
    for c in s.checks():
        limit = f"{'>=' if c.kind == 'min' else '<='} {c.threshold:g}"
        verdict = "[green]pass[/]" if c.passed else "[bold red]FAIL[/]"
        actual = (c.note or "-") if c.actual is None else f"{c.actual:.4g}"
        table.add_row(c.name, limit, actual, verdict)
    return table


def _stat_cells(stats: Stats) -> list[str]:
    cells = [seconds(getattr(stats, k)) for k in ("mean", "p50", "p90", "p95", "p99", "max")]
    return [f"{stats.count:,}", *cells]


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
