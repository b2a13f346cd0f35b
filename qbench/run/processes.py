"""Several generator processes for one run (`load.processes` / `qbench run --processes N`).

When one core is not enough, the plan is split: open loop, every N-th request; closed loop, every N-th
user (and an even share of a `requests` budget). Each process runs the ordinary LoadGenerator on its
part with its own connections and (for a session pool) `sessions // N` sessions. All processes share
one clock: the parent picks a start time on time.perf_counter() (CLOCK_MONOTONIC, the same in every
process of the machine) once every child is ready, so intended times line up exactly.

Children stream their LiveStats to the parent (console, stop_when); a stop (stop_when, Ctrl-C,
SIGTERM to the parent) is passed down with an Event; every child returns all its records, which the
parent merges (closed-loop request ids are renumbered by send time).
"""

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

from qbench.run.credentials import REVEAL
from qbench.run.loadgen import LiveStats, LoadGenerator
from qbench.run.payloads import PayloadGenerator
from qbench.run.protocols import make_protocol
from qbench.run.protocols.base import Clock, make_http_session
from qbench.run.protocols.login import authenticator, session_slots
from qbench.run.records import JsonlWriter, RequestRecord
from qbench.run.scenario import Scenario, with_overrides
from qbench.run.schedule import OpenPlan, Plan, UserPlan
from qbench.run.schedule import plan as make_plan
from qbench.run.summary import GeneratorStats
from qbench.run.trace import recorded_inputs

START_MARGIN_S = 1.0  # between "all children ready" and the shared start


@dataclass
class ChildResult:
    index: int
    records: list[RequestRecord]
    stats: GeneratorStats
    info: dict[str, Any]


@dataclass
class _Shared:
    ready: Any  # mp.Queue of child indices
    stats: Any  # mp.Queue of (index, LiveStats)
    results: Any  # mp.Queue of ChildResult
    start_at: Any  # mp.Value("d")
    go: Any  # mp.Event
    stop: Any  # mp.Event
    stop_kind: Any  # mp.Array("c") - "interrupted" / "deadline"


@dataclass
class MultiRun:
    records: list[RequestRecord]
    stats: GeneratorStats
    info: dict[str, Any] = field(default_factory=dict)


def part_scenario(scenario: Scenario, processes: int) -> Scenario:
    """The per-process scenario: a session pool is shared out between processes."""
    sessions = scenario.load.sessions
    if isinstance(sessions, int):
        return with_overrides(scenario, {"load.sessions": max(1, sessions // processes)})
    return scenario


def run_processes(
    scenario: Scenario,
    target: str,
    run_dir: Path,
    on_tick: Callable[[LiveStats], None],
    stop_when: Callable[[LiveStats], str | None] | None,
) -> MultiRun:
    """Run `scenario` in `scenario.load.processes` processes; all of them append to records.jsonl."""
    processes = scenario.load.processes
    ctx = mp.get_context("spawn")
    shared = _Shared(
        ctx.Queue(),
        ctx.Queue(),
        ctx.Queue(),
        ctx.Value("d", 0.0),
        ctx.Event(),
        ctx.Event(),
        ctx.Array("c", 16),
    )
    data = scenario.model_dump(mode="json", by_alias=True, context=REVEAL)  # to the children, in memory
    children = [
        ctx.Process(target=_child, args=(k, processes, data, target, str(run_dir), shared), daemon=True)
        for k in range(processes)
    ]
    for child in children:
        child.start()
    previous = {
        sig: signal.signal(sig, lambda *_: _stop(shared, "interrupted"))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        _start_together(shared, processes, children)
        reasons: list[str] = []
        results = _supervise(shared, processes, children, on_tick, _remember(stop_when, reasons))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    multi = _merge(results, isinstance(make_plan(scenario.load), OpenPlan), processes)
    if reasons:
        multi.info["stop_reason"] = reasons[0]
    return multi


def _remember(
    hook: Callable[[LiveStats], str | None] | None, reasons: list[str]
) -> Callable[[LiveStats], str | None] | None:
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
    processes: int,
    children: list[Any],
    on_tick: Callable[[LiveStats], None],
    stop_when: Callable[[LiveStats], str | None] | None,
) -> list[ChildResult]:
    latest: dict[int, LiveStats] = {}
    results: list[ChildResult] = []
    while len(results) < processes:
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
            if len(results) == processes and latest:
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
    )


def _max(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _merge(results: list[ChildResult], open_loop: bool, processes: int) -> MultiRun:
    records = [r for res in results for r in res.records]
    if open_loop:
        records.sort(key=lambda r: r.request_id)
    else:
        records.sort(key=lambda r: (r.intended_at_s, r.user_id))
        for i, record in enumerate(records):
            record.request_id = i
    stats = [res.stats for res in results]
    cpu = sum(s.cpu_s or 0.0 for s in stats)
    merged = GeneratorStats(
        cpu_s=cpu,
        cpu_percent=sum(s.cpu_percent or 0.0 for s in stats),
        max_loop_lag_s=_max(s.max_loop_lag_s for s in stats),
        p99_loop_lag_s=_max(s.p99_loop_lag_s for s in stats),
        max_in_flight=sum(s.max_in_flight or 0 for s in stats),
        in_flight_cap=stats[0].in_flight_cap,
        processes=processes,
    )
    kinds = [res.info.get("stop_kind") for res in results if res.info.get("stop_kind")]
    reasons = [res.info.get("stop_reason") for res in results if res.info.get("stop_reason")]
    verdicts = [res.info["failed_opening"] for res in results if res.info.get("failed_opening")]
    info = {
        "stop_kind": kinds[0] if kinds else None,
        "stop_reason": reasons[0] if reasons else None,
        "max_in_flight": merged.max_in_flight,
        "failed_opening": verdicts[0] if verdicts else None,  # each process judges its own opening
    }
    auths = [res.info["auth"] for res in results if res.info.get("auth")]
    if auths:  # each process logs in on its own: logins and re-logins add up
        info["auth"] = {**auths[0], **{k: sum(a[k] for a in auths) for k in ("logins", "relogins")}}
    return MultiRun(records, merged, info)


# ---------------------------------------------------------------- child process


def _child(
    index: int, processes: int, data: dict[str, Any], target: str, run_dir: str, shared: _Shared
) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # the parent decides (Ctrl-C reaches the whole group)
        signal.signal(sig, signal.SIG_IGN)
    scenario = part_scenario(Scenario.model_validate(data), processes)
    full: Plan = make_plan(scenario.load, seed=scenario.payload.seed)
    part = full.part(index, processes)
    result = asyncio.run(_child_run((index, processes), scenario, target, part, Path(run_dir), shared))
    shared.results.put(result)


async def _child_run(
    place: tuple[int, int], scenario: Scenario, target: str, plan: Plan, run_dir: Path, shared: _Shared
) -> ChildResult:
    index, processes = place  # this process, of how many
    clock = Clock()
    payloads = PayloadGenerator(scenario.payload, fixed=recorded_inputs(scenario.load))
    payloads.prepare(scenario.payload.variants)
    async with (
        authenticator(scenario, target) as auth,
        make_http_session(scenario.load, auth.middlewares) as http,
    ):
        auth.spread(index, processes)  # login.users: other accounts than the other processes'
        await auth.start(plan.users if isinstance(plan, UserPlan) else session_slots(scenario.load))
        protocol = make_protocol(scenario, target, http, clock)
        await protocol.discover()
        gen: LoadGenerator

        def tick(stats: LiveStats) -> None:
            shared.stats.put((index, stats))
            if shared.stop.is_set():
                kind = shared.stop_kind.value.decode() or "interrupted"
                gen.request_stop(kind, "stopped by the parent process" if kind == "deadline" else "signal")

        with JsonlWriter(run_dir / "records.jsonl") as sink:
            gen = LoadGenerator(
                scenario.load, plan, protocol, payloads, clock, on_tick=tick, on_records=sink.write
            )
            shared.ready.put(index)
            await asyncio.get_running_loop().run_in_executor(None, shared.go.wait)
            records = await gen.run(start_at=shared.start_at.value)
        await protocol.close()
    return ChildResult(index, records, gen.generator_stats(), {**gen.info(), "auth": auth.info()})
