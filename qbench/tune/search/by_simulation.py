"""Simulator search (`--search sim`): fit the batch model and its spread on a few points, simulate the whole
grid, measure only what it ranks best. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qbench.run import Load, OpenPlan, plan, read_records, trend
from qbench.tune.knobs.grid import Grid, Point
from qbench.tune.ranking.recommend import recommend
from qbench.tune.search.batch_model import BatchFit, PointLoad
from qbench.tune.search.by_model import ModelSearchResult
from qbench.tune.search.fit import (
    FEASIBLE,
    ComparisonRow,
    Describe,
    FittedModel,
    Observe,
    Predicted,
    Refined,
    SearchState,
    comparison_rows,
    memory_of,
    point_runs,
    predicted_constraints,
    record_batches,
    refine,
    summary_observer,
)
from qbench.tune.search.simulate import (
    Arrivals,
    ClosedArrivals,
    OpenArrivals,
    SimFunction,
    SimResult,
    SimServer,
    lognormal_sigma,
    simulate,
)
from qbench.tune.search.smart import Evaluate
from qbench.tune.values.ceiling import CapacitySummary
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult

Spread = Callable[[Sequence[Point], BatchFit], float]
MAX_SIM_REQUESTS = 3000  # per simulated run: enough for a p95, fast enough for a whole grid
BISECTION_STEPS = 10
STEADY_MARGIN = 0.025  # queue wait growth (s per s) that counts as not keeping up


@dataclass
class SimPredictor:
    """Simulated figures of one grid point under the scenario's load (and its capacity under the SLO)."""

    describe: Describe
    knobs: Callable[[Point], Mapping[str, Any]]  # the point's knobs over the server's defaults
    load: Load
    constraints: Constraints
    capacity_duration_s: float = 10.0
    seed: int = 0

    def server(self, point: Point, fit: BatchFit, sigma: float) -> SimServer:
        shape, knobs = self.describe(point), self.knobs(point)
        wait_ms = knobs.get("batch_wait_ms")
        max_size = knobs.get("max_size")
        fn = SimFunction(
            fit,
            limit=shape.workers,
            batch=shape.max_batch > 1,
            max_batch_size=shape.max_batch,
            batch_wait_s=float(wait_ms) / 1000 if isinstance(wait_ms, int | float) else 0.0,
            sigma=sigma,
        )
        return SimServer((fn,), max_threads=shape.threads,
                         max_size=int(max_size) if isinstance(max_size, int) else None)

    def arrivals(self, shape: PointLoad) -> Arrivals:
        """The point's own load: its rate or users (a swept load knob), else the scenario's plan."""
        duration = self.load.duration or 30.0
        if shape.users is not None:
            ramp = self.load.ramp_up / shape.users
            return ClosedArrivals(shape.users, shape.think_s, self.load.think == "exponential", duration,
                                  start_offsets=np.arange(shape.users) * ramp)
        if shape.rate_rps is not None:
            return self.rate_arrivals(shape.rate_rps, duration)
        scheduled = plan(self.load, self.seed)
        assert isinstance(scheduled, OpenPlan)  # users are described above
        return OpenArrivals(scheduled.offsets)

    def rate_arrivals(self, rate: float, duration_s: float) -> OpenArrivals:
        """The scenario's arrival process (constant or Poisson) at `rate`, up to MAX_SIM_REQUESTS requests."""
        duration = min(duration_s, MAX_SIM_REQUESTS / rate)
        load = self.load.model_copy(update={
            "rate": rate, "duration": duration, "requests": None, "users": None, "burst": None,
            "interval": None, "stages": None, "trace": None, "replay": None,
        })
        scheduled = plan(load, self.seed)
        assert isinstance(scheduled, OpenPlan)
        return OpenArrivals(scheduled.offsets)

    def run(self, server: SimServer, arrivals: Arrivals) -> SimResult:
        return simulate(server, arrivals, timeout_s=self.load.timeout, seed=self.seed,
                        max_requests=MAX_SIM_REQUESTS)

    def predict(self, point: Point, fit: BatchFit, sigma: float) -> PointResult:
        server = self.server(point, fit, sigma)
        result = as_point_result(point, self.run(server, self.arrivals(self.describe(point))))
        if self.constraints.objective == "latency":
            if predicted_constraints(self.constraints).violations(result):
                result.goodput_rps = 0.0
            return result
        result.capacity_rps = self.capacity(point, server, fit)
        result.capacity = CapacitySummary(capacity_rps=result.capacity_rps, predicted=True)
        return result

    def passes(self, point: Point, server: SimServer, rate: float) -> bool:
        """The run simulated at `rate` met the SLO and its queue wait did not trend up."""
        sim = self.run(server, self.rate_arrivals(rate, self.capacity_duration_s))
        checked = as_point_result(point, sim)
        if sim.latencies_s.size == 0 or predicted_constraints(self.constraints).violations(checked):
            return False
        waits = trend(np.arange(sim.waits_s.size) / rate, sim.waits_s)
        return waits is None or not waits.up(STEADY_MARGIN)

    def capacity(self, point: Point, server: SimServer, fit: BatchFit) -> float | None:
        """The highest open-loop rate whose simulated run meets the SLO (bisection below k*B/l(B))."""
        shape = self.describe(point)
        x_max = shape.workers * shape.max_batch / fit.service_s(shape.max_batch, shape.workers)
        low, high = 0.02 * x_max, x_max  # past x_max the queue grows without bound: never steady
        if self.passes(point, server, high):
            return high
        if not self.passes(point, server, low):
            return None
        for _ in range(BISECTION_STEPS):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if self.passes(point, server, middle) else (low, middle)
        return low


def as_point_result(point: Point, sim: SimResult) -> PointResult:
    return PointResult(
        point.point_id,
        dict(point.knobs),
        goodput_rps=sim.goodput_rps,
        throughput_rps=sim.throughput_rps,
        p50_latency_s=sim.percentile(50),
        p95_latency_s=sim.percentile(95),
        p99_latency_s=sim.percentile(99),
        mean_latency_s=sim.mean_latency_s,
        p50_service_s=float(np.median(sim.services_s)) if sim.services_s.size else None,
        error_rate=sim.error_rate,
    )


# ---------------------------------------------------------------- result


@dataclass
class SimSearchResult(ModelSearchResult):
    """Model search's result; `model` also holds the spread (sigma) and the simulated grid size."""


def sim_search(
    grid: Grid,
    evaluate: Evaluate,
    constraints: Constraints,
    predictor: SimPredictor,
    *,
    observe: Observe | None = None,
    spread: Spread | None = None,
    top_n: int = 3,
    min_r2: float = 0.8,
    max_fraction: float = 0.4,
) -> SimSearchResult:
    """Simulator search over `grid`; falls back to smart search like model search."""
    state = SearchState(grid, evaluate, constraints, predictor.describe,
                        observe or summary_observer(predictor.describe))
    by_id = {point.point_id: point for point in grid.points()}
    sigma = 0.0

    def rank(fit: BatchFit) -> list[Point]:
        nonlocal sigma
        sigma = spread([state.points[p] for p in state.measured], fit) if spread else 0.0
        memory = memory_of(state)  # with a memory ceiling: peak RSS fitted on the work slots (model search)
        predicted = []
        for point in grid.points():
            guess = predictor.predict(point, fit, sigma)
            guess.peak_rss_mb = memory(predictor.describe(point))
            predicted.append(guess)
        return [by_id[r.point_id] for r in recommend(predicted, constraints).ranked if r.verdict in FEASIBLE]

    refined = refine(state, rank, "the simulator predicts no feasible point", top_n=top_n, min_r2=min_r2,
                     max_fraction=max_fraction)
    return _result(state, refined, sigma, predictor)


def _result(state: SearchState, refined: Refined, sigma: float, predictor: SimPredictor) -> SimSearchResult:
    model = FittedModel(refined.fit, sigma=sigma, simulator="qbench.tune.search.simulate",
                        simulated_points=state.grid.size)
    return SimSearchResult(list(state.order), state.grid.size, refined.path, model=model,
                           predicted_vs_measured=comparison(state, refined.fit, sigma, predictor,
                                                            refined.n_design),
                           fallback=refined.fallback)


def comparison(state: SearchState, fit: BatchFit | None, sigma: float, predictor: SimPredictor,
               n_design: int) -> list[ComparisonRow]:
    """Predicted (with the final fit) vs measured figures of every measured point."""
    if fit is None:
        return comparison_rows(state, n_design, None)

    def predicted(point: Point) -> Predicted:
        p = predictor.predict(point, fit, sigma)
        return Predicted(throughput_rps=p.throughput_rps, goodput_rps=p.goodput_rps,
                         p95_latency_s=p.p95_latency_s, capacity_rps=p.capacity_rps)

    return comparison_rows(state, n_design, predicted)


def records_spread(points_dir: Path, describe: Describe) -> Spread:
    """sigma from each measured point's batches: measured / fitted service time (see lognormal_sigma)."""

    def spread(points: Sequence[Point], fit: BatchFit) -> float:
        ratios: list[float] = []
        for point in points:
            load = describe(point)
            for run_dir in point_runs(points_dir / point.point_id):
                with contextlib.suppress(OSError, ValueError):
                    for batch in record_batches(read_records(run_dir), load):
                        expected = fit.service_s(len(batch), load.workers)
                        ratios.extend(s / expected for s in batch)
        return lognormal_sigma(ratios)

    return spread

