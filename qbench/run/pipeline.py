"""run_scenario: scenario -> discovery -> schedule -> load generator -> the run directory (run.json,
records.jsonl, records.parquet, summary.json). Layout and design: docs/design/records-and-results.md."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from qbench import __version__
from qbench.errors import ScenarioError
from qbench.run.console import LiveView
from qbench.run.control import read_status_async
from qbench.run.diagnose.app_errors import explain
from qbench.run.diagnose.limits import Finding, host_cpus, server_usage
from qbench.run.diagnose.per_endpoint import diagnose_run
from qbench.run.load.executor import Execution, ExecutionInfo, Executor, Job, LocalExecutor, in_loop
from qbench.run.load.generator import LiveStats
from qbench.run.load.mix import (
    endpoint_slos,
    journey_length,
    mix_starts,
    routing,
    user_starts,
    with_trace_mix,
)
from qbench.run.protocols.login import authenticator, run_secrets
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord, read_records, write_parquet
from qbench.run.records.spill import seal
from qbench.run.results.alongside import Alongside, alongside
from qbench.run.results.device import with_gpu_busy
from qbench.run.results.files import REPORTS, Writer, new_folder, remove_if_empty
from qbench.run.results.outcome import RunOutcome
from qbench.run.results.run_info import RunInfo
from qbench.run.results.server_phases import PhaseJoin, TraceCollector, TraceReport
from qbench.run.results.summary import GeneratorStats, Summary, summarize
from qbench.run.scenario.schedule import OpenPlan, Plan, UserPlan
from qbench.run.scenario.schedule import plan as make_plan
from qbench.run.scenario.schema import Scenario, load_scenario, with_overrides
from qbench.run.summary_file import SummaryFile

__all__ = ["RunResult", "load_scenario", "run_scenario"]


@dataclass
class RunResult:
    run_dir: Path
    summary: Summary
    run_info: RunInfo  # run.json, as written at the end
    diagnosis: list[Finding] = field(default_factory=list)  # where the limit was (diagnose/limits.py)
    outcome: RunOutcome = field(default_factory=RunOutcome)  # how it ended: stop, failed opening, SLO
    app_notes: list[str] = field(default_factory=list)  # the app raised, events still running (app_errors)
    alongside: list[Alongside] = field(default_factory=list)  # a mix entry's `start`: before/after it
    loaded: list[RequestRecord] | None = field(default=None, repr=False)  # `records`, once read

    @property
    def records(self) -> list[RequestRecord]:
        """Every record of the run (records.parquet's rows), read the first time asked (about 1 KB each)."""
        if self.loaded is None:
            self.loaded = read_records(self.run_dir / "records.parquet")
        return self.loaded

    def columns(self) -> Columns:
        """The run's records as columns (qbench.run.records.columns), from records.parquet."""
        return Columns.of(self.loaded) if self.loaded is not None else Columns.read(self.run_dir)


def _before_load(scenario: Scenario) -> Plan:
    """The schedule checked (check_schedule), and what the run will not see said on stderr first."""
    for warning in scenario.token_warnings():
        print(f"warning: {warning}", file=sys.stderr)
    return check_schedule(scenario)


def run_scenario(
    scenario: Scenario,
    *,
    target: str | None = None,
    out_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    live: bool = True,
    stop_when: Callable[[LiveStats], str | None] | None = None,
) -> RunResult:
    """Run one scenario against `target` (default: the scenario's) into `out_dir` (default: a new run folder
    under reports/). `overrides`: dotted keys; `stop_when`: asked about every 250 ms, a reason ends the run
    early. SLO violations do not raise: see `result.outcome`."""
    if overrides:
        scenario = with_overrides(scenario, overrides)
    scenario = with_trace_mix(scenario)  # a trace naming several endpoints runs as a mix of them
    url = target or scenario.target
    if not url:
        raise ScenarioError(
            f"scenario '{scenario.name}': key 'target': no target; set it or pass --target URL"
        )
    if not re.match(r"https?://[^/\s]+", url):
        raise ScenarioError(f"target {url!r}: expected an http(s) URL such as http://127.0.0.1:7860")
    plan = _before_load(scenario)
    writer = Writer(run_secrets(scenario, url))  # an unset ${ENV} reference fails here
    run_dir = out_dir or new_folder("run", scenario.name, REPORTS)
    fresh = not run_dir.exists() or not any(run_dir.iterdir())  # removed again if the run fails
    info = _run_info(scenario, url)
    credentials = authenticator(scenario, url).credentials
    traces = TraceCollector(url, headers=credentials.headers, cookies=credentials.cookies)
    with contextlib.ExitStack() as stack:
        view = LiveView(scenario, writer.mask(url), enabled=live)

        async def announce(server: dict[str, Any], http: aiohttp.ClientSession, auth: dict[str, Any]) -> None:
            """Login and discovery succeeded (they fail before any request): run.json, then the live view."""
            nonlocal info
            traces.point_at(server)
            server["status"] = await _status(scenario, url)
            info = replace(info, server=server, auth=auth)
            run_dir.mkdir(parents=True, exist_ok=True)  # only once the target has answered
            writer.json(run_dir / "run.json", info.to_dict())
            stack.enter_context(view)

        job = Job(scenario, plan, url, run_dir, announce, view.update, traces.watching(stop_when))
        try:
            execution = make_executor(scenario).execute(job)
        except BaseException as exc:
            if fresh:
                remove_if_empty(run_dir)  # the target never answered: nothing written
            writer.mask_error(exc)  # printed by the CLI: no user:pass@ or ?token= value
            raise
    status_end = in_loop(_status(scenario, url))  # CPU/GPU use over the run
    info = replace(with_execution(info, execution.info), server={**info.server, "status_end": status_end})
    records, report = _store(run_dir, execution, traces, writer)
    info = replace(info, server_traces=report)
    return _finish(scenario, run_dir, records, execution.stats, info, writer, report)


def _store(run_dir: Path, execution: Execution, traces: TraceCollector,
           writer: Writer) -> tuple[list[RequestRecord] | None, TraceReport]:
    """records.parquet, messages masked, server phases joined on (spills sealed, else records written)."""
    path = run_dir / "records.parquet"
    if execution.order is None:
        for record in execution.records:
            if record.error_message:
                record.error_message = writer.mask(record.error_message)
        report = traces.finish(execution.records)  # the server's phases onto the records
        write_parquet(execution.records, path)
        return execution.records, report
    seal(run_dir, execution.order, writer.mask)
    if not traces.enabled:
        return None, traces.finish([])
    join = PhaseJoin(path)
    report = traces.finish(join)
    if report.matched:
        join.write()
    return None, report


def with_execution(info: RunInfo, execution: ExecutionInfo) -> RunInfo:
    """run.json's info with the executors' report laid over it (their login counts replace the announced)."""
    return replace(
        info,
        stop_kind=execution.stop_kind,
        stop_reason=execution.stop_reason,
        failed_opening=execution.failed_opening,
        max_in_flight=execution.max_in_flight,
        payload=execution.payload,
        auth=execution.auth or info.auth,
        clock=execution.clock,
        lost_workers=execution.lost_workers or (),
    )


def make_executor(scenario: Scenario) -> Executor:
    """The executor the load section asks for (the registry: implementations imported lazily)."""
    load = scenario.load
    if load.executor == "ray":
        from qbench.run.load.ray_executor import RayExecutor

        return RayExecutor(load.ray_address, load.workers)
    if load.processes > 1:
        from qbench.run.load.processes import ProcessExecutor

        return ProcessExecutor(load.processes)
    return LocalExecutor()


def check_schedule(scenario: Scenario) -> Plan:
    """The run's plan, built once; fails before any request on a bad schedule."""
    try:
        plan = make_plan(scenario.load, seed=scenario.seed)
    except ValueError as exc:
        raise ScenarioError(f"scenario '{scenario.name}': key 'load': {exc}") from None
    routing(scenario, plan.request_ids() if isinstance(plan, OpenPlan) else None)  # trace lines' endpoints
    if isinstance(plan, UserPlan):  # a mix's entries with their own users start at their `start`
        plan = replace(plan, start_offsets=user_starts(scenario, plan.start_offsets))
    return plan


def _finish(
    scenario: Scenario,
    run_dir: Path,
    records: list[RequestRecord] | None,
    generator: GeneratorStats,
    info: RunInfo,
    writer: Writer,
    traces: TraceReport | None = None,
) -> RunResult:
    """Summary, final run.json and summary.json, from records.parquet (or `records`)."""
    cols = Columns.of(records) if records is not None else Columns.read(run_dir, keep=1)
    summary = summarize(cols, scenario.slo, generator=generator, endpoint_slos=endpoint_slos(scenario),
                        journey_length=journey_length(scenario), server_traces=traces)
    info = replace(info, generator=summary.generator, records=len(cols))  # its workers as objects too
    writer.json(run_dir / "run.json", info.to_dict())
    cpus = host_cpus(info.host, info.target)  # the server's, when it ran on this host
    server = info.server or None  # discovery's, with /status at the start and end
    findings = diagnose_run(cols, summary, server, cpus=cpus)
    summary.device = with_gpu_busy(summary.device, server_usage(server).gpu_busy)
    notes = explain(cols, scenario, server)  # the app raised, events still running
    starts = mix_starts(scenario)
    compared = alongside(cols, starts, scenario.load.duration) if starts else []
    SummaryFile(summary, findings, auth=info.auth or None, app_notes=notes, alongside=compared).write(
        run_dir, writer)  # auth: logins and re-logins (no secret)
    return RunResult(run_dir=run_dir, loaded=records, summary=summary, run_info=info, diagnosis=findings,
                     outcome=RunOutcome.of(info, summary), app_notes=notes, alongside=compared)


def _run_info(scenario: Scenario, target: str) -> RunInfo:
    """run.json's opening entries (qbench.run.results.run_info.RunInfo: the readers' type too)."""
    return RunInfo.start(
        scenario=scenario.model_dump(mode="json", by_alias=True),
        target=target,
        qbench_version=__version__,
        host={
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": _cpus(),
        },
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(),
    )


async def _status(scenario: Scenario, target: str) -> Any:
    """The target's /status JSON (the reference server has one), else None; read on the control plane."""
    credentials = authenticator(scenario, target).credentials
    return await read_status_async(target, headers=credentials.headers, cookies=credentials.cookies)


def _cpus() -> int | None:
    return os.cpu_count()


def parse_set_options(items: list[str]) -> dict[str, Any]:
    """`--set key=value` strings -> overrides; values are parsed as YAML (numbers, lists, null)."""
    import yaml

    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set '{item}': expected key=value, e.g. load.rate=12")
        try:
            overrides[key.strip()] = yaml.safe_load(value)
        except (yaml.YAMLError, ValueError, RecursionError) as exc:  # control characters, a bad date...
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ScenarioError(f"--set '{item}': the value is not valid YAML ({problem})") from None
    return overrides
