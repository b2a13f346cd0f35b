"""Capacity charts: a `qbench capacity` folder -> the knee (latency percentiles against offered rate,
the sustained confirmation marked) and, beside it, what happened past the capacity (ok completions/s and
the requests waiting over the run at 1.3x the capacity).

Reads only `capacity.json` (written by `qbench.tune.capacity_run`): its probes carry the offered rate,
p50/p95/p99 latency and the verdict of each; the SLO bounds and the answer (capacity, first failing rate)
are in the same file. Anything missing becomes a note on the report, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from qbench.report.charts import Chart, new_figure, note, save
from qbench.report.rundir import read_json

PERCENTILE_STYLE = {"p50": ("#2e9a4a", "-"), "p95": ("#1f5fa8", "-"), "p99": ("#8e44ad", "--")}
SLO_COLORS = {"p50": "#2e9a4a", "p90": "#e8871e", "p95": "#1f5fa8", "p99": "#8e44ad", "max": "#555555"}


@dataclass
class LoadedCapacity:
    """A capacity folder read back from disk."""

    path: Path
    info: dict[str, Any]  # capacity.json
    notes: list[str] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        result = self.info.get("result")
        return result if isinstance(result, dict) else {}

    @property
    def probes(self) -> list[dict[str, Any]]:
        probes = self.result.get("probes")
        return [p for p in probes if isinstance(p, dict)] if isinstance(probes, list) else []

    @property
    def rate_probes(self) -> list[dict[str, Any]]:
        """The open-loop probes, by offered rate (a repeated rate appears twice)."""
        return sorted((p for p in self.probes if p.get("kind") == "rate"), key=lambda p: float(p["rate_rps"]))


def is_capacity_dir(path: Path) -> bool:
    return (path / "capacity.json").exists()


def read_capacity(path: Path) -> LoadedCapacity:
    notes: list[str] = []
    info = read_json(path / "capacity.json", notes)
    data = LoadedCapacity(path, info, notes)
    if info and not data.rate_probes:
        notes.append("capacity.json holds no open-loop probe")
    return data


def knee(data: LoadedCapacity) -> Figure:
    """p50/p95/p99 against the offered rate, the SLO's latency bounds, the capacity and the first failure."""
    fig, (ax,) = new_figure(height=4.8)
    ax.set_title("Latency against offered rate: where the knee is")
    probes = data.rate_probes
    if not probes:
        note(ax, "No open-loop probe: nothing to plot")
        return fig
    rates = [float(p["rate_rps"]) for p in probes]
    for name, (color, style) in PERCENTILE_STYLE.items():
        points = [(r, p.get(f"{name}_latency_s")) for r, p in zip(rates, probes, strict=True)]
        shown = [(r, v) for r, v in points if isinstance(v, int | float)]
        if shown:
            ax.plot(*zip(*shown, strict=True), style, color=color, marker="o", ms=4, lw=1.5, label=name)
    held = [(float(p["rate_rps"]), p.get("p95_latency_s")) for p in data.probes
            if p.get("kind") == "confirm" and p.get("passed")
            and isinstance(p.get("p95_latency_s"), int | float)]
    if held:
        seconds = next((p.get("duration_s") for p in data.probes if p.get("kind") == "confirm"), None)
        label = f"p95 of the {seconds:g} s confirmation" if isinstance(seconds, int | float) else "confirmed"
        ax.plot(*zip(*held, strict=True), "*", color="#1e7b34", ms=14, label=label)
    failed = [(r, p.get("p95_latency_s")) for r, p in zip(rates, probes, strict=True) if not p.get("passed")]
    failed = [(r, v) for r, v in failed if isinstance(v, int | float)]
    if failed:
        ax.plot(*zip(*failed, strict=True), "x", color="#d62728", ms=9, mew=2, label="probe failed the SLO")
    _slo_lines(ax, data.info.get("slo") or {})
    _answer_lines(ax, data.result)
    ax.set_xlabel("offered load (open-loop arrivals, req/s)")
    ax.set_ylabel("latency (s), from the intended send time")
    values = [v for p in probes for k in ("p50", "p95", "p99")
              if isinstance(v := p.get(f"{k}_latency_s"), int | float) and v > 0]
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def _slo_lines(ax: Axes, slo: dict[str, Any]) -> None:
    for metric, bound in slo.items():
        stat, _, phase = str(metric).partition("_")
        if phase == "latency_s" and isinstance(bound, int | float):
            ax.axhline(bound, color=SLO_COLORS.get(stat, "#555555"), lw=1.2, ls=":",
                       label=f"SLO {metric} <= {bound:g}")


def _answer_lines(ax: Axes, result: dict[str, Any]) -> None:
    capacity, failing = result.get("capacity_rps"), result.get("failing_rate_rps")
    if isinstance(capacity, int | float):
        ax.axvline(capacity, color="#1e7b34", lw=2, label=f"capacity {capacity:.3g} req/s")
    if isinstance(failing, int | float):
        ax.axvline(failing, color="#d62728", lw=1.2, ls="--", label=f"SLO first fails {failing:.3g} req/s")
    if isinstance(capacity, int | float) and isinstance(failing, int | float):
        ax.axvspan(capacity, failing, color="#e8871e", alpha=0.15, lw=0)


def overload_chart(overload: dict[str, Any]) -> Figure:
    """Ok completions/s and requests waiting over the run past the capacity."""
    fig, (ax,) = new_figure(height=4.0)
    ax.set_title(f"Past the capacity: {_num(overload.get('rate_rps'))} req/s offered")
    series = [row for row in overload.get("series") or [] if isinstance(row, list) and len(row) == 3]
    if not series:
        note(ax, "No series recorded")
        return fig
    t, ok, waiting = zip(*series, strict=True)
    ax.plot(t, ok, "-o", color="#1f5fa8", ms=4, label="ok completions/s")
    capacity = overload.get("capacity_rps")
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
    overload = data.result.get("overload")
    if isinstance(overload, dict):
        path = save(overload_chart(overload), out_dir / "capacity_overload.png")
        caption = ("One run at 1.3x the capacity, not stopped early: ok completions per second (left axis) "
                   "and requests waiting (right axis) over the run. " + str(overload.get("advice", "")))
        charts.append(Chart("capacity_overload", "Past the capacity: does throughput hold?", caption, path))
    return charts
