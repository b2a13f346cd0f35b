"""qbench.tune.points.measure: a point's figures from its runs' summaries, runaway detection, the warm-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.run.results.summary import Summary
from qbench.tune.knobs.grid import Point
from qbench.tune.points.measure import RunawayDetector, point_result
from qbench.tune.sweep.config import SweepOptions, build_config
from qbench.tune.sweep.point_runs import DEFAULT_WARMUP_S, point_warmup
from qbench.tune.values.constraints import Constraints

from ..conftest import write_scenario


def test_a_floor_on_a_figure_a_summary_computes_is_measured_and_judged() -> None:
    """min_chunks_answered and min_output_tps are not PointResult fields: they are read from each
    summary (their mean over repeats), so a probe is judged on them instead of 'not measured'."""
    summaries = [Summary(completed_ok=4, chunks_sent=100, chunks_answered=80, output_tps=3.0),
                 Summary(completed_ok=4, chunks_sent=100, chunks_answered=60, output_tps=5.0)]
    constraints = Constraints(slo={"min_chunks_answered": 0.9, "min_output_tps": 2.0, "min_goodput": 0.0})
    result = point_result(Point({}), summaries, constraints, "ok", "", {})
    assert result.extra["min_chunks_answered"] == 0.7 and result.extra["min_output_tps"] == 4.0
    assert "min_goodput" not in result.extra  # a field of its own (goodput_rps)
    assert constraints.slo_violations(result) == ["min_chunks_answered 0.7 < 0.9"]


def feed(
    detector: RunawayDetector, arrivals_per_s: float, completions_per_s: float, seconds: float
) -> str | None:
    reason = None
    t = 0.0
    while t <= seconds and reason is None:
        reason = detector.check(t, int(arrivals_per_s * t), int(completions_per_s * t))
        t += 0.25
    return reason


def test_runaway_queue_is_stopped() -> None:
    reason = feed(RunawayDetector(), arrivals_per_s=100, completions_per_s=10, seconds=5)
    assert reason is not None and "not steady, backlog +" in reason and "vs arrivals 100/s" in reason


def test_a_slow_overload_is_stopped_once_its_trend_is_certain() -> None:
    reason = feed(RunawayDetector(margin=0.025), arrivals_per_s=44, completions_per_s=40, seconds=20)
    assert reason is not None and "not steady" in reason


@pytest.mark.parametrize(("arrivals", "completions"), [(20, 19.8), (10, 10), (0, 0), (5, 4.9)])
def test_keeping_up_is_not_a_runaway(arrivals: float, completions: float) -> None:
    assert feed(RunawayDetector(), arrivals, completions, seconds=5) is None


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        ({"users": 2}, DEFAULT_WARMUP_S),  # nothing set: the sweep's default warm-up
        ({"users": 2, "warmup": 0}, 0.0),  # an explicit 0 is kept
        ({"users": 2, "warmup": 1.5}, 1.5),
        ({"burst": 20}, 0.0),  # a burst's requests all have intended time 0: a default would drop them all
    ],
)
def test_point_warmup_respects_the_scenario(tmp_path: Path, load: dict[str, Any], expected: float) -> None:
    path = write_scenario(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["load"] = {"duration": 2, "timeout": 10, **load}
    raw["sweep"].pop("warmup")
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1,2"], out_root=str(tmp_path)))
    assert point_warmup(config) == expected
