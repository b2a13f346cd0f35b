"""`qbench sweep`: the run pipeline once per server configuration, then a recommendation (`run_sweep`).
The pipeline, the server modes and the sweep folder's layout: docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from qbench.tune.knobs.grid import Point
from qbench.tune.knobs.reference import effective_knobs
from qbench.tune.ranking.recommend import Recommendation, rank, recommend
from qbench.tune.search.by_model import model_search
from qbench.tune.search.by_simulation import SimPredictor, records_spread, sim_search
from qbench.tune.search.fit import describe_point, records_observer
from qbench.tune.search.smart import SearchResult, full_search, smart_search
from qbench.tune.sweep.advice import sweep_advice
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.confirm import capacity_record, rank_confirmed
from qbench.tune.sweep.evaluate import PointServers, check_launch_only, evaluate_point
from qbench.tune.sweep.outputs import load_done_points, sweep_json, write_outputs
from qbench.tune.sweep.winner import PhaseObserver, confirm_point, winner_capacity
from qbench.tune.values.ceiling import Capacity
from qbench.tune.values.result import PointResult


class SweepObserver(PhaseObserver, Protocol):
    """Progress hooks (the CLI renders them with rich)."""

    def point_started(self, point: Point, index: int, total: int) -> None: ...

    def point_done(self, result: PointResult, best: PointResult | None) -> None: ...


@dataclass
class SweepResult:
    sweep_dir: Path
    results: list[PointResult]
    recommendation: Recommendation
    search: SearchResult
    capacity: Capacity | None = None


def run_sweep(config: SweepConfig, observer: SweepObserver | None = None) -> SweepResult:
    """Run (or resume) a sweep into `config.sweep_dir`: its points, ranking, winner's capacity and files."""
    check_launch_only(config)
    config.sweep_dir.mkdir(parents=True, exist_ok=True)
    if not (config.sweep_dir / "sweep.json").exists():
        config.writer.json(config.sweep_dir / "sweep.json", sweep_json(config))
    done = load_done_points(config.sweep_dir)
    servers = PointServers(config)
    results: list[PointResult] = []
    total = config.grid.size if config.search == "grid" else None

    def evaluate(point: Point) -> PointResult:
        if point.point_id in done:
            result = done[point.point_id]
        else:
            if observer:
                observer.point_started(point, len(results) + 1, total or config.grid.size)
            result = evaluate_point(config, servers, point)
        results.append(result)
        if observer:
            observer.point_done(result, rank(results, config.constraints).winner)
        return result

    try:
        defaults = effective_knobs(config.base_settings, config.api_name) if config.base_settings else {}
        search = _search(config, evaluate, defaults)
        ranking, confirmation = rank(search.results, config.constraints), None
        confirm_s = config.capacity.confirm_duration_s
        if config.constraints.objective == "capacity" and confirm_s > 0:
            ranking, confirmation = rank_confirmed(
                search.results, lambda points: rank(points, config.constraints),
                lambda point: confirm_point(config, servers, point, observer), confirm_s)
        capacity, capacity_notes = winner_capacity(config, servers, ranking.winner, observer, confirmation)
    finally:
        servers.close()
    record = None
    if ranking.winner is not None and (capacity is not None or config.constraints.objective == "capacity"):
        record = capacity_record(capacity, config.capacity.confirm_duration_s, confirmation=confirmation)
    advice = sweep_advice(config, defaults, servers, ranking, record, capacity_notes)
    rec = recommend(search.results, config.constraints, advice)
    write_outputs(config.sweep_dir, search, rec, config)
    return SweepResult(config.sweep_dir, search.results, rec, search, capacity)


def _search(config: SweepConfig, evaluate: Callable[[Point], PointResult], defaults: dict[str, Any]
            ) -> SearchResult:
    """The points the sweep's search mode measures (grid: every one)."""
    if config.search == "smart":
        return smart_search(config.grid, evaluate, config.constraints)
    if config.search == "model":
        describe = describe_point(defaults, config.scenario.load)
        observe = records_observer(config.sweep_dir / "points", describe)
        return model_search(config.grid, evaluate, config.constraints, describe, observe=observe)
    if config.search == "sim":
        return _sim_search(config, evaluate, defaults)
    return full_search(config.grid, evaluate)


def _sim_search(config: SweepConfig, evaluate: Callable[[Point], PointResult], defaults: dict[str, Any]
                ) -> SearchResult:
    """Simulator search, calibrated on the points' records (qbench.tune.search.by_simulation)."""
    load = config.scenario.load
    describe = describe_point(defaults, load)
    predictor = SimPredictor(
        describe, lambda point: {**defaults, **point.knobs}, load, config.constraints,
        capacity_duration_s=config.probe_duration_s(10.0),
    )
    points = config.sweep_dir / "points"
    return sim_search(config.grid, evaluate, config.constraints, predictor,
                      observe=records_observer(points, describe), spread=records_spread(points, describe))
