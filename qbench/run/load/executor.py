"""Who runs the load generator, and where: one interface (split the plan, run a part, merge the parts, sink
the records, account for a lost worker) shared by LocalExecutor (here), ProcessExecutor and RayExecutor."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import numpy as np

from qbench.run.load.generator import LiveStats, LoadGenerator, StopHook
from qbench.run.load.mix import make_routes, routing
from qbench.run.protocols.base import Clock, make_http_session
from qbench.run.protocols.login import authenticator, session_slots
from qbench.run.records.schema import FIELD_NAMES, JsonlWriter, RequestRecord, read_jsonl
from qbench.run.records.spill import RecordSpill, RowOrder, discard_spills
from qbench.run.results.summary import GeneratorStats, WorkerStats
from qbench.run.scenario.schedule import OpenPlan, Plan, UserPlan
from qbench.run.scenario.schema import Scenario, with_overrides
from qbench.run.scenario.trace import recorded_inputs

T = TypeVar("T")
Announce = Callable[[dict[str, Any], aiohttp.ClientSession, dict[str, Any]], Awaitable[None]]


@dataclass
class Job:
    """One run for an executor: what to run, where records and live stats go."""

    scenario: Scenario
    plan: Plan  # the whole run's plan, built once by the runner
    target: str
    run_dir: Path  # records.jsonl and the Parquet spills are appended here while the run goes
    announce: Announce  # the target's discovery and login info (once, before any request) -> run.json
    on_tick: Callable[[LiveStats], None]  # the live view (~4 Hz), every worker combined
    stop_when: StopHook | None = None  # asked on every tick; a reason ends the run as "deadline"


@dataclass
class PartInfo:
    """One part's report: how its load generator stopped, its payloads, its logins."""

    stop_kind: str | None = None  # "interrupted" or "deadline"; None: ran to its end (results/outcome.py)
    stop_reason: str | None = None
    max_in_flight: int = 0  # merged: the sum over the parts
    failed_opening: str | None = None  # the opening all failed one way (qbench.run.results.failfast)
    payload: dict[str, Any] | None = None  # payload counts (Routes.payload_stats); merged: a lone part's
    auth: dict[str, Any] | None = None  # login, accounts, logins, relogins (no secret; login.py)


@dataclass
class ExecutionInfo(PartInfo):
    """The executors' report for run.json's RunInfo: parts' reports merged, Ray's clocks and lost workers."""

    clock: dict[str, Any] | None = None  # Ray: the driver's and each node's clock (ray_executor.py)
    lost_workers: tuple[str, ...] | None = None  # Ray: why each lost worker was lost (None: not Ray)


@dataclass
class Execution:
    """What an executor hands back: generator health, run info, and the records: spilled in the run folder, to
    be sealed in `order` (qbench.run.records.spill.seal), or (`order` None) in `records`, in run order."""

    records: list[RequestRecord]
    stats: GeneratorStats
    info: ExecutionInfo = field(default_factory=ExecutionInfo)
    order: RowOrder | None = None


class Executor(Protocol):
    def execute(self, job: Job) -> Execution: ...


@dataclass
class Part:
    index: int
    parts: int
    scenario: Scenario  # with the worker's share of a session pool
    plan: Plan
    target: str


@dataclass
class PartResult:
    index: int
    records: list[RequestRecord]  # empty: they went to `PartControl.records` as they finished
    stats: GeneratorStats
    info: PartInfo
    worker: WorkerStats


class PartControl(Protocol):
    """How one part talks to its executor (in-process calls, a multiprocessing queue, a Ray actor)."""

    @property
    def where(self) -> str: ...  # where the worker runs (host, process, Ray node)

    @property
    def stop_when(self) -> StopHook | None: ...  # the local executor's hook (others stop through `tick`)

    @property
    def signals(self) -> bool: ...  # SIGINT/SIGTERM handlers on the loop (the in-process executor only)

    async def discovered(
        self, server: dict[str, Any], http: aiohttp.ClientSession, auth: dict[str, Any]
    ) -> None: ...

    async def start_at(self) -> float | None: ...  # time.perf_counter() instant; None: now

    def tick(self, stats: LiveStats) -> tuple[str, str] | None: ...  # a stop (kind, reason) to obey

    def records(self, batch: list[RequestRecord]) -> None: ...


# ---------------------------------------------------------------- splitting


def part_scenario(scenario: Scenario, parts: int) -> Scenario:
    """The per-worker scenario: a session pool is shared out between workers."""
    sessions = scenario.load.sessions
    if parts > 1 and isinstance(sessions, int):
        return with_overrides(scenario, {"load.sessions": max(1, sessions // parts)})
    return scenario


def split_plan(scenario: Scenario, plan: Plan, target: str, parts: int) -> list[Part]:
    """The run as `parts` parts (one part: the plan itself, unchanged)."""
    if parts == 1:
        return [Part(0, 1, scenario, plan, target)]
    share = part_scenario(scenario, parts)
    return [Part(k, parts, share, plan.part(k, parts), target) for k in range(parts)]


# ---------------------------------------------------------------- one part


async def run_part(part: Part, control: PartControl, *, worker: bool = True) -> PartResult:
    """Run one part with the ordinary LoadGenerator; `worker`: one worker of several (send lags kept)."""
    scenario = part.scenario
    clock = Clock()
    ids = part.plan.request_ids() if isinstance(part.plan, OpenPlan) else None
    plan_routing = routing(scenario, ids, part.plan.offsets if isinstance(part.plan, OpenPlan) else None)
    async with (
        authenticator(scenario, part.target) as auth,
        make_http_session(scenario.load, auth.middlewares, cookies=scenario.journey is None) as http,
    ):
        auth.spread(part.index, part.parts)  # login.users: other accounts than the other workers'
        await auth.start(part.plan.users if isinstance(part.plan, UserPlan) else session_slots(scenario.load))
        routes = make_routes(scenario, plan_routing, part.target, http, clock, recorded_inputs(scenario.load))
        await control.discovered(await routes.discover(), http, auth.info())

        def tick(stats: LiveStats) -> None:
            stop = control.tick(stats)
            if stop is not None:
                gen.request_stop(*stop)

        gen = LoadGenerator(
            scenario.load, part.plan, routes, clock,
            on_tick=tick, stop_when=control.stop_when, on_records=control.records, mask=auth.mask,
            keep_send_lags=worker,
        )
        start_at = await control.start_at()
        with _signals(gen, control.signals):
            await gen.run(start_at=start_at)
        await routes.close()
    stats = gen.generator_stats()
    info = PartInfo(stop_kind=gen.stop_kind, stop_reason=gen.stop_reason, max_in_flight=gen.max_in_flight,
                    failed_opening=gen.guard.verdict, payload=routes.payload_stats(),
                    auth=auth.info())  # re-logins counted
    health = worker_stats(part.index, control.where, gen.stats.completed, gen.send_lags or (), stats)
    return PartResult(part.index, [], stats, info, health)


def worker_stats(index: int, where: str, requests: int, send_lags: Sequence[float],
                 stats: GeneratorStats) -> WorkerStats:
    """One worker's health (CPU, loop lag, send lag) over its `requests` recorded and `send_lags` sent."""
    lags = np.asarray(send_lags, dtype=np.float64)
    return WorkerStats(
        index=index,
        where=where,
        requests=requests,
        sent=int(lags.size),
        cpu_s=stats.cpu_s,
        cpu_percent=stats.cpu_percent,
        max_loop_lag_s=stats.max_loop_lag_s,
        p99_send_lag_s=float(np.percentile(lags, 99)) if lags.size else None,
        max_send_lag_s=float(lags.max()) if lags.size else None,
    )


def stop_signals(handler: Callable[[int, Any], None]) -> Callable[[], None]:
    """SIGINT/SIGTERM -> `handler` in a blocking driver; returns the undo (nothing off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def this_process() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


class _signals:
    """SIGINT/SIGTERM during the run -> stop as "interrupted" (records are still all written)."""

    def __init__(self, gen: LoadGenerator, enabled: bool) -> None:
        self.gen, self.enabled = gen, enabled
        self.installed: list[signal.Signals] = []

    def __enter__(self) -> None:
        if not self.enabled:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.gen.request_stop, "interrupted", f"signal {sig.name}")
                self.installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (e.g. a sweep in a worker thread) or not supported

    def __exit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.installed:
            loop.remove_signal_handler(sig)


# ---------------------------------------------------------------- the in-process executor


class LocalExecutor:
    """The whole plan in this process's event loop (the loop the runner runs)."""

    def execute(self, job: Job) -> Execution:
        return in_loop(self._execute(job))

    async def _execute(self, job: Job) -> Execution:
        (part,) = split_plan(job.scenario, job.plan, job.target, 1)
        with RecordSinks(job.run_dir, opened=False) as sink:
            result = await run_part(part, _LocalControl(job, sink), worker=False)
        execution = merge([result], isinstance(job.plan, OpenPlan), "local", [])
        execution.order = row_order(job.plan, 1, "local")  # as the plan ran: they arrived as they finished
        return execution


@dataclass
class _LocalControl:
    job: Job
    sink: RecordSinks
    where: str = field(default_factory=this_process)
    signals: bool = True

    @property
    def stop_when(self) -> StopHook | None:
        return self.job.stop_when

    async def discovered(
        self, server: dict[str, Any], http: aiohttp.ClientSession, auth: dict[str, Any]
    ) -> None:
        await self.job.announce(server, http, auth)
        self.sink.open()  # run.json exists: the target answered, the run directory may be made

    async def start_at(self) -> float | None:
        return None

    def tick(self, stats: LiveStats) -> tuple[str, str] | None:
        self.job.on_tick(stats)
        return None

    def records(self, batch: list[RequestRecord]) -> None:
        self.sink.write(batch)


class RecordSinks:
    """Where one writer's finished records go: records.jsonl (flushed at once) and the run folder's Parquet
    spill `name`. `opened` False: opened by `open` once discovery succeeded (an old spill removed then)."""

    def __init__(self, run_dir: Path, name: str = "0", *, opened: bool = True) -> None:
        self.jsonl = JsonlWriter(run_dir / "records.jsonl")
        self.spill = RecordSpill(run_dir, name)
        self.opened = False
        if opened:
            self.jsonl.__enter__()
            self.opened = True

    def __enter__(self) -> RecordSinks:
        return self

    def open(self) -> None:
        discard_spills(self.jsonl.path.parent)
        self.jsonl.__enter__()
        self.opened = True

    def write(self, batch: Sequence[RequestRecord]) -> None:
        self.spill.write_lines(self.jsonl.write(batch), len(batch))

    def write_table(self, table: Any) -> None:
        """An Arrow table of records (a Ray worker's batch), never made into records."""
        self.jsonl.write_rows(table.select(list(FIELD_NAMES)).to_pylist())
        self.spill.write_table(table)

    def __exit__(self, *exc: object) -> None:
        if self.opened:
            self.spill.close()
            self.jsonl.__exit__(*exc)


# ---------------------------------------------------------------- merging


def combine(parts: list[LiveStats]) -> LiveStats:
    """Sum of counters; latencies are the worst part's (an upper bound, for the live view only)."""
    errors: dict[str, int] = {}
    for p in parts:
        for kind, n in p.errors_by_kind.items():
            errors[kind] = errors.get(kind, 0) + n
    scheduled = [p.scheduled for p in parts]
    return LiveStats(
        elapsed_s=max(p.elapsed_s for p in parts),
        planned_s=max((p.planned_s for p in parts if p.planned_s is not None), default=None),
        scheduled=None if None in scheduled else sum(s or 0 for s in scheduled),
        sent=sum(p.sent for p in parts),
        completed=sum(p.completed for p in parts),
        ok=sum(p.ok for p in parts),
        in_flight=sum(p.in_flight for p in parts),
        errors_by_kind=errors,
        p50_latency_s=_max(p.p50_latency_s for p in parts),
        p95_latency_s=_max(p.p95_latency_s for p in parts),
        recent_p95_latency_s=_max(p.recent_p95_latency_s for p in parts),
        max_send_lag_s=max(p.max_send_lag_s for p in parts),
        workers=sum(p.workers for p in parts),
        lost_workers=sum(p.lost_workers for p in parts),
    )


def _max(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def jsonl_end(run_dir: Path) -> int:
    """records.jsonl's size before a run appends to it: where `read_back` starts."""
    path = run_dir / "records.jsonl"
    return path.stat().st_size if path.exists() else 0


def read_back(run_dir: Path, start: int) -> list[RequestRecord]:
    """The records a run appended to records.jsonl from byte `start` (in the order they finished)."""
    path = run_dir / "records.jsonl"
    return read_jsonl(path, start) if path.exists() else []


def row_order(plan: Plan, parts: int, executor: str) -> RowOrder:
    """The order of records.parquet's rows: the order `merge` gives a list of records."""
    if parts > 1:
        return RowOrder(renumber=not isinstance(plan, OpenPlan))
    if executor == "ray":
        return RowOrder(sort=False)
    return RowOrder(plan_ids=plan.ids if isinstance(plan, OpenPlan) else None)


def plan_order(plan: Plan) -> Callable[[RequestRecord], int]:
    """Sort key: a record's place in the plan (open loop), else its request id (closed loop)."""
    if isinstance(plan, OpenPlan) and plan.ids is not None:
        position = {int(i): k for k, i in enumerate(plan.ids.tolist())}
        return lambda r: position.get(r.request_id, r.request_id)
    return lambda r: r.request_id


def merge(results: list[PartResult], open_loop: bool, executor: str,
          records: list[RequestRecord] | None = None) -> Execution:
    """The parts as one run: records in request order, generator stats summed, the first stop reason.
    `records`: the run's records read back from records.jsonl (None: those the parts carry, Ray's)."""
    results = sorted(results, key=lambda r: r.index)
    if records is None:
        records = [r for res in results for r in res.records]
    if len(results) > 1:
        if open_loop:
            records.sort(key=lambda r: r.request_id)
        else:  # closed loop: request ids are per worker; renumber in send order
            records.sort(key=lambda r: (r.intended_at_s, r.user_id))
            for i, record in enumerate(records):
                record.request_id = i
    stats = [res.stats for res in results]
    merged = GeneratorStats(
        cpu_s=sum(s.cpu_s or 0.0 for s in stats),
        cpu_percent=sum(s.cpu_percent or 0.0 for s in stats),
        max_loop_lag_s=_max(s.max_loop_lag_s for s in stats),
        p99_loop_lag_s=_max(s.p99_loop_lag_s for s in stats),
        loop_wait_share=_max(s.loop_wait_share for s in stats),
        max_in_flight=sum(s.max_in_flight or 0 for s in stats),
        in_flight_cap=stats[0].in_flight_cap if stats else None,
        processes=len(results),
        executor=executor,
        workers=[res.worker for res in results] if len(results) > 1 or executor == "ray" else [],
    )
    return Execution(records, merged, merge_info([res.info for res in results]))


def merge_info(infos: Sequence[PartInfo]) -> ExecutionInfo:
    """The parts' reports as one: the first stop and failed opening, in-flight maxima and logins summed."""
    auths = [i.auth for i in infos if i.auth]
    auth = None
    if auths:  # each worker logs in on its own: logins and re-logins add up
        auth = {**auths[0], **{k: sum(a.get(k, 0) for a in auths) for k in ("logins", "relogins")}}
    return ExecutionInfo(
        stop_kind=_first(i.stop_kind for i in infos),
        stop_reason=_first(i.stop_reason for i in infos),
        max_in_flight=sum(i.max_in_flight for i in infos),
        failed_opening=_first(i.failed_opening for i in infos),
        payload=infos[0].payload if len(infos) == 1 else None,
        auth=auth,
    )


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v), None)


# ---------------------------------------------------------------- lost workers


def lost_records(
    part: Part, received: set[int], label: Callable[[int], str], at_s: float, reason: str,
    user_records: int = 0,
) -> list[RequestRecord]:
    """Records of error kind `generator_lost` for what a dead worker never reported: open loop, each request
    of its part without a record; closed loop, its remaining `requests` share, else one per user."""
    warmup = part.scenario.load.warmup
    plan = part.plan
    message = f"generator lost ({reason}); unknown whether the request was sent"
    if isinstance(plan, OpenPlan):
        pool = part.scenario.load.sessions if isinstance(part.scenario.load.sessions, int) else 0
        return [
            _lost(i, j % pool if pool else i, label(i), float(t) < warmup, float(t), message)
            for j, (i, t) in enumerate(zip(plan.request_ids(), plan.offsets.tolist(), strict=True))
            if i not in received
        ]
    assert isinstance(plan, UserPlan)
    missing = plan.users if plan.requests is None else max(plan.requests - user_records, 0)
    return [
        _lost(-1, plan.user_id(k % max(plan.users, 1)), label(-1), at_s < warmup, at_s, message)
        for k in range(missing)
    ]


def _lost(request_id: int, user: int, label: str, warmup: bool, at_s: float, message: str) -> RequestRecord:
    return RequestRecord(
        request_id=request_id, user_id=user, session_id="", endpoint=label, warmup=warmup,
        intended_at_s=at_s, error_kind="generator_lost", error_message=message,
    )


async def discover(job: Job) -> Callable[[int], str]:
    """The driver's own discovery (for executors whose workers run elsewhere): announces the target
    once, before any worker starts; returns request id -> the endpoint label its record carries."""
    async with (
        authenticator(job.scenario, job.target) as auth,
        make_http_session(job.scenario.load, auth.middlewares) as http,
    ):
        await auth.start(1)  # the workers log in for their own sessions
        open_plan = job.plan if isinstance(job.plan, OpenPlan) else None
        ids = open_plan.request_ids() if open_plan is not None else None
        plan_routing = routing(job.scenario, ids, open_plan.offsets if open_plan is not None else None)
        routes = make_routes(job.scenario, plan_routing, job.target, http, Clock(), None)
        await job.announce(await routes.discover(), http, auth.info())
        await routes.close()
        return plan_routing.label_for


def in_loop(coro: Coroutine[Any, Any, T], loop: str | None = None) -> T:
    """Run a coroutine in a fresh event loop (see `_loop_factory`)."""
    factory = _loop_factory(loop)
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    if factory is None:
        return asyncio.run(coro)
    fresh = factory()
    try:
        return fresh.run_until_complete(coro)
    finally:
        fresh.run_until_complete(fresh.shutdown_asyncgens())
        fresh.close()


def _loop_factory(loop: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """None (the default loop) unless `loop` or QBENCH_LOOP names uvloop (if installed); else that `loop`."""
    if (loop or os.environ.get("QBENCH_LOOP", "asyncio")) == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return None if loop is None else asyncio.SelectorEventLoop


def wall_to_perf(wall: float) -> float:
    """A time.time() instant of this machine as a time.perf_counter() instant."""
    return time.perf_counter() + (wall - time.time())
