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

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import yaml

from qbench.errors import QbenchError, ScenarioError
from qbench.run import (
    Columns,
    Summary,
    SummaryFile,
    pair_runs,
    read_gradio_mode,
    read_gradio_version,
    read_records,
    read_status,
)
from qbench.tune.capacity.capacity_run import recheck
from qbench.tune.capacity.search import search_capacity
from qbench.tune.knobs.grid import LAUNCH_ONLY_KNOBS, Grid, Point, split_knob
from qbench.tune.knobs.server_knobs import admin_body, apply_server_knobs, effective_knobs
from qbench.tune.knobs.versions import KnobVersionError, check_knobs, gradio_major
from qbench.tune.points.knobcheck import (
    AppKnobError,
    KnobCheck,
    check_batching,
    check_events,
    check_point,
    expected_settings,
)
from qbench.tune.points.point import RunawayDetector, point_result
from qbench.tune.ranking.recommend import (
    Advice,
    RankedPoint,
    Ranking,
    Recommendation,
    max_size_advice,
    rank,
    recommend,
)
from qbench.tune.search.search import SearchResult, full_search, smart_search
from qbench.tune.search.search_fit import describe_point, records_observer
from qbench.tune.search.search_model import model_search
from qbench.tune.search.search_sim import SimPredictor, records_spread, sim_search
from qbench.tune.servers.app_process import launch_command
from qbench.tune.servers.apphook import HookRecord, app_change, read_hook_record
from qbench.tune.servers.resources import ResourceSampler, status_memory
from qbench.tune.servers.server_process import ServerHandle, reconfigure, reference_server_process
from qbench.tune.sweep.config import SweepConfig, masked_settings, swept_server_knobs
from qbench.tune.sweep.confirm import (
    Confirmation,
    capacity_record,
    carry_capacity,
    confirm_capacity,
    rank_confirmed,
    sweep_plan,
    sweep_prober,
)
from qbench.tune.sweep.point_runs import run_point
from qbench.tune.values.capacity import Capacity, CapacityRecord
from qbench.tune.values.point_file import NAME as POINT_FILE
from qbench.tune.values.point_file import PointFile, read_point_file
from qbench.tune.values.result import KnobVerdict, PointResult
from qbench.tune.values.sweep_info import SweepInfo

SCHEMA_VERSION = 1


class SweepObserver(Protocol):
    """Progress hooks (the CLI renders them with rich)."""

    def point_started(self, point: Point, index: int, total: int) -> None: ...

    def point_done(self, result: PointResult, best: PointResult | None) -> None: ...

    def phase(self, text: str) -> None: ...


@dataclass
class SweepResult:
    sweep_dir: Path
    results: list[PointResult]
    recommendation: Recommendation
    search: SearchResult
    capacity: Capacity | None = None


# ---------------------------------------------------------------- servers per mode


@dataclass
class _Servers:
    """Gives each point a ready server (and keeps the one live server of `live` mode)."""

    config: SweepConfig
    live: ServerHandle | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    # the servers' Gradio release (for the advice): the config's (reference server), else read from the
    # first point's /config or the startup hook's record (launch and target modes); None until known
    gradio_major: int | None = None
    app_mode: str | None = None  # the app's /config `mode` (launch and target modes): "server", "blocks"

    def __post_init__(self) -> None:
        self.gradio_major = self.config.gradio_major

    def settings_for(self, point: Point) -> dict[str, Any]:
        assert self.config.base_settings is not None
        return apply_server_knobs(self.config.base_settings, point.server_knobs(), self.config.api_name)

    @contextlib.contextmanager
    def for_point(self, point: Point, work_dir: Path) -> Iterator[ServerHandle]:
        mode = self.config.mode
        timeout = self.config.ready_timeout_s
        work_dir.mkdir(parents=True, exist_ok=True)  # server.yaml / server.log go here in every mode
        if mode == "relaunch":
            with reference_server_process(
                self.settings_for(point), work_dir=work_dir, ready_timeout_s=timeout
            ) as h:
                yield h
        elif mode == "live":
            if self.live is None:
                token = secrets.token_urlsafe(16)
                base = self.config.base_settings or {}
                self.live = self._stack.enter_context(
                    reference_server_process(
                        base,
                        admin_token=token,
                        work_dir=self.config.sweep_dir / "live-server",
                        ready_timeout_s=timeout,
                    )
                )
            reconfigure(self.live, admin_body(self.settings_for(point)))
            shown = masked_settings(self.settings_for(point))  # auth as ***
            self.config.writer.text(work_dir / "server.yaml", json.dumps(shown, indent=1))
            yield self.live
        elif mode == "launch":
            assert self.config.launch is not None
            http = self.config.scenario.protocol == "http"  # no /config: any answer means it listens
            with launch_command(
                self.config.launch, point.knobs, work_dir=work_dir, ready_timeout_s=timeout, any_status=http,
                hook=self.config.hook, hook_events=self.config.hook_events,
            ) as h:
                yield h
        else:
            assert self.config.target is not None
            yield ServerHandle(self.config.target.rstrip("/"), None)

    def check_release(self, handle: ServerHandle) -> None:
        """Launch and target modes, first point: read the app's Gradio release from its /config (for the
        advice) and refuse a grid knob that release lacks (KnobVersionError) before any load is sent."""
        config = self.config
        if config.mode not in ("launch", "target") or config.scenario.protocol != "gradio":
            return
        if self.app_mode is None:
            self.app_mode = read_gradio_mode(handle.base_url) or ""
        if self.gradio_major is not None:
            return
        self.gradio_major = gradio_major(read_gradio_version(handle.base_url))
        check_knobs(swept_server_knobs(config.grid), self.gradio_major, f"the app at {handle.base_url}")

    def check_hook(self, point: Point, work_dir: Path) -> HookRecord | None:
        """Launch mode with the hook, every point before its load: the hook's record (its Gradio release
        for the advice); BatchKnobError when the grid asks for batching on a function that is not
        batch=True, which no setting can fix (at the first point, unless the app reads
        QBENCH_MAX_BATCH_SIZE and may declare batching itself)."""
        if not (self.config.mode == "launch" and self.config.hook):
            return None
        record = read_hook_record(work_dir)
        if record is not None and self.gradio_major is None:
            self.gradio_major = record.major
        placeholder = "{max_batch_size}" in (self.config.launch or "")  # the app gets it, may batch then
        sizes = [] if placeholder else self.config.grid.axes.get("max_batch_size", [])
        check_events(point.knobs, record)
        check_batching(point.knobs, record, sizes)
        return record

    def effective(self, point: Point) -> dict[str, Any] | None:
        """The reference server's knobs for `point` (None where qbench does not set the server itself)."""
        if self.config.mode not in ("relaunch", "live") or self.config.base_settings is None:
            return None
        return effective_knobs(self.settings_for(point), self.config.api_name)

    def close(self) -> None:
        self._stack.close()


# ---------------------------------------------------------------- one point


def _resources(handle: ServerHandle, sampler: ResourceSampler | None) -> dict[str, float | None]:
    """Peak RSS: psutil samples (every 0.25 s) of the server's process tree during the point; `/status`
    only as a fallback, because its `peak_rss_bytes` (getrusage ru_maxrss) survives fork+exec and so can
    report the peak of the process that launched the server. Peak CUDA memory from `/status`."""
    status = read_status(handle.base_url) if handle.process is not None else None
    rss, gpu = status_memory(status or {})
    sampled = sampler.peak_rss_mb if sampler and sampler.peak_rss_mb > 0 else None
    return {"peak_rss_mb": sampled if sampled is not None else rss, "peak_gpu_mem_mb": gpu}


def _repeats(config: SweepConfig, point: Point, url: str, summaries: list[Summary],
             repeats: list[dict[str, Any]]) -> str:
    """Run the point's repeats (the first in its folder, the others in repeat-N/), appending each
    summary and point.json entry; the reason a runaway detector stopped one ("" when none did)."""
    point_dir = config.sweep_dir / "points" / point.point_id
    for n in range(1, config.repeat + 1):
        run_dir = point_dir if n == 1 else point_dir / f"repeat-{n}"
        detector = RunawayDetector() if config.stop_runaway else None
        measured = run_point(config, url, point, run_dir, detector)
        summary, stopped = measured.summary, measured.stopped
        summaries.append(summary)
        repeats.append({"run_dir": str(run_dir.relative_to(config.sweep_dir)), "summary": summary.to_dict()})
        if stopped:
            return stopped
    return ""


def evaluate_point(config: SweepConfig, servers: _Servers, point: Point) -> PointResult:
    """Start (or move) the server, run every repeat, read resources; never raises a QbenchError."""
    point_dir = config.sweep_dir / "points" / point.point_id
    point_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    repeats: list[dict[str, Any]] = []  # point.json's: {run_dir, summary (Summary.to_dict())}
    summaries: list[Summary] = []
    resources: dict[str, float | None] = {"peak_rss_mb": None, "peak_gpu_mem_mb": None}
    status, reason, detail = "ok", "", ""
    capacity: Capacity | None = None
    check: KnobCheck | None = None
    try:
        with servers.for_point(point, point_dir) as handle:
            servers.check_release(handle)
            hook = servers.check_hook(point, point_dir)
            sampler = ResourceSampler(handle.pid) if handle.pid else None
            with sampler if sampler else contextlib.nullcontext():
                stopped = _repeats(config, point, handle.base_url, summaries, repeats)
                if stopped:
                    status, reason = "stopped", stopped
                if hook is not None:  # what launch() started after the port answered (SSR's Node proxy)
                    hook = read_hook_record(point_dir) or hook
                check = _check_knobs(config, servers, point, point_dir, hook)
                if check is not None and check.verdict == "not_applied":
                    status, reason = "knobs_not_applied", check.summary
                elif config.constraints.objective == "capacity":
                    capacity = point_capacity(config, handle.base_url, point, point_dir / "capacity")
            resources = _resources(handle, sampler)
    except (KnobVersionError, AppKnobError):
        raise  # the whole grid is wrong for this app: end the sweep before any load
    except QbenchError as exc:  # the first line is the reason; the rest (a server log tail) the detail
        detail = str(exc).strip() or type(exc).__name__
        status, reason = "failed", detail.splitlines()[0]
    except Exception as exc:  # a crashed point must not end the sweep: record it and go on
        detail = f"{type(exc).__name__}: {exc}"
        status, reason = "failed", detail.splitlines()[0]
    result = point_result(point, summaries, config.constraints, status, reason, resources)
    if check is not None:
        result.knob_check = KnobVerdict(check.verdict, list(check.evidence))
    if capacity is not None:
        carry_capacity(result, capacity)
    point_file = PointFile(point.point_id, dict(point.knobs), result.status, result.reason, detail, resources,
                           result, repeats, capacity, check.to_dict() if check is not None else None,
                           time.monotonic() - started)
    config.writer.json(point_dir / POINT_FILE, point_file.to_dict())
    return result


def check_launch_only(config: SweepConfig) -> None:
    """num_workers and ssr_mode are launch() arguments of an app qbench launches: no other mode can set
    them (the reference server's own front ends are `launch.front_ends`)."""
    if config.mode == "launch":
        return
    names = [k for k in [*config.grid.axes, *config.grid.links] if split_knob(k)[0] in LAUNCH_ONLY_KNOBS]
    if names:
        raise ScenarioError(
            f"knob {names[0]!r}: a launch() setting of a Gradio app that qbench launches (--app app.py or "
            f"--launch CMD); this sweep's server is {config.mode!r}"
            + (" (the reference server's HTTP front ends: --set launch.front_ends=N)"
               if names[0].startswith("num_workers") else ""))


def _check_knobs(
    config: SweepConfig, servers: _Servers, point: Point, point_dir: Path, hook: HookRecord | None
) -> KnobCheck | None:
    """Whether the point's server knobs took effect (qbench.tune.points.knobcheck), from the hook's record and
    the first repeat's records; in target mode, the settings the scenario expects (`expect:`). None for
    a plain HTTP server, or client knobs only and nothing expected."""
    knobs = point.server_knobs() or (expected_settings(config.scenario) if config.mode == "target" else {})
    if config.scenario.protocol != "gradio" or not knobs and config.mode != "launch":
        return None
    try:
        records = read_records(point_dir)
    except (OSError, ValueError):
        records = []
    return check_point(knobs, records, hook=hook, launched_by_hook=config.hook,
                       effective=servers.effective(point), lag_s=_loop_lag(point_dir))


def _loop_lag(run_dir: Path) -> float:
    """The load generator's p99 event-loop lag in that run (0 when its summary does not say)."""
    stored = SummaryFile.read(run_dir)
    return 0.0 if stored is None else stored.summary.generator.p99_loop_lag_s or 0.0


# ---------------------------------------------------------------- the sweep


def run_sweep(config: SweepConfig, observer: SweepObserver | None = None) -> SweepResult:
    """Run (or resume) a sweep and write every file in the module docstring's layout."""
    check_launch_only(config)
    config.sweep_dir.mkdir(parents=True, exist_ok=True)
    if not (config.sweep_dir / "sweep.json").exists():
        config.writer.json(config.sweep_dir / "sweep.json", _sweep_json(config))
    done = load_done_points(config.sweep_dir)
    servers = _Servers(config)
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
                lambda point: _confirm_point(config, servers, point, observer), config.confirm_duration_s)
        capacity, capacity_notes = _winner_capacity(config, servers, ranking.winner, observer, confirmation)
    finally:
        servers.close()
    record = None
    if ranking.winner is not None and (capacity is not None or config.constraints.objective == "capacity"):
        record = capacity_record(capacity, config.confirm_duration_s, confirmation=confirmation)
    advice = _advice(config, defaults, servers, ranking, record, capacity_notes)
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


def _winner_capacity(config: SweepConfig, servers: _Servers, winner: PointResult | None,
                     observer: SweepObserver | None, confirmation: Confirmation | None
                     ) -> tuple[Capacity | None, list[str]]:
    """The winner's capacity: confirmed or saved in its point.json (objective capacity), else measured
    now, with its sustained confirmation, when capacity_trials > 0 (a failure becomes a note: the
    measured points and their ranking still count)."""
    if winner is None:
        return None, []
    if config.constraints.objective == "capacity":
        confirmed = confirmation.capacities.get(winner.point_id) if confirmation else None
        return confirmed or _saved_capacity(config.sweep_dir, winner), []
    if config.capacity_trials <= 0:
        return None, []
    if observer:
        seconds = config.confirm_duration_s
        then = f", then {seconds:g} s to confirm" if seconds else ""
        observer.phase(f"capacity of {winner.point_id}: bisection on the arrival rate{then}")
    try:
        return _capacity(config, servers, winner), []
    except QbenchError as exc:
        return None, [f"capacity not measured: {str(exc).splitlines()[0]}"]
    except Exception as exc:  # as for a crashed point: keep the measured points' files
        return None, [f"capacity not measured: {type(exc).__name__}: {exc}".splitlines()[0]]


def _advice(config: SweepConfig, defaults: dict[str, Any], servers: _Servers, ranking: Ranking,
            capacity: CapacityRecord | None, capacity_notes: list[str]) -> Advice:
    """What the recommendation says beside the ranking: code inputs, the winner's capacity and notes."""
    winner, gradio = ranking.winner, config.scenario.protocol == "gradio"
    code, label = "", ""
    if winner is not None and not gradio:
        advised = max_size_advice(winner, config.constraints).max_size
        code, label = server_advice(config, winner, advised)
    notes = config.grid.edge_notes(winner.knobs) if winner is not None else []
    notes += paired_note(config.sweep_dir, ranking.ranked)
    if winner is not None and config.hook and not defaults:  # an app: its own settings where unswept
        hook = read_hook_record(config.sweep_dir / "points" / winner.point_id)
        if hook is not None and hook.chosen:
            defaults = hook.app_settings(hook.chosen[0])
    return Advice(
        defaults=defaults, gradio_major=servers.gradio_major, objective_why=config.objective_why,
        gradio=gradio, server_api=_server_api(config, servers),
        server_code=code, server_code_label=label, app_change=_app_change(config, winner),
        capacity=capacity, notes=notes + capacity_notes,
    )


def _server_api(config: SweepConfig, servers: _Servers) -> str | None:
    """The endpoint's name when the app is a gradio.Server app (its settings are `@server.api(...)`
    arguments, not demo.queue / .click ones), else None."""
    if servers.app_mode != "server":
        return None
    return config.scenario.endpoint.api_name or ""


def _app_change(config: SweepConfig, winner: PointResult | None) -> list[str]:
    """The winner as a change to the app's own settings, from what the hook read at its launch."""
    if winner is None or not config.hook:
        return []
    hook = read_hook_record(config.sweep_dir / "points" / winner.point_id)
    return app_change(hook, winner.knobs) if hook is not None and hook.launched else []


def server_advice(config: SweepConfig, winner: PointResult, advised: int | None) -> tuple[str, str]:
    """(code, label) for a plain HTTP / OpenAI target: the reference server's settings with the winner's
    knobs and the `advised` max_size (relaunch, live), or the user's launch command filled in (launch)."""
    knobs = dict(winner.knobs)
    if config.base_settings is not None:
        if "max_size" not in knobs and advised is not None:
            knobs["max_size"] = advised
        settings = apply_server_knobs(config.base_settings, knobs, config.api_name)
        settings.pop("admin_token", None)
        had_auth = settings.pop("auth", None) is not None  # secrets never reach advice or its files
        body = yaml.safe_dump(settings, sort_keys=False)
        if had_auth:
            body += "# auth: as in your settings (qbench never writes credentials)\n"
        return body, "reference server settings: save as server.yaml, then qbench serve --config server.yaml"
    if config.launch is not None:
        command = config.launch.format_map({**knobs, "port": "{port}"})
        return command, "your app's command with the winner's knobs"
    return "", ""


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


def _capacity(config: SweepConfig, servers: _Servers, winner: PointResult) -> Capacity:
    """The winner's capacity (latency objective), on a server of its own, from its throughput, confirmed
    by a sustained run (qbench.tune.sweep.confirm)."""
    point = config.grid.point_at(_coords_of(config.grid, winner))
    work = config.sweep_dir / "capacity"
    with servers.for_point(point, work) as handle:
        return point_capacity(config, handle.base_url, point, work, first_rate=winner.throughput_rps or 1.0,
                              confirm=True)


def _confirm_point(config: SweepConfig, servers: _Servers, result: PointResult,
                   observer: SweepObserver | None) -> Capacity | None:
    """Objective capacity: a point's saved capacity confirmed by a sustained run on its own server."""
    saved = _saved_capacity(config.sweep_dir, result)
    if saved is None or saved.capacity_rps is None:
        return saved
    if observer:
        observer.phase(f"confirming {result.point_id}: {config.confirm_duration_s:g} s at "
                       f"{saved.capacity_rps:.3g} req/s")
    point = config.grid.point_at(_coords_of(config.grid, result))
    work = config.sweep_dir / "confirm" / result.point_id
    with servers.for_point(point, work) as handle:
        return confirm_capacity(config, handle.base_url, point, work, saved)


def point_capacity(
    config: SweepConfig, base_url: str, point: Point, work: Path, first_rate: float | None = None,
    confirm: bool = False,
) -> Capacity:
    """Capacity of one point on its (warm) server: `capacity_trials` open-loop probes, judged like
    `qbench capacity`'s (SLO and steady state), of `capacity_duration_s` while bracketing and up to
    SWEEP_REFINE_FACTOR times that while bisecting, to `capacity_tolerance` (qbench.tune.sweep.confirm:
    `sweep_prober`); with `confirm`, then the sustained confirmation; then the first passing rate once
    more (capacity_run.recheck: the server's degradation over its search). Without `first_rate`, a
    closed-loop estimate with twice the point's work slots in users (concurrency_limit x
    max_batch_size; 32 when unknown) gives the first guess."""
    prober = sweep_prober(config, base_url, point, work)
    estimate = None
    if first_rate is None:
        estimate, _ = prober.estimate(_estimate_users(config, point))
        first_rate = estimate.rate_rps or 1.0
    capacity = search_capacity(prober.rate, first_rate, sweep_plan(config, confirm), estimate,
                               refine=prober.refine, confirm=prober.confirm)
    recheck(prober, capacity)  # did this server get slower while it was measured?
    return capacity


def _estimate_users(config: SweepConfig, point: Point) -> int:
    knobs = {**(effective_knobs(config.base_settings, config.api_name) if config.base_settings else {}),
             **point.knobs}
    limit = knobs.get("concurrency_limit", knobs.get("concurrency_count"))
    batch = knobs.get("max_batch_size", 1)
    if isinstance(limit, int) and isinstance(batch, int):
        return max(4, 2 * limit * batch)
    return 32


def _saved_capacity(sweep_dir: Path, winner: PointResult) -> Capacity | None:
    """The capacity search saved in the winner's point.json (objective capacity)."""
    saved = read_point_file(sweep_dir / "points" / winner.point_id)
    return saved.capacity if saved is not None else None


def paired_note(sweep_dir: Path, ranked: list[RankedPoint]) -> list[str]:
    """Whether the winner and the runner-up really differ request by request (when their runs share a
    schedule: open-loop points at one rate and seed do), as one note; nothing otherwise."""
    ok = [r for r in ranked if r.verdict not in ("failed", "infeasible", "knobs_not_applied")][:2]
    if len(ok) < 2:
        return []
    try:
        first, second = (read_records(sweep_dir / "points" / r.point_id) for r in ok)
    except (OSError, ValueError):
        return []
    pairing = pair_runs(Columns.of(second), Columns.of(first))  # B = the winner, A = the runner-up
    latency = {p.phase: p for p in pairing.phases}.get("latency_s")
    if not pairing.shared or latency is None:
        return []
    winner, runner_up = ok[0].point_id, ok[1].point_id
    head = f"per request, {winner} against the runner-up {runner_up} ({latency.pairs} pairs, one schedule)"
    if latency.verdict == "no clear difference":
        return [f"{head}: no clear latency difference (p = {_p(latency.p_value)}); "
                "their latency order is within the noise"]
    ms = [f"{v * 1000:+.1f}" for v in (latency.median_diff, latency.ci_low, latency.ci_high)]
    return [f"{head}: latency median {ms[0]} ms (95% CI {ms[1]} to {ms[2]} ms), {winner} faster for "
            f"{latency.b_faster:.0%} of requests ({latency.verdict})"]


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def _coords_of(grid: Grid, result: PointResult) -> tuple[int, ...]:
    return tuple(values.index(result.knobs[name]) for name, values in grid.axes.items())


# ---------------------------------------------------------------- files


def _sweep_json(config: SweepConfig) -> dict[str, Any]:
    """sweep.json through its readers' type (qbench.tune.values.sweep_info: a key must be a SweepInfo
    field)."""
    return SweepInfo(schema_version=SCHEMA_VERSION, sweep_id=config.sweep_dir.name,
                     created_at=datetime.now(timezone.utc).isoformat(), **config.describe()).to_dict()


def load_done_points(sweep_dir: Path) -> dict[str, PointResult]:
    """Checkpointed points of a (possibly interrupted) sweep, by point id."""
    done: dict[str, PointResult] = {}
    for path in sorted((sweep_dir / "points").glob(f"*/{POINT_FILE}")):
        saved = read_point_file(path.parent)
        if saved is not None and saved.result is not None:
            done[saved.point_id] = saved.result
    return done


def write_outputs(sweep_dir: Path, search: SearchResult, rec: Recommendation, config: SweepConfig) -> None:
    """sweep.parquet (one row per measured point) and recommendation.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ranks = {r.point_id: r for r in rec.ranked}
    knob_names = list(dict.fromkeys(k for r in search.results for k in r.knobs))
    rows = [_row(r, knob_names, ranks) for r in search.results]
    columns = {name: [row[name] for row in rows] for name in (rows[0] if rows else {"point_id": None})}
    for name in knob_names:  # a knob with mixed types (max_size 4 / "none") becomes text
        kinds = {type(v) for v in columns[name] if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            columns[name] = [None if v is None else str(v) for v in columns[name]]
    table = pa.Table.from_pydict(columns)
    pq.write_table(
        table.replace_schema_metadata({b"qbench_sweep_schema_version": str(SCHEMA_VERSION).encode()}),
        sweep_dir / "sweep.parquet",
    )
    out = rec.to_dict()
    out["search"] = {"mode": config.search, **search.to_dict()}
    config.writer.json(sweep_dir / "recommendation.json", out)  # a server log tail may echo a secret


def _row(r: PointResult, knob_names: list[str], ranks: dict[str, Any]) -> dict[str, Any]:
    lo, hi = r.goodput_ci()
    ranked = ranks.get(r.point_id)
    row: dict[str, Any] = {"point_id": r.point_id}
    row.update({name: r.knobs.get(name) for name in knob_names})
    row.update(
        goodput_rps=r.goodput_rps,
        throughput_rps=r.throughput_rps,
        p50_latency_s=r.p50_latency_s,
        p95_latency_s=r.p95_latency_s,
        p99_latency_s=r.p99_latency_s,
        error_rate=r.error_rate,
        peak_rss_mb=r.peak_rss_mb,
        peak_gpu_mem_mb=r.peak_gpu_mem_mb,
        status=r.status,
        reason=r.reason,
        rank=ranked.rank if ranked else None,
        verdict=ranked.verdict if ranked else None,
        goodput_ci_low=lo,
        goodput_ci_high=hi,
        repeats=len(r.goodput_repeats) or 1,
        capacity_rps=r.capacity_rps,
    )
    return row
