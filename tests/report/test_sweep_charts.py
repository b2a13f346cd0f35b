"""Sweep charts (qbench.report.sweep_charts) from a sweep built in memory: point labels, the swept
knobs, heatmap cells and panels, the Pareto plot's groups and star, and per-point distributions read
from the points' records. (Reading a sweep folder and the whole report are in test_sweep_report.py.)"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from qbench.report.sweep_charts import (
    MAX_FACETS,
    LoadedSweep,
    _knobs,
    heatmaps,
    pareto,
    point_distributions,
)
from qbench.tune.ranking.recommend import Recommendation
from qbench.tune.values.result import PointResult
from qbench.tune.values.sweep_info import SweepInfo
from tests.report.report_synth import simulate, write_run

AXES = {"concurrency_limit": [1, 2], "max_threads": [4, 40, 80], "batch": [8]}  # batch: one value


def rows() -> list[dict[str, Any]]:
    out = []
    for n, (c, t) in enumerate(itertools.product(AXES["concurrency_limit"], AXES["max_threads"])):
        out.append({"point_id": f"p{n}", "concurrency_limit": c, "max_threads": t, "batch": 8, "status": "ok",
                    "goodput_rps": float(c * 10 + n), "throughput_rps": float(c * 10 + n),
                    "p95_latency_s": 0.5 / c + 0.01 * n, "rank": n + 1,
                    "verdict": "feasible" if n % 2 else "infeasible"})
    out[-1].update(status="failed", goodput_rps=None, throughput_rps=None, p95_latency_s=None, rank=None)
    return out


def sweep(path: Path = Path("/nonexistent"), winner: str | None = "p4",
          data: list[dict[str, Any]] | None = None, slo: dict[str, Any] | None = None) -> LoadedSweep:
    info = SweepInfo.from_dict({"grid": {"axes": AXES}, "slo": slo or {"p95_latency_s": 0.4}})
    points = rows() if data is None else data
    rec = Recommendation(winner=PointResult(winner, {}), ranked=[], why="") if winner else None
    return LoadedSweep(path, info, points, rec, _knobs(info, points))


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_labels_name_the_swept_knobs_only() -> None:
    data = sweep()
    assert data.knobs == {"concurrency_limit": [1, 2], "max_threads": [4, 40, 80]}
    assert data.label(data.rows[1]) == "concurrency_limit=1, max_threads=40"
    assert data.short_label(data.rows[1]) == "1/40" and data.winner_id == "p4"
    assert sweep(winner=None).winner_id is None


def test_without_grid_axes_the_knobs_come_from_the_rows() -> None:
    points = [{"point_id": "a", "k": 1, "j": "x", "goodput_rps": 1.0}, {"point_id": "b", "k": 2, "j": "x"}]
    assert _knobs(SweepInfo.from_dict({}), points) == {"k": [1, 2]}
    bare = LoadedSweep(Path("."), SweepInfo.from_dict({}), [{"point_id": "a"}], None, {})
    assert bare.label(bare.rows[0]) == "a" and bare.short_label(bare.rows[0]) == "a"


def test_a_heatmap_cell_per_point_with_its_value_or_status_and_the_winner_boxed() -> None:
    fig = heatmaps(sweep(), "p95_latency_s", "p95", ("max_threads", "concurrency_limit"))
    ax = fig.axes[0]
    assert fig.get_suptitle() == "p95"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "40", "80"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]
    assert texts(ax) == ["500 ms", "510 ms", "520 ms", "280 ms", "290 ms", "failed"]  # row by row
    boxes = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_linewidth() == 3]
    assert [(b.get_x(), b.get_y()) for b in boxes] == [(0.5, 0.5)]  # p4: max_threads=40, concurrency 2
    image = ax.get_images()[0].get_array()
    assert image is not None and int(np.ma.getmaskarray(image).sum()) == 1  # the failed point has no value


def grid_sweep(axes: dict[str, list[int]]) -> LoadedSweep:
    points = [{"point_id": str(n), **dict(zip(axes, values, strict=True)), "goodput_rps": 1.0}
              for n, values in enumerate(itertools.product(*axes.values()))]
    info = SweepInfo.from_dict({"grid": {"axes": axes}})
    return LoadedSweep(Path("."), info, points, None, _knobs(info, points))


def test_one_heatmap_panel_per_combination_of_the_other_knobs() -> None:
    fig = heatmaps(grid_sweep({"a": [1, 2], "b": [1, 2], "c": [1, 2, 3], "d": [1, 2, 3]}), "goodput_rps", "G")
    assert fig.get_suptitle() == "G"
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["a=1, b=1", "a=1, b=2", "a=2, b=1", "a=2, b=2"]
    assert (panels[0].get_xlabel(), panels[0].get_ylabel()) == ("c", "d")  # the knobs with most values


def test_at_most_max_facets_panels_are_drawn() -> None:
    four = [1, 2, 3, 4]  # x and y: the first knobs of the most values; panels: the other two (4 x 2)
    fig = heatmaps(grid_sweep({"c": four, "d": four, "a": four, "b": [1, 2]}), "goodput_rps", "G")
    assert fig.get_suptitle() == f"G (first {MAX_FACETS} of 8 panels)"
    assert len([ax for ax in fig.axes if ax.get_visible() and ax.get_title()]) == MAX_FACETS


def test_a_heatmap_with_nothing_to_show_says_why() -> None:
    one = {"grid": {"axes": {"k": [1]}}}
    flat = LoadedSweep(Path("."), SweepInfo.from_dict(one), [{"k": 1}], None, {})
    empty = heatmaps(flat, "goodput_rps", "G")
    assert texts(empty.axes[0]) == ["No swept knob with more than one value"]
    unmeasured = sweep(data=[{"point_id": "x", "concurrency_limit": 1, "status": "ok"}])
    nothing = heatmaps(unmeasured, "goodput_rps", "G")
    assert texts(nothing.axes[0]) == ["No goodput_rps measured"]


def test_pareto_groups_points_by_verdict_and_stars_the_winner() -> None:
    fig = pareto(sweep())
    (ax,) = fig.axes
    labels = ax.get_legend_handles_labels()[1]
    assert labels[0] == "Pareto front" and "SLO p95 bound" in labels
    assert "recommended: concurrency_limit=2, max_threads=40" in labels
    front = ax.get_lines()[0]
    assert np.asarray(front.get_xdata()).tolist() == [23.0, 24.0]  # the 2-concurrency points beat the rest
    groups = {c.get_label(): len(np.asarray(c.get_offsets())) for c in ax.collections}
    assert groups["infeasible"] + groups["feasible"] == 4  # 5 measured, less the winner drawn as a star
    assert "2/40" in texts(ax)


def test_pareto_without_measured_points_says_so() -> None:
    fig = pareto(sweep(data=[{"point_id": "x", "status": "failed"}]))
    assert texts(fig.axes[0]) == ["No point has both a throughput and a p95 latency"]


def test_point_distributions_draw_a_curve_per_point_with_records(tmp_path: Path) -> None:
    for n, service in ((0, 0.05), (1, 0.2)):
        write_run(tmp_path / "points" / f"p{n}", simulate(n=40, service_s=service, seed=n))
    data = sweep(tmp_path, winner="p1", data=rows()[:3])
    fig = point_distributions(data)
    curves = [line.get_label() for line in fig.axes[0].get_lines()]
    assert curves == ["concurrency_limit=1, max_threads=4", "* concurrency_limit=1, max_threads=40"]
    empty = point_distributions(sweep(tmp_path / "none"))
    assert texts(empty.axes[0]) == ["No point's records could be read"]


@pytest.mark.parametrize("metric", ["goodput_rps", "p95_latency_s"])
def test_the_colour_scale_is_green_where_the_metric_is_good(metric: str) -> None:
    fig = heatmaps(sweep(), metric, metric)
    name = fig.axes[0].get_images()[0].get_cmap().name
    assert name.startswith("RdYlGn_r" if metric.startswith("p") else "RdYlGn")
    assert name.endswith("_r") is metric.startswith("p")
