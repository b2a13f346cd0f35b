"""Model search (`--search model`): fit the batch model on a few design points, measure only the points it
predicts best, recommend among the measured ones. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from qbench.tune.knobs.grid import Grid, Point
from qbench.tune.ranking.recommend import recommend
from qbench.tune.search.batch_model import (
    BatchFit,
    PointLoad,
    Prediction,
    predict,
    predicted_capacity,
)
from qbench.tune.search.fit import (
    FEASIBLE,
    ComparisonRow,
    Describe,
    FittedModel,
    MemoryFit,
    Observe,
    Predicted,
    Refined,
    SearchState,
    comparison_rows,
    fit_memory,
    memory_of,
    predicted_constraints,
    refine,
    summary_observer,
)
from qbench.tune.search.smart import Evaluate, SearchResult
from qbench.tune.values.ceiling import CapacitySummary
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult

# ---------------------------------------------------------------- result


@dataclass
class ModelSearchResult(SearchResult):
    model: FittedModel = field(default_factory=FittedModel)  # fitted parameters (l(b, k), memory)
    predicted_vs_measured: list[ComparisonRow] = field(default_factory=list)
    fallback: str = ""  # why the search fell back to smart search ("" = it did not)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        rows = [row.to_dict() for row in self.predicted_vs_measured]
        out.update(model=self.model.to_dict(), predicted_vs_measured=rows)
        if self.fallback:
            out["fallback"] = self.fallback
        return out


# ---------------------------------------------------------------- the search


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
    """Model search over `grid`; smart search when the model cannot be trusted (`fallback` says why)."""
    state = SearchState(grid, evaluate, constraints, describe, observe or summary_observer(describe))
    refined = refine(state, lambda fit: _ranking(state, fit), "the model predicts no feasible point",
                     top_n=top_n, min_r2=min_r2, max_fraction=max_fraction)
    return _result(state, refined)


def _ranking(state: SearchState, fit: BatchFit) -> list[Point]:
    """Feasible points, best first: measured ones as measured, others predicted (or `_capacity_ranking`)."""
    if state.constraints.objective == "capacity":
        return _capacity_ranking(state, fit)
    checkable = predicted_constraints(state.constraints)
    memory = memory_of(state)
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


def _capacity_ranking(state: SearchState, fit: BatchFit) -> list[Point]:
    """Every point, measured ones included, by its predicted capacity (a measured one is not comparable)."""
    memory = memory_of(state)
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


def _comparison(state: SearchState, fit: BatchFit | None, n_design: int) -> list[ComparisonRow]:
    if fit is None:
        return comparison_rows(state, n_design, None)

    def predicted(point: Point) -> Predicted:
        load = state.describe(point)
        p = predict(fit, load)
        return Predicted(throughput_rps=p.throughput_rps, p95_latency_s=p.p95_latency_s,
                         capacity_rps=predicted_capacity(fit, load, state.constraints.slo),
                         batch_size=p.batch_size, service_s=p.service_s)

    return comparison_rows(state, n_design, predicted)


def _model(state: SearchState, fit: BatchFit | None) -> FittedModel:
    measured = [r for r in state.order if r.status == "ok"]
    memory = None
    if state.constraints.max_memory_mb is not None:
        coef = fit_memory(measured, [state.describe(state.points[r.point_id]) for r in measured])
        memory = MemoryFit(*coef) if coef is not None else None
    return FittedModel(fit, memory)


def _result(state: SearchState, refined: Refined) -> ModelSearchResult:
    return ModelSearchResult(
        list(state.order),
        state.grid.size,
        refined.path,
        model=_model(state, refined.fit),
        predicted_vs_measured=_comparison(state, refined.fit, refined.n_design),
        fallback=refined.fallback,
    )


