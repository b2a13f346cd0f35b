"""`qbench sweep`: the run pipeline once per server configuration, then a recommendation.

    scenario.yaml (+ sweep: section) + CLI options -> SweepConfig -> Grid
      -> points (grid, smart, model or simulator search)
      -> per point: server (relaunch | live | launch | target) -> run_scenario -> PointResult -> point.json
      -> recommend() -> capacity of the winner (bisection on rate), confirmed by a sustained run
         (objective capacity: rank, confirm the winner, rank again; qbench.tune.sweep.confirm)
      -> sweep.parquet, recommendation.json

Server modes (`mode`):
    relaunch  default: `python -m reference_server --config <generated yaml> --port <free>` per point
    live      one reference server started with `--admin-token`, moved per point by `POST /admin/config`
    launch    the user's app (--app app.py, or a --launch command template), per point: qbench's startup
              hook sets the knobs in an unmodified Gradio app (qbench.tune.servers.apphook), QBENCH_*
              variables
              and {knob} placeholders serve apps that read them
    target    a fixed URL; only client knobs (rate, users, load.*) may be swept

Layout of `reports/<sweep-id>/` (charts are built from exactly these files):

    sweep.json              qbench.tune.values.sweep_info.SweepInfo: {schema_version, sweep_id,
    created_at, scenario
                             (path + content), mode, grid {axes, links}, slo, constraints, search, objective,
                             objective_why, confirm_duration_s, repeat, server (base settings / launch
                             template / target), options}
    points/<point-id>/      the run directory of the point's first repeat (records, summary.json, ...)
                            repeat-<n>/ run directories of further repeats; server.yaml, server.log
      point.json            {point_id, knobs, status ok|failed|stopped|knobs_not_applied, reason, resources
                             {peak_rss_mb, peak_gpu_mem_mb}, result (PointResult), repeats [{run_dir,
                             summary}], knobs_applied (KnobCheck: verdict, evidence, parallelism, hook),
                             elapsed_s}
      hook-record.json      launch mode: what the startup hook found in the app and set
      qbench-hook/          launch mode: the hook (sitecustomize.py) first on the app's PYTHONPATH
    sweep.parquet           one row per measured point: point_id, one column per knob, goodput_rps,
                            throughput_rps, p50/p95/p99_latency_s, error_rate, peak_rss_mb, peak_gpu_mem_mb,
                            status, reason, rank, verdict, goodput_ci_low, goodput_ci_high, repeats,
                            capacity_rps (objective capacity; else empty)
    recommendation.json     Recommendation.to_dict() (winner, why, ranked with reasons, gradio_code,
                            max_size_advice, capacity, notes) + search {mode, trials, grid_size, saved, path;
                            model and sim search: model, predicted_vs_measured, fallback}
    capacity/rate-<r>/      run directories of the capacity bisection probes (objective latency: the
                            winner's), and its sustained confirmation (<nn>-confirm-<r>/)
    confirm/<point-id>/     objective capacity: the sustained confirmation(s) of the winner's capacity
                            (qbench.tune.sweep.confirm); recommendation.json's capacity says how it held

Every point's knobs are checked before it may be ranked (qbench.tune.points.knobcheck): a point whose knobs
did not take effect is `knobs_not_applied`, with the evidence, and never ranked.

A point is checkpointed (point.json) as soon as it ends; `--resume DIR` reads sweep.json from DIR and
skips every point that has a point.json. A point whose server fails to start, or whose run raises, is
recorded as `failed` with the reason and the sweep goes on; a point whose queue runs away is stopped
early (`stopped`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from qbench.tune.knobs.grid import Point
from qbench.tune.knobs.server_knobs import effective_knobs
from qbench.tune.ranking.recommend import Recommendation, rank, recommend
from qbench.tune.search.search import SearchResult, full_search, smart_search
from qbench.tune.search.search_fit import describe_point, records_observer
from qbench.tune.search.search_model import model_search
from qbench.tune.search.search_sim import SimPredictor, records_spread, sim_search
from qbench.tune.sweep.advice import sweep_advice
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.confirm import capacity_record, rank_confirmed
from qbench.tune.sweep.evaluate import PointServers, check_launch_only, evaluate_point
from qbench.tune.sweep.outputs import load_done_points, sweep_json, write_outputs
from qbench.tune.sweep.winner import PhaseObserver, confirm_point, winner_capacity
from qbench.tune.values.capacity import Capacity
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
    """Run (or resume) a sweep and write every file in the module docstring's layout."""
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
        if config.constraints.objective == "capacity" and config.confirm_duration_s > 0:
            ranking, confirmation = rank_confirmed(
                search.results, lambda points: rank(points, config.constraints),
                lambda point: confirm_point(config, servers, point, observer), config.confirm_duration_s)
        capacity, capacity_notes = winner_capacity(config, servers, ranking.winner, observer, confirmation)
    finally:
        servers.close()
    record = None
    if ranking.winner is not None and (capacity is not None or config.constraints.objective == "capacity"):
        record = capacity_record(capacity, config.confirm_duration_s, confirmation=confirmation)
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
    """Simulator search, calibrated on the points' records (qbench.tune.search.search_sim)."""
    load = config.scenario.load
    describe = describe_point(defaults, load)
    predictor = SimPredictor(
        describe, lambda point: {**defaults, **point.knobs}, load, config.constraints,
        capacity_duration_s=config.capacity_duration_s or config.point_duration_s or load.duration or 10.0,
    )
    points = config.sweep_dir / "points"
    return sim_search(config.grid, evaluate, config.constraints, predictor,
                      observe=records_observer(points, describe), spread=records_spread(points, describe))
