"""The run split over Ray actors, one per node by default (`load.executor: ray`, `qbench run --ray`): one
start instant through measured clock offsets, records polled as Arrow batches, a lost actor's requests
`generator_lost`. Ray is optional: `pip install -e '.[ray]'`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qbench.errors import ExecutorError
from qbench.run.load.clocksync import ClockOffset, measure
from qbench.run.load.executor import (
    Execution,
    Job,
    Part,
    PartInfo,
    PartResult,
    RecordSinks,
    combine,
    discover,
    in_loop,
    lost_records,
    merge,
    row_order,
    run_part,
    split_plan,
    stop_signals,
    wall_to_perf,
)
from qbench.run.load.generator import LiveStats, StopHook
from qbench.run.records.schema import RequestRecord, records_to_ipc
from qbench.run.records.spill import discard_spills
from qbench.run.results.summary import GeneratorStats, WorkerStats
from qbench.run.scenario.schedule import OpenPlan

INSTALL = "pip install -e '.[ray]'  (or: pip install 'ray[client]>=2.9')"
NAMESPACE = "qbench"
POLL_S = 0.25  # between polls of every actor
POLL_TIMEOUT_S = 10.0  # the last poll of a finished actor must answer within this long
UNRESPONSIVE_S = 60.0  # an actor whose polls go unanswered this long is killed and counted as lost
PLACE_TIMEOUT_S = 60.0  # the placement group must be placed within this long
READY_TIMEOUT_S = 300.0  # actors must have discovered the target within this long
START_MARGIN_S = 1.0  # between "every actor ready" and the shared start


def import_ray() -> Any:
    """The `ray` module, or an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"executor 'ray' (--ray) needs Ray, which is not installed: {INSTALL}") from None
    return ray


def actor_name(run_id: str, index: int) -> str:
    """The named actor of worker `index` of a run (namespace NAMESPACE): tests and operators find it."""
    return f"qbench-{run_id}-{index}"


class RayExecutor:
    """`workers` Ray actors (auto: one per alive node with a CPU) on the cluster at `address`."""

    def __init__(self, address: str | None, workers: int | str) -> None:
        self.address, self.workers = address, workers

    def execute(self, job: Job) -> Execution:
        ray = import_ray()
        label = in_loop(discover(job))  # the target first: a wrong URL fails before Ray starts
        started = connect(ray, self.address)
        try:
            n = worker_count(ray, self.workers)
            parts = split_plan(job.scenario, job.plan, job.target, n)
            return _Driver(ray, job, parts, label).run()
        finally:
            if started:
                ray.shutdown()


def connect(ray: Any, address: str | None) -> bool:
    """Join the cluster at `address` (None/"local": start a Ray instance on this machine); True when
    this call started the connection (and so should end it). An existing connection is reused."""
    if ray.is_initialized():
        return False
    where = "local" if address in (None, "local") else address
    if where == "local":  # Ray's default, nice 15, would let every other process delay the generators
        os.environ.setdefault("RAY_worker_niceness", "0")
    try:
        ray.init(
            address=where, namespace=NAMESPACE, include_dashboard=False,
            logging_level=logging.WARNING, log_to_driver=True,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ExecutorError(f"Ray cluster at {where!r}: could not connect ({exc})") from None
    return True


def worker_count(ray: Any, workers: int | str) -> int:
    """`auto`: one per alive node with at least one CPU; a number must fit the cluster's CPUs."""
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    cpus = int(sum(n["Resources"]["CPU"] for n in nodes))
    n = len(nodes) if workers == "auto" else int(workers)
    if n < 1 or n > cpus:
        raise ExecutorError(
            f"load.workers: {workers} needs {max(n, 1)} CPU(s) on the Ray cluster; it has {cpus} CPU(s) "
            f"on {len(nodes)} node(s)"
        )
    return n


# ---------------------------------------------------------------- the driver


@dataclass
class _Worker:
    part: Part
    actor: Any
    run_ref: Any = None
    where: str = "?"
    offset: ClockOffset | None = None
    count: int = 0  # records received (or made for what it lost)
    sent: int = 0  # of those, the ones sent
    ids: list[Any] = field(default_factory=list)  # numpy arrays of the request ids received
    live: LiveStats | None = None
    result: PartResult | None = None
    poll_ref: Any = None  # the poll in flight
    last_seen: float = 0.0  # time.monotonic() of its last answer


class _Driver:
    def __init__(self, ray: Any, job: Job, parts: list[Part], label: Callable[[int], str]) -> None:
        self.ray, self.job, self.parts, self.label = ray, job, parts, label
        self.stop: tuple[str, str] | None = None
        self.stop_sent = False
        self.force = False  # a second signal: kill the actors (their unreported requests: generator_lost)
        self.reasons: list[str] = []
        self.start_wall = 0.0

    def run(self) -> Execution:
        from ray.util.placement_group import placement_group, remove_placement_group

        pg = placement_group([{"CPU": 1}] * len(self.parts), strategy="SPREAD")
        restore = stop_signals(self._on_signal)
        workers: list[_Worker] = []
        try:
            self._placed(pg)
            workers = self._spawn(pg)
            self._start(workers)
            discard_spills(self.job.run_dir)  # a reused folder's, of a run killed before the end
            with RecordSinks(self.job.run_dir) as sink:
                self._supervise(workers, sink)
            drift = self._offsets([w for w in workers if w.result is not None and not w.result.worker.lost])
        finally:
            restore()
            for w in workers:
                self.ray.kill(w.actor, no_restart=True)
            remove_placement_group(pg)
        return self._execution(workers, drift)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.stop is not None and self.stop[0] == "interrupted":
            self.force = True
        self.stop = self.stop or ("interrupted", f"signal {signal.Signals(signum).name}")

    def _placed(self, pg: Any) -> None:
        try:
            self.ray.get(pg.ready(), timeout=PLACE_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            raise ExecutorError(
                f"Ray could not place {len(self.parts)} generator actor(s) of 1 CPU each within "
                f"{PLACE_TIMEOUT_S:g} s (see `ray status`); lower load.workers"
            ) from None

    def _spawn(self, pg: Any) -> list[_Worker]:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        actor_class = self.ray.remote(GeneratorWorker)
        workers = []
        for part in self.parts:
            strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=part.index)
            actor = actor_class.options(
                num_cpus=1, max_restarts=0, name=actor_name(self.job.run_dir.name, part.index),
                namespace=NAMESPACE, scheduling_strategy=strategy, max_concurrency=GeneratorWorker.THREADS,
            ).remote(os.environ.get("QBENCH_LOOP", "asyncio"))
            workers.append(_Worker(part, actor, actor.run.remote(part)))
        return workers

    def _start(self, workers: list[_Worker]) -> None:
        """Wait until every actor is ready, measure the clocks, agree on one start instant."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = list(workers)
        while waiting:
            done, _ = self.ray.wait([w.run_ref for w in waiting], num_returns=1, timeout=0)
            for w in waiting:
                if w.run_ref in done:  # a run that ends before the start failed
                    self._raise_start_failure(w)
            try:
                ready = self.ray.get([w.actor.ready.remote() for w in waiting])
            except self.ray.exceptions.RayError as exc:
                raise ExecutorError(f"a generator actor died before the start: {_cause(exc)}") from None
            waiting = [w for w, r in zip(waiting, ready, strict=True) if not r]
            if time.monotonic() > deadline:
                raise ExecutorError(f"{len(waiting)} generator actor(s) not ready in {READY_TIMEOUT_S:g} s")
            if waiting:
                time.sleep(0.1)
        for w in workers:
            w.where = self.ray.get(w.actor.describe.remote())
        self._offsets(workers)
        margin = START_MARGIN_S + max(w.offset.rtt_s for w in workers if w.offset is not None)
        self.start_wall = time.time() + margin
        self.ray.get([w.actor.go.remote(self.start_wall, _offset(w)) for w in workers])

    def _raise_start_failure(self, w: _Worker) -> None:
        try:
            self.ray.get(w.run_ref)
        except self.ray.exceptions.RayError as exc:
            why = _cause(exc)
            raise ExecutorError(f"generator actor {w.part.index} stopped before the start: {why}") from None
        raise ExecutorError(f"generator actor {w.part.index} ended before the start")

    def _now(self, actor: Any) -> float:
        return float(self.ray.get(actor.now.remote()))

    def _offsets(self, workers: list[_Worker]) -> dict[int, ClockOffset]:
        """Each worker's clock offset (kept on the worker the first time; returned every time)."""
        found = {}
        for w in workers:
            try:
                found[w.part.index] = measure(functools.partial(self._now, w.actor))
            except self.ray.exceptions.RayError:
                continue
            if w.offset is None:
                w.offset = found[w.part.index]
        return found

    # ------------------------------------------------------------ while running

    def _supervise(self, workers: list[_Worker], sink: RecordSinks) -> None:
        running = list(workers)
        for w in running:
            w.last_seen = time.monotonic()
        while running:
            if self.stop is not None and not self.stop_sent:
                self.stop_sent = True
                for w in running:
                    w.actor.stop.remote(*self.stop)
            if self.force:  # a second Ctrl-C: do not wait for the actors any longer
                for w in running:
                    self.ray.kill(w.actor, no_restart=True)
            self._poll(running, sink)
            self._collect(running, sink)
            running = [w for w in running if w.result is None]
            self._tick(workers)
            if running:
                time.sleep(POLL_S)

    def _poll(self, running: list[_Worker], sink: RecordSinks) -> None:
        """One poll in flight per actor at a time: each answer carries records no other answer has."""
        for w in running:
            if w.poll_ref is None:
                w.poll_ref = w.actor.poll.remote()
        refs = [w.poll_ref for w in running]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
        for w in running:
            if w.poll_ref in ready:
                self._answer(w, sink)
            elif time.monotonic() - w.last_seen > UNRESPONSIVE_S:
                self.ray.kill(w.actor, no_restart=True)
                self._lose(w, sink, f"no answer for {UNRESPONSIVE_S:g} s (killed)")

    def _answer(self, w: _Worker, sink: RecordSinks, timeout: float | None = None) -> None:
        ref, w.poll_ref = w.poll_ref, None
        try:
            live, batch = self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.RayError as exc:
            self._lose(w, sink, _cause(exc))
            return
        w.last_seen = time.monotonic()
        w.live = live or w.live
        self._receive(w, batch, sink)

    def _collect(self, running: list[_Worker], sink: RecordSinks) -> None:
        pending = [w for w in running if w.result is None]
        if not pending:
            return
        done, _ = self.ray.wait([w.run_ref for w in pending], num_returns=len(pending), timeout=0)
        for w in pending:
            if w.run_ref not in done:
                continue
            if w.poll_ref is not None:  # its answer may hold records taken before the run's end
                self._answer(w, sink, timeout=POLL_TIMEOUT_S)
                if w.result is not None:
                    continue
            try:
                result, batch = self.ray.get(w.run_ref)
            except self.ray.exceptions.RayError as exc:
                self._lose(w, sink, _cause(exc))
                continue
            self._receive(w, batch, sink)
            w.result = result

    def _receive(self, w: _Worker, batch: bytes | None, sink: RecordSinks) -> None:
        """A worker's Arrow batch onto records.jsonl and the spill as it is; counted, never kept."""
        if not batch:
            return
        import pyarrow as pa

        table = pa.ipc.open_stream(pa.py_buffer(batch)).read_all()
        sink.write_table(table)
        w.count += table.num_rows
        w.sent += table.num_rows - table.column("sent_at_s").null_count
        w.ids.append(table.column("request_id").to_numpy())

    def _lose(self, w: _Worker, sink: RecordSinks, reason: str) -> None:
        """The actor is gone: what it never reported becomes `generator_lost` records."""
        why = f"actor {w.part.index} on {w.where}: {reason}"
        at_s = time.time() - self.start_wall
        received = set(np.concatenate(w.ids).tolist()) if w.ids else set()
        lost = lost_records(w.part, received, self.label, at_s, why, user_records=w.count)
        sink.write(lost)
        w.count += len(lost)
        live = w.live or LiveStats()
        live.completed += len(lost)
        live.errors_by_kind["generator_lost"] = live.errors_by_kind.get("generator_lost", 0) + len(lost)
        live.in_flight, live.lost_workers = 0, 1
        w.live = live
        worker = WorkerStats(index=w.part.index, where=w.where, requests=w.count, sent=w.sent, lost=why)
        w.result = PartResult(w.part.index, [], GeneratorStats(), PartInfo(), worker)

    def _tick(self, workers: list[_Worker]) -> None:
        live = [w.live for w in workers if w.live is not None]
        if not live:
            return
        total = combine(live)
        self.job.on_tick(total)
        hook: StopHook | None = self.job.stop_when
        reason = hook(total) if hook is not None and self.stop is None else None
        if reason:
            self.reasons.append(reason)
            self.stop = ("deadline", reason)

    # ------------------------------------------------------------ the end

    def _execution(self, workers: list[_Worker], after: dict[int, ClockOffset]) -> Execution:
        results = [w.result for w in workers if w.result is not None]
        execution = merge(results, isinstance(self.job.plan, OpenPlan), "ray", [])
        execution.order = row_order(self.job.plan, len(self.parts), "ray")
        nodes = [
            _clock_entry(w, stats, after.get(w.part.index))
            for w, stats in zip(workers, execution.stats.workers, strict=True)
        ]
        uncertainties = [s.clock_uncertainty_s for s in execution.stats.workers if s.clock_uncertainty_s]
        execution.stats.clock_uncertainty_s = max(uncertainties) if uncertainties else None
        info = execution.info
        info.clock = {
            "driver": socket.gethostname(), "start_wall_s": self.start_wall, "nodes": nodes,
            "method": "NTP-style: min-RTT of several round trips; offset = node clock - driver clock",
        }
        info.lost_workers = tuple(s.lost for s in execution.stats.workers if s.lost)
        if self.reasons:
            info.stop_reason = self.reasons[0]
        if self.stop is not None and self.stop[0] == "interrupted":
            info.stop_kind = "interrupted"
        return execution


def _clock_entry(w: _Worker, stats: WorkerStats, later: ClockOffset | None) -> dict[str, Any]:
    """One node's clock in run.json: its offset before the run and, alive at the end, the drift since."""
    offset = w.offset
    stats.where = w.where
    if offset is None:
        return {"index": w.part.index, "where": w.where, "offset_s": None, "uncertainty_s": None}
    stats.clock_offset_s, stats.clock_uncertainty_s = offset.offset_s, offset.uncertainty_s
    return {
        "index": w.part.index, "where": w.where, "offset_s": offset.offset_s,
        "uncertainty_s": offset.uncertainty_s, "rtt_s": offset.rtt_s, "rounds": offset.rounds,
        "drift_s": later.offset_s - offset.offset_s if later else None,
        "drift_uncertainty_s": later.uncertainty_s + offset.uncertainty_s if later else None,
    }


def _offset(w: _Worker) -> float:
    return w.offset.offset_s if w.offset is not None else 0.0


def _cause(exc: BaseException) -> str:
    """A Ray error in one line: the actor's own exception when it raised one (RayTaskError.cause)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------- the actor


class GeneratorWorker:
    """One part in a threaded Ray actor: `run` drives it in its own event loop; other calls answer beside."""

    THREADS = 4  # run, and a poll or control call beside it

    def __init__(self, loop: str = "asyncio") -> None:
        self._loop = loop
        self._control = _Control()
        self.where = self._control.where = _node()
        records_to_ipc([RequestRecord(0, 0, "", "", False, 0.0)])  # warm: pyarrow's first batch took 0.5 s

    def run(self, part: Part) -> tuple[PartResult, bytes | None]:
        result = in_loop(run_part(part, self._control), self._loop)
        result.records = []  # they went (or go now) to the driver in batches
        return result, self._control.take()

    def ready(self) -> bool:
        """Whether the part discovered the target and prepared its payloads (it waits for `go` then)."""
        return self._control.go is not None

    def now(self) -> float:
        return time.time()

    def go(self, start_wall_driver: float, offset_s: float) -> None:
        """Start at the driver's `start_wall_driver`, which is `+ offset_s` on this node's clock."""
        assert self._control.go is not None
        self._control.go.set(wall_to_perf(start_wall_driver + offset_s))

    def stop(self, kind: str, reason: str) -> None:
        self._control.stop = (kind, reason)

    def poll(self) -> tuple[LiveStats | None, bytes | None]:
        return self._control.live, self._control.take()

    def describe(self) -> str:
        return self.where


class _Start:
    """The start instant, handed from a Ray thread (`set`) to the part's event loop (`wait`)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        self.start_perf: float | None = None

    def set(self, start_perf: float) -> None:
        self.start_perf = start_perf
        self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self) -> float | None:
        await self.event.wait()
        return self.start_perf


class _Control:
    """The part's `PartControl` in the actor: finished records wait in `pending` until the driver polls."""

    stop_when: StopHook | None = None
    signals = False

    def __init__(self) -> None:
        self.where = ""
        self.pending: list[RequestRecord] = []
        self.lock = threading.Lock()  # records() on the loop's thread, take() on a Ray thread
        self.live: LiveStats | None = None
        self.go: _Start | None = None
        self.stop: tuple[str, str] | None = None

    def take(self) -> bytes | None:
        with self.lock:
            batch, self.pending = self.pending, []
        return records_to_ipc(batch) if batch else None

    async def discovered(self, server: dict[str, Any], http: Any, auth: dict[str, Any]) -> None:
        self.go = _Start()

    async def start_at(self) -> float | None:
        assert self.go is not None
        return await self.go.wait()

    def tick(self, stats: LiveStats) -> tuple[str, str] | None:
        self.live = dataclasses.replace(stats, errors_by_kind=dict(stats.errors_by_kind))
        return self.stop

    def records(self, batch: list[RequestRecord]) -> None:
        with self.lock:
            self.pending.extend(batch)


def _node() -> str:
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()[:8]
        nice = os.nice(0)
        niced = f", nice {nice}" if nice else ""  # Ray's default for workers is 15 (see docs/ray.md)
        return f"node {node} ({ray.util.get_node_ip_address()}, pid {os.getpid()}{niced})"
    except Exception:  # outside Ray (unit tests)
        return f"{socket.gethostname()} pid {os.getpid()}"
