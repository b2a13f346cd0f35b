"""Run charts: one run's records, as columns, -> PNG figures in bounded memory however long the run; a chart
with nothing to show renders a note saying why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from qbench.report.chart_columns import MAX_POINTS, RunColumns, fmt_s, points_label, time_bins
from qbench.run import Columns, RequestRecord, libc

#: One colour per latency phase, the same in every chart.
PHASE_COLORS = {
    "latency_s": "#1f5fa8", "queue_wait_s": "#e8871e", "service_s": "#2e9a4a", "ttfo_s": "#8e44ad",
}
PHASE_LABELS = {
    "latency_s": "total (from intended send)", "queue_wait_s": "queue wait", "service_s": "service",
    "ttfo_s": "time to first output",
}
MARKED_PERCENTILES = (50.0, 95.0, 99.0)
CURVE_POINTS = 4_000  # a percentile curve of more values is drawn at this many quantiles
_KIND_COLORS = {
    "queue_full": "#d62728", "server_error": "#9467bd", "timeout": "#8c564b", "http_5xx": "#e377c2",
    "http_4xx": "#f7b6d2", "connect": "#7f7f7f", "stream_broken": "#17becf", "deadline": "#bcbd22",
    "interrupted": "#c7c7c7", "cancelled": "#aec7e8", "client": "#393b79",
}
DPI = 100


def error_color(kind: str) -> str:
    """A stable colour per error kind (unknown kinds are black)."""
    return _KIND_COLORS.get(kind, "#000000")


# ---------------------------------------------------------------- figure helpers


def new_figure(rows: int = 1, height: float = 4.2, width: float = 10.0) -> tuple[Figure, list[Axes]]:
    """A figure with `rows` stacked axes sharing the x axis, on an Agg canvas."""
    fig = Figure(figsize=(width, height * rows if rows > 1 else height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def note(ax: Axes, text: str) -> None:
    """Write a centred note on an axes that has nothing to plot."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def shade_warmup(ax: Axes, data: RunColumns) -> None:
    window = data.warmup_window()
    if window is not None:
        ax.axvspan(window[0], window[1], color="#bbbbbb", alpha=0.35, lw=0, label="warm-up (excluded)")


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path


# ---------------------------------------------------------------- percentile plot (HdrHistogram style)

_NINES_TICKS = (
    (0.0, "p0"), (np.log10(2), "p50"), (1.0, "p90"), (2.0, "p99"), (3.0, "p99.9"), (4.0, "p99.99"),
)


def nines(q: np.ndarray) -> np.ndarray:
    """Quantile (0..1) -> position on a 'nines' axis, -log10(1 - q): p90, p99, p99.9 evenly spaced."""
    return np.asarray(-np.log10(1.0 - q))


def percentile_curve(
    ax: Axes, values: np.ndarray, color: str, label: str, lw: float = 1.8, *, marks: bool = True,
    zorder: int = 2, in_place: bool = False,
) -> bool:
    """Plot `values` by quantile on a nines axis (`marks`: p50/p95/p99); False if none; `in_place`: sorts."""
    values = _finite_sorted(values, in_place)
    if values.size == 0:
        return False
    x, y = _curve(values)
    # The last value holds up to q = 1 - 1/n; a lone value is drawn as a short step rather than a dot.
    ax.plot(np.append(x, max(x[-1], np.log10(2))), np.append(y, values[-1]), color=color, lw=lw,
            label=label, drawstyle="steps-post", zorder=zorder)
    for p in MARKED_PERCENTILES if marks else ():
        v = float(np.percentile(values, p))
        at = float(nines(np.array(p / 100.0)))
        ax.plot([at], [v], "o", color=color, ms=4)
        ax.annotate(f"p{p:g} {fmt_s(v)}", (at, v), textcoords="offset points", xytext=(4, 4),
                    fontsize=8, color=color)
    return True


def _finite_sorted(values: np.ndarray, in_place: bool) -> np.ndarray:
    """The finite values, sorted: a copy, or (`in_place`) `values` sorted and its finite stretch."""
    if not in_place:
        values = values[np.isfinite(values)]
        values.sort()
        return values
    values.sort()
    first = int(np.searchsorted(values, -np.inf, side="right"))
    last = int(np.searchsorted(values, np.inf, side="left"))
    return values[first:last]


def _curve(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nines positions, values) of sorted `values`: all up to CURVE_POINTS, else that many and the last."""
    n = values.size
    if n <= CURVE_POINTS:
        return nines(np.arange(n) / n), values
    top = float(nines(np.array((n - 1) / n)))
    at = np.unique(np.minimum(np.floor((1.0 - 10.0 ** -np.linspace(0.0, top, CURVE_POINTS)) * n), n - 1))
    index = np.append(at.astype(np.int64), n - 1)
    index = np.unique(index)
    return nines(index / n), values[index]


def nines_axis(ax: Axes, n: int) -> None:
    top = max(1.0, np.log10(max(n, 2)))
    ax.set_xticks([x for x, _ in _NINES_TICKS if x <= top + 0.01],
                  [lab for x, lab in _NINES_TICKS if x <= top + 0.01])
    ax.set_xlim(0, top * 1.02)
    ax.set_xlabel("percentile (log scale of 1 - q: p90, p99, p99.9 evenly spaced)")
    ax.grid(True, alpha=0.3)


# ---------------------------------------------------------------- the run charts


def latency_distribution(data: RunColumns) -> Figure:
    fig, (ax,) = new_figure(height=4.8)
    ok = data.measured & data.ok
    drawn = [percentile_curve(ax, data.phase(name, ok), PHASE_COLORS[name], PHASE_LABELS[name], in_place=True)
             for name in PHASE_COLORS]
    if not any(drawn):
        note(ax, "No completed requests: no latency to show")
    else:
        nines_axis(ax, int(np.isfinite(data.phase("latency_s", ok)).sum()))
        ax.set_ylabel("seconds")
        ax.legend(loc="upper left")
    ax.set_title("Latency distribution by phase (ok requests, warm-up excluded)")
    return fig


def latency_over_time(data: RunColumns) -> Figure:
    fig, (top, bottom) = new_figure(rows=2, height=3.4)
    top.set_title("Latency over time (by intended send time) and request rates")
    shade_warmup(top, data)
    _latency_dots(top, data)
    _rates(bottom, data)
    return fig


def _latency_dots(top: Axes, data: RunColumns) -> None:
    """Each request's latency by intended send time (a stated sample of a long run), percentiles per bin."""
    latency = data.phase("latency_s")
    if not np.isfinite(latency).any():
        note(top, "No request completed: no latency to show")
        return
    intended = data.intended
    ok = data.ok & np.isfinite(latency)
    bad = ~data.ok & np.isfinite(latency)
    drawn = data.sample(ok | bad)
    sampled = points_label(int(drawn.sum()), int((ok | bad).sum()))
    if ok.any():
        size = 5 if ok.sum() > 1000 else 14  # small runs: dots big enough to see
        shown = ok & drawn
        top.scatter(intended[shown], latency[shown], s=size, color=PHASE_COLORS["latency_s"], alpha=0.6,
                    lw=0, label="ok request")
    if bad.any():
        shown = bad & drawn
        top.scatter(intended[shown], latency[shown], s=10, marker="x", color="#d62728", lw=0.8,
                    label="failed request")
    _rolling_percentiles(top, intended, latency, ok, data)
    if sampled:
        top.set_title(f"Latency over time (by intended send time) and request rates\ndots: {sampled}")
    top.set_ylabel("latency (s)")
    top.set_ylim(0, float(np.nanmax(latency)) * 1.08 or None)
    top.ticklabel_format(axis="y", useOffset=False)
    top.legend(loc="upper left", fontsize=8, ncols=3)
    top.grid(True, alpha=0.3)


def _rolling_percentiles(ax: Axes, t: np.ndarray, v: np.ndarray, rows: np.ndarray, data: RunColumns) -> None:
    """p50 and p95 of `v` per time bin of `t`, over `rows` (a mask per bin, never an index per row)."""
    if rows.sum() < 2:
        return
    edges = time_bins(data.span(), target=60)
    centres, p50, p95 = [], [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        part = v[rows & (t >= lo) & (t < hi)]
        if part.size:
            centres.append((lo + hi) / 2)
            p50.append(np.percentile(part, 50))
            p95.append(np.percentile(part, 95))
    ax.plot(centres, p50, color="#0b2e59", lw=1.5, label="p50 per bin")
    ax.plot(centres, p95, color="#0b2e59", lw=1.5, ls="--", label="p95 per bin")


def _rates(ax: Axes, data: RunColumns) -> None:
    edges = time_bins(data.span(), target=50)
    width = float(edges[1] - edges[0])
    shade_warmup(ax, data)
    series = (
        ("arrivals (intended)", lambda: data.intended, "#555555", "-"),
        ("sent", lambda: data.sent, "#999999", ":"),
        ("completions (ok)", lambda: data.completed[data.ok], "#2e9a4a", "-"),
        ("errors", lambda: data.completed[~data.ok], "#d62728", "-"),
    )
    for label, column, color, style in series:
        times = column()
        counts, _ = np.histogram(times[np.isfinite(times)], bins=edges)
        if counts.any() or label.startswith("arrivals"):
            ax.stairs(counts / width, edges, color=color, ls=style, lw=1.5, label=label)
    ax.set_ylabel("requests / s")
    ax.set_xlabel(f"time since run start (s); bins of {width:g} s")
    ax.legend(loc="upper left", fontsize=8, ncols=4)
    ax.grid(True, alpha=0.3)


def inflight_and_rank(data: RunColumns) -> Figure:
    fig, (top, bottom) = new_figure(rows=2, height=3.4)
    top.set_title("Requests in flight and reported queue rank")
    shade_warmup(top, data)
    if np.isfinite(data.sent).any():
        grid = np.linspace(*data.span(), 800)
        queued, running = data.in_flight(grid)
        top.stackplot(grid, queued, running, colors=[PHASE_COLORS["queue_wait_s"], PHASE_COLORS["service_s"]],
                      labels=["waiting in queue (sent, not started)", "running (started, not finished)"],
                      alpha=0.75, step="post")
        top.set_ylim(bottom=0)
        top.set_ylabel("requests")
        top.legend(loc="upper left", fontsize=8)
        top.grid(True, alpha=0.3)
    else:
        note(top, "No request was sent")
    shade_warmup(bottom, data)
    has_rank = np.isfinite(data.rank)
    if not has_rank.any():
        note(bottom, "No queue estimation messages (rank) were received")
    else:
        drawn = data.sample(has_rank)
        estimation = data.estimation[drawn]
        bottom.scatter(estimation, data.queue_size[drawn], s=6, color="#aaaaaa",
                       label="queue size (first estimation)")
        bottom.scatter(estimation, data.rank[drawn], s=6,
                       color=PHASE_COLORS["queue_wait_s"], label="rank on join (0 = next)")
        sampled = points_label(int(drawn.sum()), int(has_rank.sum()))
        if sampled:
            bottom.set_title(f"dots: {sampled}", fontsize=9, loc="right")
        bottom.set_ylabel("position")
        bottom.legend(loc="upper left", fontsize=8)
        bottom.grid(True, alpha=0.3)
    bottom.set_xlabel("time since run start (s)")
    return fig


def errors_over_time(data: RunColumns) -> Figure:
    fig, (ax,) = new_figure()
    kinds = data.error_counts()
    ax.set_title("Errors by kind over time" + (f" ({sum(kinds.values())} errors)" if kinds else ""))
    if not kinds:
        note(ax, "No errors in this run")
        return fig
    shade_warmup(ax, data)
    edges = time_bins(data.span())
    width = float(edges[1] - edges[0])
    bottom = np.zeros(len(edges) - 1)
    when = data.error_time()
    for kind, total in sorted(kinds.items(), key=lambda kv: -kv[1]):
        counts, _ = np.histogram(when[data.failed_with(kind)], bins=edges)
        ax.bar(edges[:-1], counts / width, width=width, bottom=bottom, align="edge", color=error_color(kind),
               label=f"{kind} ({total})")
        bottom += counts / width
    ax.set_ylabel("errors / s")
    ax.set_xlabel(f"time the request failed, since run start (s); bins of {width:g} s")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def eta_accuracy(data: RunColumns) -> Figure:
    fig = Figure(figsize=(10, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    scatter_ax, hist_ax = fig.subplots(1, 2, width_ratios=[1.2, 1])
    fig.suptitle("ETA accuracy: server's first estimate vs. the real time to the result")
    mask = data.eta_mask()
    estimated, actual = data.eta_pairs(mask)
    if estimated.size == 0:
        note(scatter_ax, "No ETA estimates with a completed result")
        note(hist_ax, "(HTTP targets and unqueued events send no ETA)")
        return fig
    top = float(max(estimated.max(), actual.max(), 1e-3))
    drawn = data.sample(mask)[mask]  # of the pairs
    shown_estimated, shown_actual = estimated[drawn], actual[drawn]
    scatter_ax.scatter(shown_actual, shown_estimated, s=6, alpha=0.5, color=PHASE_COLORS["queue_wait_s"])
    scatter_ax.plot([0, top], [0, top], color="#333333", lw=1, ls="--", label="perfect estimate")
    sampled = points_label(shown_estimated.size, estimated.size)
    if sampled:
        scatter_ax.set_title(f"dots: {sampled}", fontsize=9)
    scatter_ax.set_xlabel("actual time from estimate to result (s)")
    scatter_ax.set_ylabel("server's estimated time to result, rank_eta (s)")
    scatter_ax.legend(loc="upper left", fontsize=8)
    scatter_ax.grid(True, alpha=0.3)
    error = estimated - actual
    del estimated, actual
    hist_ax.hist(error, bins=min(50, max(5, error.size // 5)), color=PHASE_COLORS["queue_wait_s"], alpha=0.8)
    hist_ax.axvline(0, color="#333333", lw=1, ls="--")
    hist_ax.set_xlabel("estimate - actual (s); > 0 = pessimistic, < 0 = optimistic")
    hist_ax.set_ylabel("requests")
    hist_ax.set_title(f"median error {fmt_s(float(np.median(error)))}, "
                      f"median |error| {fmt_s(float(np.median(np.abs(error))))}", fontsize=10)
    hist_ax.grid(True, alpha=0.3)
    return fig


def send_lag(data: RunColumns) -> Figure:
    fig, (ax,) = new_figure()
    lag = data.send_lag
    finite = np.isfinite(lag)
    if not finite.any():
        ax.set_title("Send lag (actual - intended send time)")
        note(ax, "No request was sent")
        return fig
    p99 = float(np.percentile(lag[finite], 99))
    ax.set_title(f"Send lag (actual - intended send time): p50 {fmt_s(float(np.median(lag[finite])))}, "
                 f"p99 {fmt_s(p99)}, max {fmt_s(float(lag[finite].max()))}")
    shade_warmup(ax, data)
    drawn = data.sample(finite)
    sampled = points_label(int(drawn.sum()), int(finite.sum()))
    ax.scatter(data.intended[drawn], lag[drawn] * 1000, s=4, color="#555555", alpha=0.5, lw=0,
               label=f"request ({sampled})" if sampled else "request")
    ax.axhline(p99 * 1000, color="#d62728", lw=1, ls="--", label=f"p99 = {fmt_s(p99)}")
    ax.set_ylabel("send lag (ms); high = load generator saturated")
    ax.set_xlabel("intended send time since run start (s)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def _paired_values(a: Columns, b: Columns, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """(intended send time, B - A) of requests ok and measured in A and ok in B, in time order."""
    va, vb = a.floats(phase), b.floats(phase)
    in_a = np.flatnonzero(a.ok() & a.measured() & ~np.isnan(va))
    in_b = np.flatnonzero(b.ok() & ~np.isnan(vb))
    ids_a = a.ints("request_id")[in_a]
    order_a = np.argsort(ids_a, kind="stable")
    ids_b = b.ints("request_id")[in_b]
    at = np.searchsorted(ids_a[order_a], ids_b)
    found = at < ids_a.size
    found[found] = ids_a[order_a][at[found]] == ids_b[found]
    rows_a = in_a[order_a[at[found]]]
    t = a.floats("intended_at_s")[rows_a]
    d = vb[in_b[found]] - va[rows_a]
    order = np.lexsort((d, t))
    return t[order], d[order]


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """The median of each value's centred window of 2 * (window // 2) + 1 values (fewer at the ends)."""
    import pandas as pd

    width = 2 * (window // 2) + 1
    return pd.Series(values).rolling(width, center=True, min_periods=1).median().to_numpy()


def paired_differences(
    a: Columns | Sequence[RequestRecord], b: Columns | Sequence[RequestRecord], phase: str = "latency_s"
) -> Figure:
    """B - A per request over the intended send time (two runs on one schedule), with a rolling median and
    the overall median; a long run's dots and line are a stated sample of MAX_POINTS."""
    fig, (ax,) = new_figure()
    t, d = _paired_values(Columns.of(a), Columns.of(b), phase)
    label = PHASE_LABELS.get(phase, phase)
    ax.set_title(f"Paired differences, {label}: B - A per request")
    if not d.size:
        note(ax, "No request completed in both runs")
        return fig
    shown = _spread(d.size, MAX_POINTS)
    sampled = points_label(shown.size, d.size)
    ax.scatter(t[shown], d[shown] * 1000, s=5, color=PHASE_COLORS.get(phase, "#555555"), alpha=0.45, lw=0,
               label=f"request ({sampled})" if sampled else "request")
    window = max(5, d.size // 25)
    rolling = rolling_median(d, window)
    line = np.unique(np.linspace(0, d.size - 1, min(d.size, MAX_POINTS)).astype(np.int64))
    ax.plot(t[line], rolling[line] * 1000, color="#222222", lw=1.5,
            label=f"rolling median ({window} requests)")
    ax.axhline(0, color="#888888", lw=1)
    median = float(np.median(d))
    ax.axhline(median * 1000, color="#d62728", lw=1, ls="--", label=f"median {median * 1000:+.2f} ms")
    ax.set_xlabel("intended send time since run start (s)")
    ax.set_ylabel("B - A (ms); above 0 = B slower")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def _spread(n: int, limit: int) -> np.ndarray:
    """Row indexes of a uniform sample of `limit` of `n` (all up to `limit`), in order; the same for one n."""
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=limit, replace=False))


# ---------------------------------------------------------------- rendering


@dataclass(frozen=True)
class ChartSpec:
    name: str  # file stem
    title: str
    caption: str
    draw: Callable[[RunColumns], Figure]


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    caption: str
    path: Path


RUN_CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("latency_distribution", "Latency distribution",
              "Percentiles of total latency (from the intended send time), queue wait and service time.",
              latency_distribution),
    ChartSpec("latency_over_time", "Latency and throughput over time",
              "Each request's latency by when it was meant to be sent; arrivals and completions per second.",
              latency_over_time),
    ChartSpec("inflight_queue", "In flight and queue rank",
              "Requests waiting and running over time; the rank and queue size the server reported on join.",
              inflight_and_rank),
    ChartSpec("errors_over_time", "Errors over time", "Failed requests per second, stacked by error kind.",
              errors_over_time),
    ChartSpec("eta_accuracy", "ETA accuracy",
              "The server's first estimate (rank_eta) against the real time until the result arrived.",
              eta_accuracy),
    ChartSpec("send_lag", "Send lag",
              "How late the generator sent each request; a growing lag means the client, not the server, "
              "was the bottleneck.", send_lag),
)


def render_charts(specs: Sequence[ChartSpec], data: RunColumns, out_dir: Path) -> list[Chart]:
    """Draw every chart in `specs` into `out_dir/<name>.png`."""
    charts = []
    for spec in specs:
        path = save(spec.draw(data), out_dir / f"{spec.name}.png")
        charts.append(Chart(spec.name, spec.title, spec.caption, path))
        _trim()
    return charts


def _trim() -> None:
    """Hand the heap's freed blocks back to the system (glibc's malloc_trim); nothing elsewhere."""
    c = libc()
    try:
        c.malloc_trim(0)
    except (AttributeError, TypeError):  # no C library, or not glibc
        pass


def render_run_charts(records: Sequence[RequestRecord] | Columns, out_dir: Path) -> list[Chart]:
    """All run charts for a run's records (or their columns), written as PNGs into `out_dir`."""
    columns = records if isinstance(records, Columns) else Columns.of(records)
    return render_charts(RUN_CHARTS, RunColumns(columns), out_dir)
