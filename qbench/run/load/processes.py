"""Several generator processes on this machine (`load.processes`): a part of the plan each, one shared
time.perf_counter() start, live stats streamed to the parent, records written by each child."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from qbench.run.load.executor import (
    Execution,
    Job,
    Part,
    PartResult,
    RecordSinks,
    combine,
    discover,
    in_loop,
    merge,
    row_order,
    run_part,
    split_plan,
    stop_signals,
    this_process,
)
from qbench.run.load.generator import LiveStats, StopHook
from qbench.run.records.schema import RequestRecord
from qbench.run.records.spill import discard_spills
from qbench.run.scenario.schedule import OpenPlan

START_MARGIN_S = 1.0  # between "all children ready" and the shared start


@dataclass
class _Shared:
    ready: Any  # mp.Queue of child indices
    stats: Any  # mp.Queue of (index, LiveStats)
    results: Any  # mp.Queue of PartResult
    start_at: Any  # mp.Value("d")
    go: Any  # mp.Event
    stop: Any  # mp.Event
    stop_kind: Any  # mp.Array("c") - "interrupted" / "deadline"


class ProcessExecutor:
    """`processes` processes of this machine, one part each."""

    def __init__(self, processes: int) -> None:
        self.processes = processes

    def execute(self, job: Job) -> Execution:
        in_loop(discover(job))
        discard_spills(job.run_dir)  # a reused folder's, of a run killed before the end
        ctx = mp.get_context("spawn")
        shared = _Shared(
            ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Value("d", 0.0), ctx.Event(), ctx.Event(),
            ctx.Array("c", 16),
        )
        parts = split_plan(job.scenario, job.plan, job.target, self.processes)
        children = [
            ctx.Process(target=_child, args=(part, str(job.run_dir), shared), daemon=True) for part in parts
        ]
        for child in children:
            child.start()
        restore = stop_signals(lambda *_: _stop(shared, "interrupted"))
        reasons: list[str] = []
        try:
            _start_together(shared, self.processes, children)
            results = _supervise(shared, children, job.on_tick, _remember(job.stop_when, reasons))
        finally:
            restore()
            for child in children:
                child.join(timeout=30)
                if child.is_alive():
                    child.kill()
        execution = merge(results, isinstance(job.plan, OpenPlan), "processes", [])
        execution.order = row_order(job.plan, self.processes, "processes")
        if reasons:
            execution.info.stop_reason = reasons[0]
        return execution


def _remember(hook: StopHook | None, reasons: list[str]) -> StopHook | None:
    if hook is None:
        return None

    def wrapped(stats: LiveStats) -> str | None:
        reason = hook(stats)
        if reason and not reasons:
            reasons.append(reason)
        return reason

    return wrapped


def _stop(shared: _Shared, kind: str) -> None:
    if not shared.stop.is_set():
        shared.stop_kind.value = kind.encode()
        shared.stop.set()


def _start_together(shared: _Shared, processes: int, children: list[Any]) -> None:
    ready = 0
    while ready < processes:
        try:
            shared.ready.get(timeout=1.0)
            ready += 1
        except queue.Empty:
            if any(not c.is_alive() for c in children):
                raise RuntimeError("a generator process died while starting (see its error above)") from None
    shared.start_at.value = time.perf_counter() + START_MARGIN_S
    shared.go.set()


def _supervise(
    shared: _Shared,
    children: list[Any],
    on_tick: Callable[[LiveStats], None],
    stop_when: StopHook | None,
) -> list[PartResult]:
    latest: dict[int, LiveStats] = {}
    results: list[PartResult] = []
    while len(results) < len(children):
        _drain_stats(shared, latest)
        if latest:
            total = combine(list(latest.values()))
            on_tick(total)
            reason = stop_when(total) if stop_when is not None else None
            if reason:
                _stop(shared, "deadline")
        try:
            results.append(shared.results.get(timeout=0.25))
            _drain_stats(shared, latest)
            if len(results) == len(children) and latest:
                on_tick(combine(list(latest.values())))  # the final view
        except queue.Empty:
            if all(not c.is_alive() for c in children) and shared.results.empty():
                raise RuntimeError("generator processes exited without their records") from None
    return results


def _drain_stats(shared: _Shared, latest: dict[int, LiveStats]) -> None:
    while True:
        try:
            index, stats = shared.stats.get_nowait()
        except queue.Empty:
            return
        latest[index] = stats


# ---------------------------------------------------------------- child process


def _child(part: Part, run_dir: str, shared: _Shared) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # the parent decides (Ctrl-C reaches the whole group)
        signal.signal(sig, signal.SIG_IGN)
    with RecordSinks(Path(run_dir), str(part.index)) as sink:
        result = asyncio.run(run_part(part, _ChildControl(part.index, shared, sink)))
    shared.results.put(result)


@dataclass
class _ChildControl:
    index: int
    shared: _Shared
    sink: RecordSinks
    where: str = field(default_factory=this_process)
    stop_when: StopHook | None = None
    signals: bool = False

    async def discovered(
        self, server: dict[str, Any], http: aiohttp.ClientSession, auth: dict[str, Any]
    ) -> None:
        self.shared.ready.put(self.index)

    async def start_at(self) -> float | None:
        await asyncio.get_running_loop().run_in_executor(None, self.shared.go.wait)
        return float(self.shared.start_at.value)

    def tick(self, stats: LiveStats) -> tuple[str, str] | None:
        self.shared.stats.put((self.index, stats))
        if not self.shared.stop.is_set():
            return None
        kind = self.shared.stop_kind.value.decode() or "interrupted"
        return kind, "stopped by the parent process" if kind == "deadline" else "signal"

    def records(self, batch: list[RequestRecord]) -> None:
        self.sink.write(batch)
