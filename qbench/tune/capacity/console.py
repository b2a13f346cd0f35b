"""What `qbench capacity` shows: its first line, a line per probe, the probe table and the answer."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from qbench.tune.capacity.command import CapacityConfig, CapacityRun
from qbench.tune.values.ceiling import Capacity, Probe
from qbench.tune.values.constraints import bounds_text


def seconds(value: float | None) -> str:
    """A figure in seconds for a table cell ("-": none)."""
    return "-" if value is None else f"{value:.3g} s"


def capacity_header(config: CapacityConfig) -> str:
    """The line `qbench capacity` starts with: target, SLO, probe lengths, tolerance, folder."""
    bounds = bounds_text(config.constraints.slo)
    confirming = f", {config.confirm_duration_s:g} s confirmation" if config.plan.confirm else ""
    return (f"capacity of {config.target} under {bounds} ({config.probe_duration_s:g} s bracketing "
            f"probes, bisection up to {config.max_probe_duration_s:g} s{confirming}, "
            f"tolerance {config.plan.tolerance:.0%}): {config.out_dir}")


_PROBE_STYLE = {"pass": "green", "fail": "yellow", "runaway": "red", "estimate": "cyan",
                "overload": "magenta", "stalled": "dim", "recheck": "blue"}


def _label(probe: Probe) -> str:
    """'' for the bracket's probes; 'confirm 60 s' / 'overload' / '12 s' for the others."""
    if probe.kind in ("confirm", "overload", "recheck", "after", "now"):
        return f"{probe.kind} {probe.duration_s:g} s " if probe.duration_s else f"{probe.kind} "
    return ""


def show_probe(console: Console, probe: Probe) -> None:
    """Print `probe_line` as plain text ("[arrivals .../s, completions .../s]" is not rich markup)."""
    console.print(probe_line(probe), markup=False)


def probe_line(probe: Probe) -> str:
    """One line per finished probe, while the search runs."""
    if probe.kind == "estimate":
        return (f"  estimate: {probe.users} closed-loop users -> {probe.rate_rps:.3g} completions/s "
                f"(users / mean latency), p95 {seconds(probe.p95_latency_s)}")
    why = probe.why
    evidence = probe.steadiness.evidence if probe.steadiness is not None else ""
    steady = evidence if probe.passed or probe.kind == "overload" else ""
    length = f" {probe.duration_s:g} s" if probe.duration_s and probe.kind == "rate" else ""
    return (f"  {_label(probe)}{probe.rate_rps:.4g} req/s{length}: {probe.verdict}, p95 "
            f"{seconds(probe.p95_latency_s)}, {probe.throughput_rps:.3g} ok/s" + (f" ({why})" if why else "")
            + (f" [{steady}]" if steady else ""))


def probe_table(capacity: Capacity) -> Table:
    """Every probe in the order it ran: offered rate, what came back, the verdict and why."""
    table = Table(title=f"qbench capacity: {len(capacity.probes)} probes", title_justify="left")
    for col in ("#", "offered/s", "ok/s", "p50", "p95", "p99", "err", "verdict"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("why", min_width=30, overflow="fold")
    for n, p in enumerate(capacity.probes):
        offered = f"{p.users} users" if p.kind == "estimate" else f"{_label(p)}{p.rate_rps:.4g}"
        table.add_row(
            str(n), offered, f"{p.throughput_rps:.3g}", seconds(p.p50_latency_s), seconds(p.p95_latency_s),
            seconds(p.p99_latency_s), f"{p.error_rate:.1%}", p.verdict, p.why,
            style=_PROBE_STYLE.get(p.verdict, ""),
        )
    return table


def render_capacity(run: CapacityRun, console: Console) -> None:
    console.print(probe_table(run.capacity))
    for n, (label, text) in enumerate(run.lines):
        style = "bold green" if n == 0 and run.capacity.capacity_rps else "bold"
        console.print(f"[{style}]{label}:[/] {text}")
    console.print(f"files: {run.out_dir}")
