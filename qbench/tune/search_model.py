"""Model-based search: fit a batch-latency model from a few measured points, measure only what it ranks best.

    design points (batch axis at its ends x worker axes at middle / top)  -> measure
    observations (realised batch size, batch service time, workers)       -> fit l(b, k) = t0_k + alpha_k*b
    repeat:  predict every unmeasured point (tune.batch_model), rank measured + predicted points with the
             recommendation rule; measure the best-ranked unmeasured point among the top `top_n`;
             refit with it; stop when the top `top_n` are all measured or the trial budget is spent
    recommend among MEASURED points only (predictions only choose what to measure)

Where the observations come from, best first: the point's records (requests whose process_starts arrive
together form one batch; its service time is completed - started), else the point's median service time
with the realised batch size from Little's law on the service stage (b = X * l / k), else its throughput
under a known closed-loop load (l = k * b / X with b = clamp(users / k, 1, B)).

When the model cannot be trusted - fewer than 2 distinct batch sizes, R^2 below `min_r2` with residuals
over 15 % of the service time (`batch_model.untrusted`), or no point it
predicts feasible - the search falls back to smart search (qbench.tune.search), reusing the points already
measured, and says why in `fallback`. With a memory ceiling, peak RSS is fitted too, linear in the work
slots k*B and the thread pool, so memory-infeasible points are not chosen.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from qbench.run.records import RequestRecord, read_records
from qbench.tune.batch_model import (
    BatchFit,
    FitError,
    Observation,
    PointLoad,
    Prediction,
    fit_batch_model,
    predict,
    predicted_capacity,
    untrusted,
)
from qbench.tune.capacity import CapacitySummary
from qbench.tune.grid import Grid, Point
from qbench.tune.recommend import Constraints, PointResult, recommend
from qbench.tune.search import Evaluate, SearchResult, smart_search

Describe = Callable[[Point], PointLoad]
Observe = Callable[[Point, PointResult], list[Observation]]

WORKER_AXES = ("concurrency_limit", "default_concurrency_limit", "concurrency_count", "max_threads")
FEASIBLE = ("winner", "tied", "feasible")  # the verdicts of points a ranking may choose
PREDICTED_METRICS = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "mean_latency_s")


# ---------------------------------------------------------------- observations


def record_batches(
    records: Sequence[RequestRecord], load: PointLoad, tol_s: float = 0.005
) -> list[list[float]]:
    """Batches = runs of ok requests whose process_starts arrive within `tol_s` (at most B of them),
    as the service times (completed - started) of their members."""
    starts = sorted(
        (r.started_at_s, r.completed_at_s - r.started_at_s)
        for r in records
        if r.ok and not r.warmup and r.started_at_s is not None and r.completed_at_s is not None
    )
    batches: list[list[float]] = []
    first = -math.inf
    for started, service in starts:
        if batches and started - first <= tol_s and len(batches[-1]) < load.max_batch:
            batches[-1].append(service)
        else:
            batches.append([service])
            first = started
    return batches


def observations_from_records(
    records: Sequence[RequestRecord], load: PointLoad, tol_s: float = 0.005
) -> list[Observation]:
    """One observation per batch size seen (`record_batches`): the median of its batches' medians."""
    return observations_from_batches(record_batches(records, load, tol_s), load)


def observations_from_batches(batches: Sequence[Sequence[float]], load: PointLoad) -> list[Observation]:
    by_size: dict[int, list[float]] = {}
    for batch in batches:
        by_size.setdefault(len(batch), []).append(statistics.median(batch))
    return [
        Observation(size, statistics.median(times), load.workers, weight=len(times))
        for size, times in sorted(by_size.items())
    ]


def observation_from_result(result: PointResult, load: PointLoad) -> list[Observation]:
    """One observation from a point's summary figures (see the module docstring); [] if it has none."""
    if result.status != "ok" or result.throughput_rps <= 0:
        return []
    k, cap = max(load.workers, 1), max(load.max_batch, 1)
    if result.p50_service_s:
        batch = min(max(result.throughput_rps * result.p50_service_s / k, 1.0), float(cap))
        return [Observation(batch, result.p50_service_s, k)]
    if load.rate_rps is not None:
        return []
    batch = min(max(load.users / k, 1.0), float(cap)) if load.users else float(cap)
    busy = min(k, load.users) if load.users else k
    return [Observation(batch, busy * batch / result.throughput_rps, k)]


# ---------------------------------------------------------------- result


@dataclass
class ModelSearchResult(SearchResult):
    model: dict[str, Any] = field(default_factory=dict)  # fitted parameters (BatchFit.to_dict + memory)
    predicted_vs_measured: list[dict[str, Any]] = field(default_factory=list)
    fallback: str = ""  # why the search fell back to smart search ("" = it did not)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.update(model=self.model, predicted_vs_measured=self.predicted_vs_measured)
        if self.fallback:
            out["fallback"] = self.fallback
        return out


# ---------------------------------------------------------------- the search


def design_points(grid: Grid) -> list[tuple[int, ...]]:
    """Batch axis at both ends x worker axes at their middle and at their top; other axes at the middle."""
    names = list(grid.axes)
    mid = [n // 2 for n in grid.shape]
    batch_ends = [0, grid.shape[names.index("max_batch_size")] - 1] if "max_batch_size" in names else [None]
    workers = [i for i, name in enumerate(names) if name in WORKER_AXES]
    designs: list[tuple[int, ...]] = []
    for b_index, top in itertools.product(batch_ends, (False, True) if workers else (False,)):
        coords = list(mid)
        if b_index is not None:
            coords[names.index("max_batch_size")] = b_index
        for i in workers if top else ():
            coords[i] = grid.shape[i] - 1
        if tuple(coords) not in designs:
            designs.append(tuple(coords))
    return designs


@dataclass
class _State:
    grid: Grid
    evaluate: Evaluate
    constraints: Constraints
    describe: Describe
    observe: Observe
    measured: dict[str, PointResult] = field(default_factory=dict)
    order: list[PointResult] = field(default_factory=list)
    points: dict[str, Point] = field(default_factory=dict)

    def measure(self, point: Point) -> PointResult:
        if point.point_id not in self.measured:
            result = self.evaluate(point)
            self.measured[point.point_id] = result
            self.order.append(result)
            self.points[point.point_id] = point
        return self.measured[point.point_id]

    def fit(self) -> BatchFit:
        observations = [
            o
            for pid, r in self.measured.items()
            if r.status == "ok"
            for o in self.observe(self.points[pid], r)
        ]
        return fit_batch_model(observations)


def predicted_constraints(constraints: Constraints) -> Constraints:
    """The bounds a prediction can be checked against (latency, goodput/throughput floors, memory). The
    model predicts figures at the scenario's load, so it ranks by goodput whatever the sweep's objective;
    the sweep ranks the measured points by its own objective afterwards."""
    slo = {m: b for m, b in constraints.slo.items() if m in PREDICTED_METRICS or m.startswith("min_")}
    return replace(constraints, slo=slo, objective="latency")


def predicted_result(
    point: Point, prediction: Prediction, constraints: Constraints, memory_mb: float | None
) -> PointResult:
    """A PointResult built from a prediction (goodput = throughput when the latency bounds hold, else 0)."""
    unstable = prediction.mean_latency_s is None
    guess = PointResult(
        point.point_id,
        dict(point.knobs),
        goodput_rps=0.0 if unstable else prediction.throughput_rps,
        throughput_rps=prediction.throughput_rps,
        p50_latency_s=None if unstable else prediction.mean_latency_s,
        p95_latency_s=None if unstable else prediction.p95_latency_s,
        p99_latency_s=None if unstable else prediction.p95_latency_s,
        mean_latency_s=prediction.mean_latency_s,
        error_rate=1.0 if unstable else 0.0,
        peak_rss_mb=memory_mb,
    )
    if constraints.violations(guess):
        guess.goodput_rps = 0.0
    return guess


def fit_memory(
    results: Sequence[PointResult], loads: Sequence[PointLoad]
) -> tuple[float, float, float] | None:
    """peak_rss_mb ~ m0 + m1 * k*B + m2 * threads (None with fewer than 3 measured points)."""
    rows = [(ld, r.peak_rss_mb) for r, ld in zip(results, loads, strict=True) if r.peak_rss_mb is not None]
    if len(rows) < 3:
        return None
    design = np.array([[1.0, ld.workers * ld.max_batch, ld.threads] for ld, _ in rows])
    coef, *_ = np.linalg.lstsq(design, np.array([rss for _, rss in rows]), rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def model_search(
    grid: Grid,
    evaluate: Evaluate,
    constraints: Constraints,
    describe: Describe,
    *,
    observe: Observe | None = None,
    top_n: int = 3,
    min_r2: float = 0.8,
    max_fraction: float = 0.4,
) -> ModelSearchResult:
    """Model-based search over `grid` (see the module docstring)."""
    state = _State(grid, evaluate, constraints, describe, observe or _summary_observer(describe))
    for coords in design_points(grid):
        state.measure(grid.point_at(coords))
    n_design = len(state.order)
    budget = max(n_design + top_n, math.floor(max_fraction * grid.size))
    path: list[str] = []
    fit: BatchFit | None = None
    while True:
        try:
            fit = state.fit()
        except FitError as exc:
            return _fallback(state, f"{exc}", fit)
        if reason := untrusted(fit, min_r2):
            return _fallback(state, reason, fit)
        ranking = _ranking(state, fit)
        if not ranking:
            return _fallback(state, "the model predicts no feasible point", fit)
        todo = [p for p in ranking[:top_n] if p.point_id not in state.measured]
        if not todo or len(state.order) >= budget:
            break
        state.measure(todo[0])
        path.append(todo[0].point_id)
    return _result(state, fit, path, n_design)


def _summary_observer(describe: Describe) -> Observe:
    return lambda point, result: observation_from_result(result, describe(point))


def _memory_of(state: _State) -> Callable[[PointLoad], float | None]:
    if state.constraints.max_memory_mb is None:
        return lambda load: None
    measured = [r for r in state.order if r.status == "ok"]
    coef = fit_memory(measured, [state.describe(state.points[r.point_id]) for r in measured])
    if coef is None:
        return lambda load: None
    m0, m1, m2 = coef
    return lambda load: m0 + m1 * load.workers * load.max_batch + m2 * load.threads


def _ranking(state: _State, fit: BatchFit) -> list[Point]:
    """Feasible points, best first: measured ones by their measurements, the rest by prediction (under
    the capacity objective every point by its predicted capacity, `_capacity_ranking`)."""
    if state.constraints.objective == "capacity":
        return _capacity_ranking(state, fit)
    checkable = predicted_constraints(state.constraints)
    memory = _memory_of(state)
    merged: list[PointResult] = []
    by_id: dict[str, Point] = {}
    for point in state.grid.points():
        by_id[point.point_id] = point
        measured = state.measured.get(point.point_id)
        if measured is not None:
            at_load = replace(state.constraints, objective="latency")
            if measured.status == "ok" and not at_load.violations(measured):
                merged.append(replace(measured, extra={}))
            continue
        load = state.describe(point)
        merged.append(predicted_result(point, predict(fit, load), checkable, memory(load)))
    ranked = recommend(merged, checkable).ranked
    return [by_id[r.point_id] for r in ranked if r.verdict in FEASIBLE]


def _capacity_ranking(state: _State, fit: BatchFit) -> list[Point]:
    """Every point by its predicted capacity (`predicted_capacity`), measured ones included: a measured
    capacity is not comparable with a predicted one (the model misses a constant overhead), so measuring
    the predicted top `top_n` stops once the model's own ranking is confirmed."""
    memory = _memory_of(state)
    guesses, by_id = [], {}
    for point in state.grid.points():
        by_id[point.point_id] = point
        load = state.describe(point)
        guesses.append(predicted_capacity_result(point, fit, load, state.constraints, memory(load)))
    ranked = recommend(guesses, state.constraints).ranked
    return [by_id[r.point_id] for r in ranked if r.verdict in FEASIBLE]


def predicted_capacity_result(point: Point, fit: BatchFit, load: PointLoad, constraints: Constraints,
                              memory_mb: float | None) -> PointResult:
    """A PointResult carrying the model's capacity under the SLO (None: the SLO fails at any rate)."""
    capacity = predicted_capacity(fit, load, constraints.slo)
    return PointResult(point.point_id, dict(point.knobs), peak_rss_mb=memory_mb, capacity_rps=capacity,
                       capacity=CapacitySummary(capacity_rps=capacity, predicted=True))


def _comparison(state: _State, fit: BatchFit | None, n_design: int) -> list[dict[str, Any]]:
    rows = []
    for i, result in enumerate(state.order):
        row: dict[str, Any] = {"point_id": result.point_id, "role": "fit" if i < n_design else "predicted"}
        if fit is not None:
            p = predict(fit, state.describe(state.points[result.point_id]))
            load = state.describe(state.points[result.point_id])
            row["predicted"] = {
                "batch_size": p.batch_size,
                "service_s": p.service_s,
                "throughput_rps": p.throughput_rps,
                "p95_latency_s": p.p95_latency_s,
                "capacity_rps": predicted_capacity(fit, load, state.constraints.slo),
            }
        row["measured"] = {
            "status": result.status,
            "goodput_rps": result.goodput_rps,
            "throughput_rps": result.throughput_rps,
            "p95_latency_s": result.p95_latency_s,
            "capacity_rps": result.capacity_rps,
        }
        rows.append(row)
    return rows


def _model_dict(state: _State, fit: BatchFit | None) -> dict[str, Any]:
    out = fit.to_dict() if fit is not None else {}
    measured = [r for r in state.order if r.status == "ok"]
    if state.constraints.max_memory_mb is not None:
        coef = fit_memory(measured, [state.describe(state.points[r.point_id]) for r in measured])
        if coef is not None:
            out["peak_rss_mb"] = {"base": coef[0], "per_work_slot": coef[1], "per_thread": coef[2]}
    return out


def _result(state: _State, fit: BatchFit | None, path: list[str], n_design: int) -> ModelSearchResult:
    return ModelSearchResult(
        list(state.order),
        state.grid.size,
        path,
        model=_model_dict(state, fit),
        predicted_vs_measured=_comparison(state, fit, n_design),
    )


def _fallback(state: _State, reason: str, fit: BatchFit | None) -> ModelSearchResult:
    """Smart search from the grid's middle, reusing every point measured so far."""
    n_design = len(state.order)
    smart = smart_search(state.grid, state.measure, state.constraints)
    result = _result(state, fit, smart.path, n_design)
    result.fallback = f"fell back to smart search: {reason}"
    return result


def describe_point(defaults: Mapping[str, Any], load: Any) -> Describe:
    """A Describe for sweep points: knobs over the server defaults, client knobs over the scenario's load."""

    def describe(point: Point) -> PointLoad:
        knobs = {**defaults, **point.knobs}
        overrides = point.client_overrides()
        threads = _count(knobs.get("max_threads"), 40)
        # the function's workers: its limit (4.x+), or Gradio 3's pool shared by every event
        limit = _count(knobs.get("concurrency_limit", knobs.get("default_concurrency_limit",
                                                                knobs.get("concurrency_count"))), threads)
        rate, users = getattr(load, "rate", None), getattr(load, "users", None)
        if "load.rate" in overrides:
            rate, users = overrides["load.rate"], None
        elif "load.users" in overrides:
            rate, users = None, overrides["load.users"]
        return PointLoad(
            workers=max(1, min(limit, threads)),
            max_batch=max(1, _count(knobs.get("max_batch_size"), 1)),
            rate_rps=float(rate) if rate is not None and users is None else None,
            users=int(users) if users is not None else None,
            think_s=float(overrides.get("load.think_time", getattr(load, "think_time", 0.0)) or 0.0),
            threads=threads,
        )

    return describe


def _count(value: Any, default: int) -> int:
    """An integer knob; None / "none" / "default" (unlimited or unset) -> `default`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


def point_runs(point_dir: Path) -> list[Path]:
    """The run folders of one point: its own run, then its capacity probes (`capacity/<nn>-.../`), whose
    higher rates realise the larger batch sizes a fit needs."""
    probes = sorted(p for p in (point_dir / "capacity").glob("*") if p.is_dir())
    return [point_dir, *probes]


def records_observer(points_dir: Path, describe: Describe) -> Observe:
    """Observations from each point's records in `points_dir/<point-id>/` and its capacity probes (batches
    found run by run, pooled by batch size), else from its summary."""

    def observe(point: Point, result: PointResult) -> list[Observation]:
        load = describe(point)
        batches: list[list[float]] = []
        for run_dir in point_runs(points_dir / point.point_id):
            with contextlib.suppress(OSError, ValueError):
                batches.extend(record_batches(read_records(run_dir), load))
        found = observations_from_batches(batches, load)
        return found or observation_from_result(result, load)

    return observe
