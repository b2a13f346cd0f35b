"""What the model and simulator searches share: a point's load (Describe) and batch observations (Observe),
the design points, the measure-fit-rank loop (`refine`), and the fitted model and predicted-vs-measured rows
they write. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from qbench.run import Figures, Readable, RequestRecord, read_records, start_groups
from qbench.tune.knobs.grid import Grid, Point
from qbench.tune.search.batch_model import (
    BatchFit,
    FitError,
    Observation,
    PointLoad,
    fit_batch_model,
    untrusted,
)
from qbench.tune.search.smart import Evaluate, smart_search
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult

Describe = Callable[[Point], PointLoad]


Observe = Callable[[Point, PointResult], list[Observation]]


WORKER_AXES = ("concurrency_limit", "default_concurrency_limit", "concurrency_count", "max_threads")


FEASIBLE = ("winner", "tied", "feasible")  # the verdicts of points a ranking may choose


PREDICTED_METRICS = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "mean_latency_s")


def record_batches(
    records: Sequence[RequestRecord], load: PointLoad, tol_s: float = 0.005
) -> list[list[float]]:
    """Batches as service times: by `server_batch_size` where all ok say it, else starts within `tol_s`."""
    ok = [r for r in records
          if r.ok and not r.warmup and r.started_at_s is not None and r.completed_at_s is not None]
    if ok and all(r.server_batch_size for r in ok):
        return _server_batches(ok)
    starts = ((float(r.started_at_s), float(r.completed_at_s) - float(r.started_at_s))  # type: ignore[arg-type]
              for r in ok)
    return start_groups(starts, tol_s, load.max_batch)


def _server_batches(records: Sequence[RequestRecord]) -> list[list[float]]:
    """Each server batch size b's requests, b at a time in start order, on the server's clock if said."""
    by_size: dict[int, list[float]] = {}
    for r in sorted(records, key=lambda r: r.started_at_s or 0.0):
        assert r.server_batch_size and r.started_at_s is not None and r.completed_at_s is not None
        service = r.server_total_s if r.server_total_s is not None else r.completed_at_s - r.started_at_s
        by_size.setdefault(r.server_batch_size, []).append(service)
    return [times[i:i + size] for size, times in sorted(by_size.items())
            for i in range(0, len(times) - size + 1, size)]


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
    """One observation from a point's summary figures ([] if they give none)."""
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
class SearchState:
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


@dataclass
class Refined:
    """How a fitted search ended: last fit, path after the design, design size, fallback ("": none)."""

    fit: BatchFit | None
    path: list[str]
    n_design: int
    fallback: str = ""


def refine(state: SearchState, rank: Callable[[BatchFit], list[Point]], nothing_feasible: str, *,
           top_n: int, min_r2: float, max_fraction: float) -> Refined:
    """Measure the design points, then fit, `rank` and measure the best unmeasured of the top `top_n` until
    done or out of budget; a bad fit or an empty ranking falls back to smart search."""
    for coords in design_points(state.grid):
        state.measure(state.grid.point_at(coords))
    n_design = len(state.order)
    budget = max(n_design + top_n, math.floor(max_fraction * state.grid.size))
    path: list[str] = []
    fit: BatchFit | None = None
    while True:
        try:
            fit = state.fit()
        except FitError as exc:
            return _smart(state, fit, n_design, str(exc))
        if reason := untrusted(fit, min_r2):
            return _smart(state, fit, n_design, reason)
        ranking = rank(fit)
        if not ranking:
            return _smart(state, fit, n_design, nothing_feasible)
        todo = [p for p in ranking[:top_n] if p.point_id not in state.measured]
        if not todo or len(state.order) >= budget:
            return Refined(fit, path, n_design)
        state.measure(todo[0])
        path.append(todo[0].point_id)


def _smart(state: SearchState, fit: BatchFit | None, n_design: int, reason: str) -> Refined:
    smart = smart_search(state.grid, state.measure, state.constraints)
    return Refined(fit, smart.path, n_design, f"fell back to smart search: {reason}")


# ---------------------------------------------------------------- the fitted model


@dataclass(frozen=True)
class MemoryFit:
    """peak_rss_mb ~ base + per_work_slot * k*B + per_thread * threads (fit_memory)."""

    base: float
    per_work_slot: float
    per_thread: float


@dataclass(frozen=True)
class FittedModel:
    """A model or simulator search's fitted parameters (recommendation.json's `search.model`)."""

    fit: BatchFit | None = None  # None: no fit (fewer than 2 distinct batch sizes)
    peak_rss_mb: MemoryFit | None = None  # model search under a memory ceiling, with 3+ measured points
    sigma: float | None = None  # simulator search: the lognormal spread of the service times
    simulator: str | None = None  # simulator search: the module that simulated the grid
    simulated_points: int | None = None  # simulator search: points simulated (the grid's size)

    def to_dict(self) -> dict[str, Any]:
        """BatchFit.to_dict's keys, then the fields that are set (the keys the searches always wrote)."""
        out = self.fit.to_dict() if self.fit is not None else {}
        if self.peak_rss_mb is not None:
            out["peak_rss_mb"] = dataclasses.asdict(self.peak_rss_mb)
        extra = {"sigma": self.sigma, "simulator": self.simulator, "simulated_points": self.simulated_points}
        return {**out, **{k: v for k, v in extra.items() if v is not None}}


# ---------------------------------------------------------------- predicted vs measured


@dataclass(frozen=True)
class Predicted(Readable, tolerant=True):
    """A point's figures as the final fit predicts them."""

    throughput_rps: float | None = None
    p95_latency_s: float | None = None
    capacity_rps: float | None = None  # under the SLO; None: the SLO fails at any rate (or not asked)
    batch_size: float | None = None  # model search: the realised batch size
    service_s: float | None = None  # model search: one batch's service time
    goodput_rps: float | None = None  # simulator search

    def to_dict(self) -> dict[str, Any]:
        """The shared figures always (None included), a search's own ones when it set them."""
        out = {k: getattr(self, k) for k in ("batch_size", "service_s") if getattr(self, k) is not None}
        out.update(throughput_rps=self.throughput_rps)
        if self.goodput_rps is not None:
            out["goodput_rps"] = self.goodput_rps
        return {**out, "p95_latency_s": self.p95_latency_s, "capacity_rps": self.capacity_rps}


@dataclass
class MeasuredPoint(Figures, Readable, tolerant=True):
    status: str | None = None
    capacity_rps: float | None = None

    @classmethod
    def of(cls, result: PointResult) -> MeasuredPoint:
        return cls(status=result.status, capacity_rps=result.capacity_rps, **result.figure_values())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ComparisonRow(Readable, tolerant=True):
    """A measured point, measured and as the final fit predicts it (`search.predicted_vs_measured`); read
    back, a missing or mistyped entry (an older file) reads as its default."""

    point_id: str = ""
    role: str = ""  # "fit": a design point the model was first fitted on; "predicted": ranked best
    measured: MeasuredPoint = field(default_factory=MeasuredPoint)
    predicted: Predicted | None = None  # None: no model was fitted

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"point_id": self.point_id, "role": self.role}
        if self.predicted is not None:
            out["predicted"] = self.predicted.to_dict()
        return {**out, "measured": self.measured.to_dict()}


def comparison_rows(state: SearchState, n_design: int,
                    predicted: Callable[[Point], Predicted] | None) -> list[ComparisonRow]:
    """Every measured point in measuring order (the first `n_design` as "fit"); `predicted` None: no fit."""
    return [
        ComparisonRow(result.point_id, "fit" if i < n_design else "predicted", MeasuredPoint.of(result),
                      predicted(state.points[result.point_id]) if predicted is not None else None)
        for i, result in enumerate(state.order)
    ]


def stored_rows(value: Any) -> list[ComparisonRow]:
    """A stored `predicted_vs_measured` (a JSON list of row objects) as rows; anything else: none."""
    if not isinstance(value, list):
        return []
    return [ComparisonRow.from_dict(row) for row in value if isinstance(row, Mapping)]


def predicted_constraints(constraints: Constraints) -> Constraints:
    """The bounds a prediction can be checked against (latency, floors, memory), ranking by goodput."""
    slo = {m: b for m, b in constraints.slo.items() if m in PREDICTED_METRICS or m.startswith("min_")}
    return replace(constraints, slo=slo, objective="latency")


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


def summary_observer(describe: Describe) -> Observe:
    return lambda point, result: observation_from_result(result, describe(point))


def memory_of(state: SearchState) -> Callable[[PointLoad], float | None]:
    if state.constraints.max_memory_mb is None:
        return lambda load: None
    measured = [r for r in state.order if r.status == "ok"]
    coef = fit_memory(measured, [state.describe(state.points[r.point_id]) for r in measured])
    if coef is None:
        return lambda load: None
    m0, m1, m2 = coef
    return lambda load: m0 + m1 * load.workers * load.max_batch + m2 * load.threads


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
    """A point's run folders: its own, then its capacity probes' (`capacity/<nn>-.../`)."""
    probes = sorted(p for p in (point_dir / "capacity").glob("*") if p.is_dir())
    return [point_dir, *probes]


def records_observer(points_dir: Path, describe: Describe) -> Observe:
    """Observations from each point's records and probes in `points_dir/<point-id>/`, else its summary."""

    def observe(point: Point, result: PointResult) -> list[Observation]:
        load = describe(point)
        batches: list[list[float]] = []
        for run_dir in point_runs(points_dir / point.point_id):
            with contextlib.suppress(OSError, ValueError):
                batches.extend(record_batches(read_records(run_dir), load))
        found = observations_from_batches(batches, load)
        return found or observation_from_result(result, load)

    return observe
