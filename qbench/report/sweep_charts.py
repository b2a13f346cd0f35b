"""Sweep charts: a sweep folder -> heatmaps, a Pareto plot and per-point latency distributions; anything
missing becomes a note on the report, never a crash."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps, colors
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from qbench.report.chart_columns import fmt_s
from qbench.report.charts import Chart, new_figure, nines_axis, note, percentile_curve, save
from qbench.report.rundir import read_json
from qbench.run import json_number, read_records
from qbench.tune import Recommendation, SweepInfo, read_point_file

#: Columns of sweep.parquet that are measurements, not knobs.
METRIC_COLUMNS = frozenset({
    "point_id", "goodput_rps", "throughput_rps", "p50_latency_s", "p95_latency_s", "p99_latency_s",
    "error_rate", "peak_rss_mb", "peak_gpu_mem_mb", "status", "reason", "rank", "verdict", "goodput_ci_low",
    "goodput_ci_high", "repeats", "capacity_rps",
})
MAX_FACETS = 6


@dataclass
class LoadedSweep:
    path: Path
    info: SweepInfo  # sweep.json (every field at its default when missing)
    rows: list[dict[str, Any]]  # sweep.parquet, one per measured point
    recommendation: Recommendation | None  # recommendation.json (None when missing)
    knobs: dict[str, list[Any]]  # swept knob -> its values in grid order (only knobs with >1 value)
    notes: list[str] = field(default_factory=list)
    search: dict[str, Any] = field(default_factory=dict)  # recommendation.json's search (SearchResult)

    @property
    def winner_id(self) -> str | None:
        winner = self.recommendation.winner if self.recommendation is not None else None
        return winner.point_id if winner is not None else None

    def label(self, row: dict[str, Any]) -> str:
        return ", ".join(f"{k}={row.get(k)}" for k in self.knobs) or str(row.get("point_id"))

    def short_label(self, row: dict[str, Any]) -> str:
        """The knob values only, in knob order ('2/4/40')."""
        return "/".join(str(row.get(k)) for k in self.knobs) or str(row.get("point_id"))


def read_sweep(path: Path) -> LoadedSweep:
    notes: list[str] = []
    info = SweepInfo.from_dict(read_json(path / "sweep.json", notes))
    raw = read_json(path / "recommendation.json", notes)
    recommendation = Recommendation.from_dict(raw) if raw else None
    search = raw.get("search") if isinstance(raw.get("search"), dict) else {}
    rows = _read_rows(path, notes)
    return LoadedSweep(path, info, rows, recommendation, _knobs(info, rows), notes, search or {})


def _read_rows(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    file = path / "sweep.parquet"
    if file.exists():
        import pyarrow.parquet as pq

        try:
            rows: list[dict[str, Any]] = pq.read_table(file).to_pylist()
            return rows
        except (OSError, ValueError) as exc:
            notes.append(f"sweep.parquet could not be read: {exc}")
    else:
        notes.append("sweep.parquet is missing (sweep not finished?): rows rebuilt from points/*/point.json")
    return [_row_from_point(p, notes) for p in sorted((path / "points").glob("*/point.json"))]


def _row_from_point(path: Path, notes: list[str]) -> dict[str, Any]:
    point = read_point_file(path.parent)
    if point is None:
        notes.append(f"{path} could not be read")
        return {"point_id": path.parent.name}
    row: dict[str, Any] = {**(point.result.to_dict() if point.result is not None else {}), **point.knobs}
    row.update(point_id=point.point_id, status=point.status, reason=point.reason)
    return row


def _knobs(info: SweepInfo, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    axes = info.axes
    if axes is None:
        names = list(dict.fromkeys(k for row in rows for k in row if k not in METRIC_COLUMNS))
        axes = {n: list(dict.fromkeys(row.get(n) for row in rows)) for n in names}
    present = {k for row in rows for k in row}
    return {k: list(v) for k, v in axes.items() if len(v) > 1 and (k in present or not rows)}


def _same(a: Any, b: Any) -> bool:
    """Knob values equal as written (sweep.parquet stores a mixed-type knob, 4 / "none", as text)."""
    return a == b or str(a) == str(b)


def _log_if_wide(ax: Axes, values: Sequence[float]) -> None:
    """Log scale on y when the values span more than 20x (long-tailed points would squash the rest)."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")


def _num(value: Any) -> float:
    """A number of sweep.parquet's rows; NaN (not drawn) for anything else."""
    number = json_number(value)
    return float("nan") if number is None else number


# ---------------------------------------------------------------- heatmaps


def heatmap_axes(data: LoadedSweep, wanted: tuple[str, str] | None = None) -> tuple[str | None, str | None]:
    """(x knob, y knob): the ones asked for, else the two swept knobs with the most values."""
    if wanted is not None:
        return wanted
    ranked = sorted(data.knobs, key=lambda k: -len(data.knobs[k]))
    return (ranked[0] if ranked else None), (ranked[1] if len(ranked) > 1 else None)


def heatmaps(data: LoadedSweep, metric: str, title: str, axes: tuple[str, str] | None = None) -> Figure:
    """`metric` over two knobs, one panel per combination of the other knobs (up to MAX_FACETS)."""
    x, y = heatmap_axes(data, axes)
    rows = [r for r in data.rows if r.get(metric) is not None or r.get("status") not in (None, "ok")]
    others = [k for k in data.knobs if k not in (x, y)]
    facets = list(itertools.product(*(data.knobs[k] for k in others))) or [()]
    shown = facets[:MAX_FACETS]
    cols = min(3, len(shown))
    nrows = -(-len(shown) // cols)
    fig = Figure(figsize=(4.6 * cols + 1, 3.9 * nrows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, cols, squeeze=False)
    cut = f" (first {MAX_FACETS} of {len(facets)} panels)" if len(facets) > MAX_FACETS else ""
    fig.suptitle(title + cut)
    if x is None or not rows:
        note(grid[0][0], "No swept knob with more than one value" if x is None else f"No {metric} measured")
        return fig
    good_high = not metric.startswith("p")
    finite = [_num(r.get(metric)) for r in rows if np.isfinite(_num(r.get(metric)))]
    vmin, vmax = (min(finite), max(finite)) if finite else (0.0, 1.0)
    for ax, facet in itertools.zip_longest(grid.flat, shown):
        if facet is None:
            ax.set_visible(False)
            continue
        sel = [r for r in rows if all(_same(r.get(k), v) for k, v in zip(others, facet, strict=True))]
        _heatmap_panel(ax, data, sel, metric, x, y, (vmin, vmax), good_high)
        ax.set_title(", ".join(f"{k}={v}" for k, v in zip(others, facet, strict=True)) or metric, fontsize=10)
    return fig


def _heatmap_panel(
    ax: Axes, data: LoadedSweep, rows: list[dict[str, Any]], metric: str, x: str, y: str | None,
    limits: tuple[float, float], good_high: bool,
) -> None:
    xs = [str(v) for v in data.knobs[x]]
    ys = [str(v) for v in data.knobs[y]] if y else ["None"]
    values = np.full((len(ys), len(xs)), np.nan)
    labels = [["" for _ in xs] for _ in ys]
    for row in rows:
        if str(row.get(x)) not in xs or (y and str(row.get(y)) not in ys):
            continue
        i, j = ys.index(str(row.get(y))) if y else 0, xs.index(str(row.get(x)))
        values[i, j] = _num(row.get(metric))
        status = row.get("status")
        labels[i][j] = _cell_text(values[i, j], metric) if status in (None, "ok") else str(status)
        if row.get("point_id") == data.winner_id:
            ax.add_patch(_winner_box(j, i))
    cmap = colormaps["RdYlGn" if good_high else "RdYlGn_r"].with_extremes(bad="#dddddd")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=limits[0], vmax=limits[1], origin="lower",
                      aspect="auto")
    for i, j in itertools.product(range(len(ys)), range(len(xs))):
        ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys if y else [""])
    ax.set_xlabel(x)
    ax.set_ylabel(y or "")
    ax.figure.colorbar(image, ax=ax, shrink=0.85, label=metric)


def _cell_text(value: float, metric: str) -> str:
    if not np.isfinite(value):
        return "n/a"
    return fmt_s(value) if metric.endswith("_s") else f"{value:.3g}"


def _winner_box(j: int, i: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#000000", lw=3, zorder=5)


# ---------------------------------------------------------------- Pareto


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both (higher throughput, lower p95), by throughput."""
    front = [i for i, (t, p) in enumerate(points)
             if not any((t2 >= t and p2 <= p) and (t2, p2) != (t, p) for t2, p2 in points)]
    return sorted(front, key=lambda i: points[i][0])


_VERDICT_COLORS = {"winner": "#000000", "tied": "#1f5fa8", "feasible": "#2e9a4a", "infeasible": "#e8871e"}


def pareto(data: LoadedSweep) -> Figure:
    fig, (ax,) = new_figure(height=5.0)
    ax.set_title("Throughput vs. p95 latency per point (Pareto front; the recommended point starred)")
    rows = [r for r in data.rows if np.isfinite(_num(r.get("throughput_rps")))
            and np.isfinite(_num(r.get("p95_latency_s")))]
    if not rows:
        note(ax, "No point has both a throughput and a p95 latency")
        return fig
    pts = [(_num(r["throughput_rps"]), _num(r["p95_latency_s"])) for r in rows]
    front = pareto_front(pts)
    ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], color="#888888", lw=1.2, ls="--",
            zorder=1, label="Pareto front")
    for verdict, color in _VERDICT_COLORS.items():
        sel = [p for p, r in zip(pts, rows, strict=True) if (r.get("verdict") or "feasible") == verdict
               and r.get("point_id") != data.winner_id]
        if sel:
            ax.scatter([t for t, _ in sel], [p for _, p in sel], s=36, color=color, label=verdict, zorder=2)
    for i, ((t, p), row) in enumerate(zip(pts, rows, strict=True)):
        if i in front or row.get("point_id") == data.winner_id:
            ax.annotate(data.short_label(row), (t, p), textcoords="offset points", xytext=(6, 4), fontsize=8)
        if row.get("point_id") == data.winner_id:
            ax.scatter([t], [p], marker="*", s=320, color="#ffcc00", edgecolor="#000000", zorder=3,
                       label=f"recommended: {data.label(row)}")
    slo = data.info.slo
    if slo.get("p95_latency_s"):
        ax.axhline(float(slo["p95_latency_s"]), color="#d62728", lw=1, ls=":", label="SLO p95 bound")
    ax.set_xlabel("throughput (ok requests / s)")
    ax.set_ylabel("p95 latency (s)")
    _log_if_wide(ax, [p for _, p in pts])
    ax.legend(loc="best", fontsize=8, title=f"labels: {'/'.join(data.knobs)}", title_fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


# ---------------------------------------------------------------- per-point distributions

MAX_CURVES = 12


def point_distributions(data: LoadedSweep) -> Figure:
    fig, (ax,) = new_figure(height=5.0)
    ax.set_title("Latency distribution per point (ok requests, warm-up excluded; best-ranked points)")
    rows = sorted((r for r in data.rows if r.get("status") in (None, "ok")),
                  key=lambda r: (r.get("rank") is None, r.get("rank") or 0))[:MAX_CURVES]
    cmap = colormaps["viridis"]
    most, medians = 0, []
    for i, row in enumerate(rows):
        latency = _point_latencies(data.path / "points" / str(row.get("point_id")))
        if latency.size == 0:
            continue
        most = max(most, latency.size)
        medians.append(float(np.median(latency)))
        winner = row.get("point_id") == data.winner_id
        color = "#000000" if winner else colors.to_hex(cmap(i / max(1, len(rows) - 1)))
        label = ("* " if winner else "") + data.label(row)
        percentile_curve(ax, latency, color, label, lw=3 if winner else 1.3, marks=False,
                         zorder=3 if winner else 2)
    if most == 0:
        note(ax, "No point's records could be read")
        return fig
    nines_axis(ax, most)
    _log_if_wide(ax, medians)
    ax.set_ylabel("latency from intended send (s)")
    fig.legend(loc="outside lower center", fontsize=7, ncols=3)
    return fig


def _point_latencies(point_dir: Path) -> np.ndarray:
    try:
        records = read_records(point_dir)
    except (OSError, ValueError):
        return np.array([])
    values = [r.latency_s for r in records if r.ok and not r.warmup and r.latency_s is not None]
    return np.sort(np.array(values, dtype=float))


def render_sweep_charts(data: LoadedSweep, out_dir: Path, axes: tuple[str, str] | None = None) -> list[Chart]:
    specs: list[tuple[str, str, str, Callable[[], Figure]]] = [
        ("goodput_heatmap", "Goodput by knobs", "Requests/s that completed within the SLO; the black "
         "box is the recommended point.", lambda: heatmaps(data, "goodput_rps", "Goodput (req/s)", axes)),
        ("p95_heatmap", "p95 latency by knobs", "95th percentile latency from the intended send time.",
         lambda: heatmaps(data, "p95_latency_s", "p95 latency", axes)),
        ("pareto", "Throughput vs. p95 latency", "Points on the dashed front are not beaten on both axes.",
         lambda: pareto(data)),
        ("point_distributions", "Latency distribution per point",
         "Percentile curves of the best-ranked points; the recommended point is the thick black line.",
         lambda: point_distributions(data)),
    ]
    charts = []
    for name, title, caption, draw in specs:
        charts.append(Chart(name, title, caption, save(draw(), out_dir / f"{name}.png")))
    return charts
