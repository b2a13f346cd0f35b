"""Smart search vs the full grid on an evaluator whose optimum is known."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from qbench.tune.knobs.grid import Grid, Point, build_grid
from qbench.tune.ranking.recommend import recommend
from qbench.tune.search.smart import full_search, smart_search
from qbench.tune.values.ceiling import CapacitySummary
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult


@dataclass(frozen=True)
class SleepModel:
    """Closed-form sleep workload: a batch of b takes (t0 + a*b) s, slowed by contention between workers.

    k = min(concurrency_limit, max_threads) batches run at once; with enough users (2 x k x B) every batch
    is full, so throughput = k*B / l(B, k) and p95 latency ~ 2 x l (wait for the running batch, then run).
    Peak memory grows with the work slots k*B. Goodput falls off once p95 passes the SLO.
    """

    t0: float
    a: float
    contention: float
    slo_s: float

    def __call__(self, point: Point) -> PointResult:
        c, b, t = (int(point.knobs[k]) for k in ("concurrency_limit", "max_batch_size", "max_threads"))
        k = min(c, t)
        batch_s = (self.t0 + self.a * b) * (1 + self.contention * (k - 1))
        throughput = k * b / batch_s
        p95 = 2 * batch_s
        goodput = throughput * max(0.0, min(1.0, 1 - 3 * (p95 / self.slo_s - 1)))
        return PointResult(
            point.point_id,
            dict(point.knobs),
            goodput_rps=goodput,
            throughput_rps=throughput,
            p50_latency_s=1.5 * batch_s,
            p95_latency_s=p95,
            peak_rss_mb=300 + 20 * k * b + 2 * t,
        )


GRID = build_grid(
    ["concurrency_limit=1,2,3,4,6,8,12,16", "max_batch_size=1,2,4,8,16,32", "max_threads=1,2,4,8,40"]
)
MODELS = [
    SleepModel(t0=0.10, a=0.02, contention=0.15, slo_s=2.0),
    SleepModel(t0=0.05, a=0.01, contention=0.30, slo_s=1.0),
    SleepModel(t0=0.20, a=0.005, contention=0.05, slo_s=3.0),
    SleepModel(t0=0.30, a=0.05, contention=0.50, slo_s=1.5),
]


@pytest.mark.parametrize("model", MODELS)
def test_smart_search_finds_the_full_grid_winner_with_at_most_40_percent_of_trials(model: SleepModel) -> None:
    constraints = Constraints(slo={"p95_latency_s": model.slo_s}, max_memory_mb=2000)
    full = full_search(GRID, model)
    smart = smart_search(GRID, model, constraints)
    best = recommend(full.results, constraints).winner
    found = recommend(smart.results, constraints).winner
    assert best is not None and found is not None
    assert found.goodput_rps >= 0.95 * best.goodput_rps
    assert smart.trials <= 0.4 * GRID.size
    assert smart.saved == GRID.size - smart.trials == smart.to_dict()["saved"]
    assert len({r.point_id for r in smart.results}) == smart.trials  # no point measured twice


def test_smart_search_on_a_tiny_grid_is_still_correct() -> None:
    grid = build_grid(["concurrency_limit=1,2", "max_batch_size=1,4", "max_threads=8"])
    model = MODELS[0]
    constraints = Constraints(slo={"p95_latency_s": model.slo_s})
    smart = smart_search(grid, model, constraints)
    assert (
        recommend(smart.results, constraints).winner
        == recommend(full_search(grid, model).results, constraints).winner
    )


def test_smart_search_walks_out_of_infeasible_region() -> None:
    # Start (middle) is infeasible: large batches break a tight SLO, the climb must step down.
    model = SleepModel(t0=0.1, a=0.05, contention=0.1, slo_s=0.5)
    constraints = Constraints(slo={"p95_latency_s": model.slo_s})
    smart = smart_search(GRID, model, constraints)
    winner = recommend(smart.results, constraints).winner
    best = recommend(full_search(GRID, model).results, constraints).winner
    assert winner is not None and best is not None
    assert winner.goodput_rps >= 0.95 * best.goodput_rps


def test_failed_points_do_not_stop_the_search() -> None:
    model = MODELS[0]
    grid: Grid = GRID

    def flaky(point: Point) -> PointResult:
        if point.knobs["max_threads"] == 8:
            return PointResult(point.point_id, dict(point.knobs), status="failed", reason="did not start")
        return model(point)

    constraints = Constraints(slo={"p95_latency_s": model.slo_s})
    smart = smart_search(grid, flaky, constraints)
    assert recommend(smart.results, constraints).winner is not None


def test_smart_search_does_not_walk_on_noise_under_the_capacity_objective() -> None:
    """The `cpu` bench workload: every point serves ~300 req/s give or take the measurement noise (+-4 %
    here, inside the capacity searches' 10 % tolerance). A step on noise is not an improvement: the climb
    stays at its start, after probing the neighbours once (axes, then diagonals)."""
    grid = build_grid(["concurrency_limit=1,2,3,4", "max_batch_size=1,2,4,8", "max_threads=1,2,40"])
    constraints = Constraints(slo={"p95_latency_s": 0.25}, objective="capacity")

    def flat(point: Point) -> PointResult:
        noise = (hash(point.point_id) % 9 - 4) / 100  # deterministic within a run, +-4 %
        capacity = 300.0 * (1 + noise)
        return PointResult(point.point_id, dict(point.knobs), goodput_rps=20.0, throughput_rps=20.0,
                           p95_latency_s=0.02, capacity_rps=capacity,
                           capacity=CapacitySummary(capacity_rps=capacity, tolerance=0.1))

    found = smart_search(grid, flat, constraints)
    start = "c3-b4-t2"
    assert found.path == [start] and found.results[0].point_id == start
    assert found.trials <= 1 + 6 + 20 < grid.size  # the start, its axis neighbours, its diagonals
