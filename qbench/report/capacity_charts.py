"""Capacity charts: a `qbench capacity` folder's capacity.json -> the knee (latency against offered rate) and
what happened past the capacity; anything missing becomes a note, never a crash."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from qbench.report.charts import Chart, new_figure, note, save
from qbench.report.rundir import read_json
from qbench.tune import Capacity, CapacityFile, Overload, plan_lines

PERCENTILE_STYLE = {"p50": ("#2e9a4a", "-"), "p95": ("#1f5fa8", "-"), "p99": ("#8e44ad", "--")}
SLO_COLORS = {"p50": "#2e9a4a", "p90": "#e8871e", "p95": "#1f5fa8", "p99": "#8e44ad", "max": "#555555"}


@dataclass
class LoadedCapacity:
    path: Path
    file: CapacityFile  # capacity.json (every field at its default when missing)
    notes: list[str] = field(default_factory=list)
    plan: list[tuple[str, str]] = field(default_factory=list)  # plan.json's lines (`qbench plan`), if any


def is_capacity_dir(path: Path) -> bool:
    return (path / "capacity.json").exists()


def read_capacity(path: Path) -> LoadedCapacity:
    notes: list[str] = []
    raw = read_json(path / "capacity.json", notes)
    data = LoadedCapacity(path, CapacityFile.from_dict(raw), notes)
    if raw and not data.file.rate_probes:
        notes.append("capacity.json holds no open-loop probe")
    if (path / "plan.json").exists():
        data.plan = plan_lines(read_json(path / "plan.json", notes))
    return data


def knee(data: LoadedCapacity) -> Figure:
    """p50/p95/p99 against the offered rate, the SLO's latency bounds, the capacity and the first failure."""
    fig, (ax,) = new_figure(height=4.8)
    ax.set_title("Latency against offered rate: where the knee is")
    probes = data.file.rate_probes
    if not probes:
        note(ax, "No open-loop probe: nothing to plot")
        return fig
    for name, (color, style) in PERCENTILE_STYLE.items():
        shown = [(p.rate_rps, v) for p in probes if (v := getattr(p, f"{name}_latency_s")) is not None]
        if shown:
            ax.plot(*zip(*shown, strict=True), style, color=color, marker="o", ms=4, lw=1.5, label=name)
    confirms = [p for p in data.file.probes if p.kind == "confirm"]
    held = [(p.rate_rps, p.p95_latency_s) for p in confirms if p.passed and p.p95_latency_s is not None]
    if held:
        seconds = confirms[0].duration_s
        label = f"p95 of the {seconds:g} s confirmation" if seconds else "confirmed"
        ax.plot(*zip(*held, strict=True), "*", color="#1e7b34", ms=14, label=label)
    failed = [(p.rate_rps, p.p95_latency_s) for p in probes if not p.passed and p.p95_latency_s is not None]
    if failed:
        ax.plot(*zip(*failed, strict=True), "x", color="#d62728", ms=9, mew=2, label="probe failed the SLO")
    _slo_lines(ax, data.file.slo)
    _answer_lines(ax, data.file.result)
    ax.set_xlabel("offered load (open-loop arrivals, req/s)")
    ax.set_ylabel("latency (s), from the intended send time")
    values = [v for p in probes for v in (p.p50_latency_s, p.p95_latency_s, p.p99_latency_s) if v and v > 0]
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def _slo_lines(ax: Axes, slo: dict[str, float]) -> None:
    for metric, bound in slo.items():
        stat, _, phase = metric.partition("_")
        if phase == "latency_s":
            ax.axhline(bound, color=SLO_COLORS.get(stat, "#555555"), lw=1.2, ls=":",
                       label=f"SLO {metric} <= {bound:g}")


def _answer_lines(ax: Axes, result: Capacity) -> None:
    capacity, failing = result.capacity_rps, result.failing_rate_rps
    if capacity is not None:
        ax.axvline(capacity, color="#1e7b34", lw=2, label=f"capacity {capacity:.3g} req/s")
    if failing is not None:
        ax.axvline(failing, color="#d62728", lw=1.2, ls="--", label=f"SLO first fails {failing:.3g} req/s")
    if capacity is not None and failing is not None:
        ax.axvspan(capacity, failing, color="#e8871e", alpha=0.15, lw=0)


def overload_chart(overload: Overload) -> Figure:
    """Ok completions/s and requests waiting over the run past the capacity."""
    fig, (ax,) = new_figure(height=4.0)
    ax.set_title(f"Past the capacity: {_num(overload.rate_rps)} req/s offered")
    series = [row for row in overload.series if isinstance(row, list) and len(row) == 3]
    if not series:
        note(ax, "No series recorded")
        return fig
    t, ok, waiting = zip(*series, strict=True)
    ax.plot(t, ok, "-o", color="#1f5fa8", ms=4, label="ok completions/s")
    capacity = overload.capacity_rps
    if isinstance(capacity, int | float):
        ax.axhline(capacity, color="#1e7b34", lw=1.2, ls=":", label=f"capacity {capacity:.3g} req/s")
    ax.set_xlabel("time in the run (s)")
    ax.set_ylabel("req/s")
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    right.plot(t, waiting, "--", color="#d62728", lw=1.5, label="requests waiting")
    right.set_ylabel("requests waiting")
    right.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="lower left", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "?"


def render_capacity_charts(data: LoadedCapacity, out_dir: Path) -> list[Chart]:
    path = save(knee(data), out_dir / "capacity_knee.png")
    caption = ("p50, p95 and p99 latency of each open-loop probe against its offered rate; dotted lines are "
               "the SLO's latency bounds, the green line the capacity (last passing rate), the star the p95 "
               "of the sustained confirmation that held, the dashed red line the first failing rate; the "
               "shaded band between them is the answer's uncertainty.")
    charts = [Chart("capacity_knee", "Latency against offered rate (the knee)", caption, path)]
    overload = data.file.overload
    if overload is not None:
        path = save(overload_chart(overload), out_dir / "capacity_overload.png")
        caption = ("One run at 1.3x the capacity, not stopped early: ok completions per second (left axis) "
                   "and requests waiting (right axis) over the run. " + overload.advice)
        charts.append(Chart("capacity_overload", "Past the capacity: does throughput hold?", caption, path))
    return charts
