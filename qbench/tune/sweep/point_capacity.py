"""One point's capacity in a sweep, searched on its own warm server by `qbench capacity`'s rules."""

from __future__ import annotations

from pathlib import Path

from qbench.tune.capacity.bisect import search_capacity
from qbench.tune.capacity.command import recheck
from qbench.tune.knobs.grid import Grid, Point
from qbench.tune.knobs.reference import effective_knobs
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.confirm import sweep_prober
from qbench.tune.values.ceiling import Capacity
from qbench.tune.values.point_file import read_point_file
from qbench.tune.values.result import PointResult


def point_capacity(
    config: SweepConfig, base_url: str, point: Point, work: Path, first_rate: float | None = None,
    confirm: bool = False,
) -> Capacity:
    """Capacity of one point on its warm server (with `confirm`, confirmed), rechecked; without
    `first_rate`, a closed-loop estimate gives the first guess."""
    prober = sweep_prober(config, base_url, point, work)
    estimate = None
    if first_rate is None:
        estimate, _ = prober.estimate(estimate_users(config, point))
        first_rate = estimate.rate_rps or 1.0
    capacity = search_capacity(prober.rate, first_rate, config.capacity.plan(confirm), estimate,
                               refine=prober.refine, confirm=prober.confirm)
    recheck(prober, capacity)  # did this server get slower while it was measured?
    return capacity


def estimate_users(config: SweepConfig, point: Point) -> int:
    knobs = {**(effective_knobs(config.base_settings, config.api_name) if config.base_settings else {}),
             **point.knobs}
    limit = knobs.get("concurrency_limit", knobs.get("concurrency_count"))
    batch = knobs.get("max_batch_size", 1)
    if isinstance(limit, int) and isinstance(batch, int):
        return max(4, 2 * limit * batch)
    return 32


def saved_capacity(sweep_dir: Path, winner: PointResult) -> Capacity | None:
    """The capacity search saved in the winner's point.json (objective capacity)."""
    saved = read_point_file(sweep_dir / "points" / winner.point_id)
    return saved.capacity if saved is not None else None


def coords_of(grid: Grid, result: PointResult) -> tuple[int, ...]:
    return tuple(values.index(result.knobs[name]) for name, values in grid.axes.items())
