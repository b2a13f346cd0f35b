"""Run charts (qbench.report.charts) read back from their matplotlib Figures: the series each chart
draws, their labels and counts, the notes of a chart with nothing to show, the nines axis, and paired
differences between two runs. (That every chart renders a non-blank PNG is in test_report_run.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from qbench.report.chart_columns import RunColumns, fmt_s
from qbench.report.charts import (
    CURVE_POINTS,
    ChartSpec,
    error_color,
    errors_over_time,
    eta_accuracy,
    inflight_and_rank,
    latency_over_time,
    new_figure,
    nines,
    nines_axis,
    note,
    paired_differences,
    percentile_curve,
    render_charts,
    send_lag,
    shade_warmup,
)
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord


def rec(i: int, t: float, *, ok: bool = True, kind: str | None = None, warmup: bool = False,
        latency: float = 0.2, rank: int | None = None, sent: bool = True) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=warmup,
                         intended_at_s=t, sent_at_s=t + 0.001 if sent else None,
                         estimation_at_s=t + 0.002 if rank is not None else None, rank=rank,
                         queue_size=None if rank is None else rank + 1,
                         rank_eta_s=None if rank is None else 0.1 * (rank + 1),
                         started_at_s=t + latency / 2 if sent else None,
                         completed_at_s=t + latency if sent else None,
                         outcome="ok" if ok else "error", error_kind=kind)


def cols(records: list[RequestRecord]) -> RunColumns:
    return RunColumns.from_records(records)


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def labels(ax: Axes) -> list[str]:
    return ax.get_legend_handles_labels()[1]


def offsets(collection: Collection) -> np.ndarray:
    """The (x, y) points of a scatter."""
    return np.asarray(collection.get_offsets())


def test_error_colours_are_stable_and_unknown_kinds_black() -> None:
    assert error_color("queue_full") == "#d62728" and error_color("something new") == "#000000"


def test_nines_spaces_p90_p99_p999_evenly() -> None:
    assert nines(np.array([0.0, 0.9, 0.99, 0.999])) == pytest.approx([0, 1, 2, 3])


def test_a_percentile_curve_marks_p50_p95_p99() -> None:
    fig, (ax,) = new_figure()
    values = np.array([np.nan, *np.arange(1, 101) / 100])
    assert percentile_curve(ax, values, "#000000", "x")
    curve, *marks = ax.get_lines()
    assert len(marks) == 3 and curve.get_label() == "x" and curve.get_drawstyle() == "steps-post"
    assert np.asarray(curve.get_xdata()).size == 101  # 100 finite values and the last one held
    assert texts(ax) == ["p50 505 ms", "p95 950 ms", "p99 990 ms"]
    fig2, (bare,) = new_figure()
    assert percentile_curve(bare, values, "#000000", "y", marks=False) and len(bare.get_lines()) == 1
    fig3, (empty,) = new_figure()
    assert not percentile_curve(empty, np.array([np.nan]), "#000000", "z") and empty.get_lines() == []


def test_a_lone_value_is_drawn_as_a_short_step() -> None:
    fig, (ax,) = new_figure()
    percentile_curve(ax, np.array([0.5]), "#000000", "one", marks=False)
    (line,) = ax.get_lines()
    assert np.asarray(line.get_xdata()).tolist() == pytest.approx([0.0, np.log10(2)])


@pytest.mark.parametrize(("n", "ticks"), [
    (10, ["p0", "p50", "p90"]), (1000, ["p0", "p50", "p90", "p99", "p99.9"]),
])
def test_the_nines_axis_shows_the_percentiles_the_count_resolves(n: int, ticks: list[str]) -> None:
    fig, (ax,) = new_figure()
    nines_axis(ax, n)
    assert [t.get_text() for t in ax.get_xticklabels()] == ticks


def test_new_figure_stacks_axes_sharing_x_and_note_clears_ticks() -> None:
    fig, axes = new_figure(rows=3, height=2.0)
    assert len(axes) == 3 and tuple(fig.get_size_inches()) == (10.0, 6.0)
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[2])
    note(axes[0], "nothing here")
    assert texts(axes[0]) == ["nothing here"] and list(axes[0].get_xticks()) == []


def test_the_warmup_is_shaded_only_when_there_is_one() -> None:
    fig, (ax,) = new_figure()
    shade_warmup(ax, cols([rec(0, 0.0)]))
    assert len(ax.patches) == 0 and labels(ax) == []
    shade_warmup(ax, cols([rec(0, 0.0, warmup=True), rec(1, 2.0)]))
    assert labels(ax) == ["warm-up (excluded)"]


def test_latency_over_time_separates_ok_and_failed_requests_and_counts_rates() -> None:
    records = [rec(i, i * 0.1) for i in range(20)] + [rec(20 + i, i * 0.2, ok=False, kind="timeout")
                                                      for i in range(3)]
    fig = latency_over_time(cols(records))
    top, bottom = fig.axes
    scatters = [c for c in top.collections if c.get_label() in ("ok request", "failed request")]
    assert [len(offsets(c)) for c in scatters] == [20, 3]
    assert {"ok request", "failed request", "p50 per bin", "p95 per bin"} <= set(labels(top))
    assert labels(bottom) == ["arrivals (intended)", "sent", "completions (ok)", "errors"]


def test_latency_over_time_without_completions_says_so() -> None:
    fig = latency_over_time(cols([rec(0, 0.0, ok=False, kind="connect", sent=False)]))
    assert texts(fig.axes[0]) == ["No request completed: no latency to show"]
    assert labels(fig.axes[1]) == ["arrivals (intended)"]  # sent and completions are empty


def test_inflight_and_rank() -> None:
    fig = inflight_and_rank(cols([rec(0, 0.0, rank=2), rec(1, 0.1, rank=0), rec(2, 0.2)]))
    top, bottom = fig.axes
    assert labels(top) == ["waiting in queue (sent, not started)", "running (started, not finished)"]
    ranks = [c for c in bottom.collections if c.get_label() == "rank on join (0 = next)"]
    assert sorted(offsets(ranks[0])[:, 1].tolist()) == [0, 2]
    empty = inflight_and_rank(cols([rec(0, 0.0, sent=False)]))
    assert texts(empty.axes[0]) == ["No request was sent"]
    assert texts(empty.axes[1]) == ["No queue estimation messages (rank) were received"]


def test_errors_are_stacked_by_kind_most_frequent_first() -> None:
    records = [rec(0, 0.0, ok=False, kind="connect")] + [rec(i, i * 0.1, ok=False, kind="queue_full")
                                                         for i in range(1, 4)] + [rec(9, 0.5)]
    fig = errors_over_time(cols(records))
    (ax,) = fig.axes
    assert ax.get_title() == "Errors by kind over time (4 errors)"
    assert labels(ax) == ["queue_full (3)", "connect (1)"]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    width = bars[0].get_width()
    heights = sum(p.get_height() for p in bars)
    assert heights * width == pytest.approx(4)  # rates times the bin width: the errors
    clean = errors_over_time(cols([rec(0, 0.0)]))
    assert texts(clean.axes[0]) == ["No errors in this run"]


def test_eta_accuracy_plots_estimate_against_actual() -> None:
    fig = eta_accuracy(cols([rec(i, i * 0.1, rank=1) for i in range(10)]))
    scatter_ax, hist_ax = fig.axes
    (points,) = scatter_ax.collections
    assert len(offsets(points)) == 10
    # estimate 0.2 s, actual from the estimation (t + 2 ms) to completion (t + 200 ms)
    assert offsets(points)[0].tolist() == pytest.approx([0.198, 0.2])
    assert hist_ax.get_title() == "median error 2 ms, median |error| 2 ms"
    none = eta_accuracy(cols([rec(0, 0.0)]))
    assert texts(none.axes[0]) == ["No ETA estimates with a completed result"]


def test_send_lag_title_and_points() -> None:
    fig = send_lag(cols([rec(i, i * 0.1) for i in range(5)] + [rec(5, 1.0, sent=False)]))
    (ax,) = fig.axes
    assert ax.get_title() == "Send lag (actual - intended send time): p50 1 ms, p99 1 ms, max 1 ms"
    assert len(offsets(ax.collections[0])) == 5
    assert texts(send_lag(cols([rec(0, 0.0, sent=False)])).axes[0]) == ["No request was sent"]


def test_paired_differences_keep_requests_ok_in_both_runs() -> None:
    a = [rec(i, i * 0.1, latency=0.2) for i in range(10)] + [rec(10, 1.0, warmup=True)]
    a[3] = rec(3, 0.3, ok=False, kind="timeout")
    b = [rec(i, i * 0.1, latency=0.25) for i in range(11)]
    b[5] = rec(5, 0.5, ok=False, kind="timeout")
    fig = paired_differences(a, b)
    (ax,) = fig.axes
    (points,) = ax.collections
    assert len(offsets(points)) == 8  # 10 measured in A, less one failed in A and one in B
    assert offsets(points)[:, 1] == pytest.approx([50.0] * 8)  # B - A in ms
    assert "median +50.00 ms" in labels(ax)
    assert texts(paired_differences(a, []).axes[0]) == ["No request completed in both runs"]


def test_paired_differences_from_columns_equal_the_pairs_of_records() -> None:
    """The join on request ids over columns gives the pairs, in the order, that one dict of record objects
    gave (the chart's code before it read columns): shuffled rows, failures and warm-ups on both
    sides, a request only in B, ties in send time."""
    from qbench.report.charts import _paired_values, rolling_median

    rng = np.random.default_rng(7)
    a = [rec(i, round(i * 0.01, 1), latency=float(rng.gamma(2, 0.1)), ok=bool(rng.random() > 0.05),
             warmup=i < 20) for i in range(600)]
    b = [rec(i, round(i * 0.01, 1), latency=float(rng.gamma(2, 0.1)), ok=bool(rng.random() > 0.05))
         for i in range(620)]
    a = [a[i] for i in rng.permutation(len(a))]
    b = [b[i] for i in rng.permutation(len(b))]
    by_id = {r.request_id: r.latency_s for r in a if r.ok and not r.warmup and r.latency_s is not None}
    intended = {r.request_id: r.intended_at_s for r in a}
    pairs = sorted((intended[r.request_id], r.latency_s - by_id[r.request_id])
                   for r in b if r.request_id in by_id and r.ok and r.latency_s is not None)
    t, d = _paired_values(Columns.of(a), Columns.of(b), "latency_s")
    assert list(zip(t.tolist(), d.tolist(), strict=True)) == pairs
    window = 23
    per_point = [np.median(d[max(0, i - window // 2): i + window // 2 + 1]) for i in range(d.size)]
    assert rolling_median(d, window) == pytest.approx(per_point, rel=1e-12, abs=1e-15)


def test_paired_differences_of_big_runs_draw_a_stated_sample() -> None:
    """200,000 pairs: 20,000 dots, the legend says of how many; the overall median is of them all."""
    ids = np.arange(200_000)
    a = _ArrayColumns(ids, np.full(ids.size, 0.1))
    b = _ArrayColumns(ids, 0.1 + 0.05 * (ids % 2))  # every other request 50 ms slower in B
    (ax,) = paired_differences(a, b).axes
    (points,) = ax.collections
    assert len(offsets(points)) == 20_000
    assert any("a uniform sample of 20,000 of 200,000 requests" in label for label in labels(ax))
    assert "median +25.00 ms" in labels(ax)


class _ArrayColumns(Columns):
    """`ids.size` ok, measured requests sent 1 ms apart, their latency given: columns without records."""

    def __init__(self, ids: np.ndarray, latency: np.ndarray) -> None:
        sent = ids * 0.001
        self.n = ids.size
        self.arrays = {"request_id": ids, "intended_at_s": sent, "completed_at_s": sent + latency,
                       "warmup": np.zeros(ids.size, dtype=bool),
                       "outcome": np.full(ids.size, "ok", dtype=object)}

    def _column(self, name: str) -> np.ndarray:
        column: np.ndarray = self.arrays[name]
        return column


def test_render_charts_writes_one_png_per_spec(tmp_path: Path) -> None:
    def draw(data: RunColumns) -> Figure:
        fig, (ax,) = new_figure()
        ax.plot(data.intended, data.completed)
        return fig

    (chart,) = render_charts([ChartSpec("mine", "Mine", "A caption.", draw)], cols([rec(0, 0.0)]),
                             tmp_path / "charts")
    assert (chart.name, chart.title, chart.caption) == ("mine", "Mine", "A caption.")
    assert chart.path == tmp_path / "charts" / "mine.png" and chart.path.read_bytes()[:4] == b"\x89PNG"


def test_a_long_percentile_curve_is_drawn_at_bounded_quantiles_keeping_its_ends() -> None:
    values = np.random.default_rng(3).lognormal(0.0, 1.0, 200_000)
    fig, (ax,) = new_figure()
    percentile_curve(ax, values, "#000000", "many")
    curve = ax.get_lines()[0]
    x, y = np.asarray(curve.get_xdata()), np.asarray(curve.get_ydata())
    assert x.size <= CURVE_POINTS + 2
    ordered = np.sort(values)
    assert y[0] == ordered[0] and y[-1] == ordered[-1] and y[-2] == ordered[-1]  # the minimum and the tail
    n = ordered.size
    index = np.rint((1.0 - 10.0 ** -x[:-1]) * n).astype(int)  # each vertex: the value its step starts at
    np.testing.assert_array_equal(y[:-1], ordered[index])
    assert np.all(np.diff(x[:-1]) > 0)
    assert texts(ax) == [f"p{p:g} {fmt_s(float(np.percentile(values, p)))}" for p in (50, 95, 99)]


def test_scatters_of_many_requests_draw_a_sample_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("qbench.report.chart_columns.MAX_POINTS", 40)
    records = [rec(i, i * 0.01) for i in range(300)] + [rec(300 + i, i * 0.1, ok=False, kind="timeout")
                                                        for i in range(10)]
    fig = latency_over_time(cols(records))
    top, bottom = fig.axes
    scatters = [c for c in top.collections if c.get_label() in ("ok request", "failed request")]
    assert sum(len(offsets(c)) for c in scatters) == 40
    assert top.get_title().endswith("dots: a uniform sample of 40 of 310 requests")
    lag = send_lag(cols(records)).axes[0]
    assert "request (a uniform sample of 40 of 310 requests)" in labels(lag)
    assert len(offsets(lag.collections[-1])) == 40
    small = send_lag(cols(records[:30])).axes[0]
    assert "request" in labels(small) and len(offsets(small.collections[-1])) == 30
