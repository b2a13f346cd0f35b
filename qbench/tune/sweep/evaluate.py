"""Each point of a sweep measured on its server (`PointServers`, by mode): its repeats, knob check,
resources and point.json (`evaluate_point`); a failed point is recorded, never ends the sweep."""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qbench.errors import QbenchError, ScenarioError
from qbench.run import Summary, SummaryFile, read_gradio_mode, read_gradio_version, read_records, read_status
from qbench.tune.knobs.frameworks import FRAMEWORK_ONLY, check_framework_knobs
from qbench.tune.knobs.grid import LAUNCH_ONLY_KNOBS, Point, split_knob
from qbench.tune.knobs.reference import admin_body, apply_server_knobs, effective_knobs
from qbench.tune.knobs.versions import KnobVersionError, check_knobs, gradio_major
from qbench.tune.points.bentoml_check import check_bentoml
from qbench.tune.points.knobcheck import (
    AppKnobError,
    KnobCheck,
    check_batching,
    check_events,
    check_point,
    expected_settings,
)
from qbench.tune.points.litserve_check import check_litserve
from qbench.tune.points.measure import RunawayDetector, point_result
from qbench.tune.points.rayserve_check import check_rayserve
from qbench.tune.points.torchserve_check import check_torchserve
from qbench.tune.servers.app_process import launch_command
from qbench.tune.servers.apphook import HookRecord, read_hook_record
from qbench.tune.servers.resources import ResourceSampler, status_memory
from qbench.tune.servers.server_process import ServerHandle, reconfigure, reference_server_process
from qbench.tune.sweep.config import SweepConfig, masked_settings, swept_server_knobs
from qbench.tune.sweep.confirm import carry_capacity
from qbench.tune.sweep.point_capacity import point_capacity
from qbench.tune.sweep.point_runs import run_point
from qbench.tune.values.ceiling import Capacity
from qbench.tune.values.point_file import NAME as POINT_FILE
from qbench.tune.values.point_file import PointFile
from qbench.tune.values.result import KnobVerdict, PointResult


@dataclass
class PointServers:
    """Gives each point a ready server (and keeps the one live server of `live` mode)."""

    config: SweepConfig
    live: ServerHandle | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    # the servers' Gradio release (for the advice): the config's (reference server), else read from the
    # first point's /config or the startup hook's record (launch and target modes); None until known
    gradio_major: int | None = None
    app_mode: str | None = None  # the app's /config `mode` (launch and target modes): "server", "blocks"
    framework: str | None = None  # a launched app's framework other than Gradio ("litserve"), once known

    def __post_init__(self) -> None:
        self.gradio_major = self.config.gradio_major
        self.framework = self.config.framework

    def settings_for(self, point: Point) -> dict[str, Any]:
        assert self.config.base_settings is not None
        return apply_server_knobs(self.config.base_settings, point.server_knobs(), self.config.api_name)

    @contextlib.contextmanager
    def for_point(self, point: Point, work_dir: Path) -> Iterator[ServerHandle]:
        mode = self.config.mode
        timeout = self.config.options.ready_timeout_s
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
            assert self.config.options.target is not None
            yield ServerHandle(self.config.options.target.rstrip("/"), None)

    def check_release(self, handle: ServerHandle) -> None:
        """First point (launch, target): the app's Gradio release; KnobVersionError if it lacks a knob."""
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
        """The hook's record of the point's launch (None: no hook); BatchKnobError: nothing to batch."""
        if not (self.config.mode == "launch" and self.config.hook):
            return None
        record = read_hook_record(work_dir)
        if record is not None and record.launched and record.framework != "gradio":
            if self.framework is None:  # --launch: known now; a knob it lacks ends the sweep before load
                check_framework_knobs(swept_server_knobs(self.config.grid), record.framework,
                                      f"the app ({self.config.launch})")
            self.framework = record.framework
            return record
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


def point_resources(handle: ServerHandle, sampler: ResourceSampler | None) -> dict[str, float | None]:
    """Peak RSS (psutil samples, `/status` as a fallback) and peak CUDA memory (`/status`), in MB."""
    status = read_status(handle.base_url) if handle.process is not None else None
    rss, gpu = status_memory(status or {})
    sampled = sampler.peak_rss_mb if sampler and sampler.peak_rss_mb > 0 else None
    return {"peak_rss_mb": sampled if sampled is not None else rss, "peak_gpu_mem_mb": gpu}


def run_repeats(config: SweepConfig, point: Point, url: str, summaries: list[Summary],
             repeats: list[dict[str, Any]]) -> str:
    """Run the point's repeats, appending each summary and point.json entry; '' or why one stopped."""
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


def evaluate_point(config: SweepConfig, servers: PointServers, point: Point) -> PointResult:
    """Start (or move) the server, run every repeat, read resources; raises only for a bad grid."""
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
                stopped = run_repeats(config, point, handle.base_url, summaries, repeats)
                if stopped:
                    status, reason = "stopped", stopped
                if hook is not None:  # what launch() started after the port answered (SSR's Node proxy)
                    hook = read_hook_record(point_dir) or hook
                check = check_point_knobs(config, servers, point, point_dir, hook)
                if check is not None and check.verdict == "not_applied":
                    status, reason = "knobs_not_applied", check.summary
                elif config.constraints.objective == "capacity":
                    capacity = point_capacity(config, handle.base_url, point, point_dir / "capacity")
            resources = point_resources(handle, sampler)
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
    """ScenarioError for a launch-only knob (num_workers, ssr_mode, a framework's own) outside launch mode."""
    if config.mode == "launch":
        return
    names = [k for k in [*config.grid.axes, *config.grid.links] if split_knob(k)[0] in LAUNCH_ONLY_KNOBS]
    if names:
        raise ScenarioError(
            f"knob {names[0]!r}: a launch() setting of a Gradio app that qbench launches (--app app.py or "
            f"--launch CMD); this sweep's server is {config.mode!r}"
            + (" (the reference server's HTTP front ends: --set launch.front_ends=N)"
               if names[0].startswith("num_workers") else ""))
    framework = [k for k in [*config.grid.axes, *config.grid.links] if split_knob(k)[0] in FRAMEWORK_ONLY]
    if framework:
        raise ScenarioError(
            f"knob {framework[0]!r}: a {FRAMEWORK_ONLY[split_knob(framework[0])[0]]} app's setting, which "
            f"qbench sets only in an app it launches (--app app.py or --launch CMD); this sweep's server is "
            f"{config.mode!r}")


def check_point_knobs(
    config: SweepConfig, servers: PointServers, point: Point, point_dir: Path, hook: HookRecord | None
) -> KnobCheck | None:
    """Whether the point's knobs took effect (qbench.tune.points.knobcheck); None: nothing to check."""
    knobs = point.server_knobs() or (expected_settings(config.scenario) if config.mode == "target" else {})
    if servers.framework == "litserve" and config.mode == "launch":
        return check_litserve(knobs, hook)
    if servers.framework == "bentoml" and config.mode == "launch":
        return check_bentoml(knobs, hook)
    if servers.framework == "rayserve" and config.mode == "launch":
        return check_rayserve(knobs, hook)
    if servers.framework == "torchserve" and config.mode == "launch":
        return check_torchserve(knobs, hook)
    if config.scenario.protocol != "gradio" or not knobs and config.mode != "launch":
        return None
    try:
        records = read_records(point_dir)
    except (OSError, ValueError):
        records = []
    return check_point(knobs, records, hook=hook, launched_by_hook=config.hook,
                       effective=servers.effective(point), lag_s=loop_lag(point_dir))


def loop_lag(run_dir: Path) -> float:
    """The load generator's p99 event-loop lag in that run (0 when its summary does not say)."""
    stored = SummaryFile.read(run_dir)
    return 0.0 if stored is None else stored.summary.generator.p99_loop_lag_s or 0.0
