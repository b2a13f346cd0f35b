"""A sweep's point as a run: the overrides of its client knobs, duration, warm-up and SLO, and one repeat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qbench.tune.knobs.grid import Point
from qbench.tune.points.measure import PointRun, RunawayDetector, run_measured
from qbench.tune.sweep.config import SweepConfig

DEFAULT_WARMUP_S = 0.5


def point_warmup(config: SweepConfig) -> float:
    """The sweep's warm-up, else the scenario's own when it sets one (0 included), else DEFAULT_WARMUP_S;
    never a default for a burst, whose requests all share intended time 0 and would all be excluded."""
    load = config.scenario.load
    if config.warmup_s is not None:
        return config.warmup_s
    if "warmup" in load.model_fields_set or load.shape == "burst":
        return load.warmup
    return DEFAULT_WARMUP_S


def point_overrides(config: SweepConfig, point: Point) -> dict[str, Any]:
    """Scenario overrides for a point: client knobs, point duration, warm-up and the sweep's SLO."""
    overrides: dict[str, Any] = {f"slo.{k}": v for k, v in config.constraints.slo.items()}
    if config.point_duration_s:
        overrides["load.duration"] = config.point_duration_s
    overrides["load.warmup"] = point_warmup(config)
    overrides.update(point.client_overrides())
    return overrides


def run_point(
    config: SweepConfig, base_url: str, point: Point, run_dir: Path, detector: RunawayDetector | None
) -> PointRun:
    """One repeat of one point (run_measured with the point's overrides)."""
    overrides = point_overrides(config, point)
    return run_measured(config.scenario, config.constraints.slo, base_url, run_dir, overrides, detector)
