"""The executor's shared timeout wheel (loadgen.DeadlineWheel) and the dispatcher's batched sends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from qbench.run.load.generator import DeadlineWheel, thread_wait_s
from qbench.run.records.schema import RequestRecord
from tests.run.conftest import scenario


def record(i: int) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=i, session_id="", endpoint="e", warmup=False,
                         intended_at_s=0.0)


def test_the_wheel_expires_in_deadline_order_on_one_timer() -> None:
    expired: list[tuple[int, float]] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        wheel = DeadlineWheel(0.05, lambda task, rec: expired.append((rec.request_id, loop.time() - t0)))
        forever = [loop.create_task(asyncio.sleep(10)) for _ in range(4)]
        await asyncio.sleep(0)
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        for i, task in enumerate(forever[:3]):
            wheel.add(task, record(i))
        timers = len(loop._scheduled) - before  # type: ignore[attr-defined]
        wheel.remove(forever[0])  # finished before its deadline: never expires
        wheel.remove(forever[0])  # a second remove is harmless
        await asyncio.sleep(0.1)
        wheel.add(forever[3], record(3))
        assert len(wheel) == 1
        wheel.close()  # the run ended: no expiry after it
        await asyncio.sleep(0.08)
        for task in forever:
            task.cancel()
        assert timers == 1  # the wheel's one timer, not one per request

    asyncio.run(run())
    assert [i for i, _ in expired] == [1, 2]
    assert all(at >= 0.05 - 1e-3 for _, at in expired)  # never before the deadline (loop clock: ms)


@pytest.mark.parametrize("n", [1, 3])
def test_a_wheel_with_one_entry_per_closed_loop_user(n: int) -> None:
    """A user task re-adds itself for every request: each add is one entry, each remove clears it."""
    async def run() -> int:
        loop = asyncio.get_running_loop()
        wheel = DeadlineWheel(1.0, lambda task, rec: None)
        task = loop.create_task(asyncio.sleep(1))
        for i in range(n):
            wheel.add(task, record(i))
            wheel.remove(task)
        task.cancel()
        size = len(wheel)
        wheel.close()
        return size

    assert asyncio.run(run()) == 0


def test_open_loop_sends_on_schedule_and_keeps_both_times(http_echo: str, tmp_path: Path) -> None:
    """Poisson 200 req/s for 1 s: every record keeps its planned time exactly and is never sent early
    (the median lag bound is loose: the host is shared)."""
    from qbench.run.pipeline import check_schedule, run_scenario

    spec = scenario(protocol="http", endpoint={"path": "/echo", "method": "POST"},
                    load={"rate": 200, "arrival": "poisson", "duration": 1, "timeout": 10})
    planned = check_schedule(spec).offsets.tolist()
    result = run_scenario(spec, target=http_echo, out_dir=tmp_path / "run", live=False)
    records = sorted(result.records, key=lambda r: r.request_id)
    assert len(records) == len(planned) and all(r.ok for r in records)
    assert [r.intended_at_s for r in records] == planned  # exact: the plan's own floats
    lags = np.array([r.sent_at_s - r.intended_at_s for r in records])  # type: ignore[operator]
    assert (lags >= 0).all() and np.median(lags) < 0.005


def test_a_thread_sharing_its_core_with_a_spinning_process_waits_for_it() -> None:
    """Pinned to one core beside a process that spins there, a thread that also spins for 0.6 s of wall
    time gets about half of it: schedstat says it waited at least a sixth (0 on a quiet host's own core
    at most a few ms)."""
    import os
    import subprocess
    import sys
    import time

    before = thread_wait_s()
    if before is None or not hasattr(os, "sched_setaffinity"):
        pytest.skip("the kernel gives no schedstat here")
    core = min(os.sched_getaffinity(0))
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # inherits the one core
    try:
        time.sleep(0.2)  # the spinner is running
        start = thread_wait_s()
        end_at = time.perf_counter() + 0.6
        while time.perf_counter() < end_at:
            pass
        waited = (thread_wait_s() or 0.0) - (start or 0.0)
    finally:
        spinner.kill()
        spinner.wait()
        os.sched_setaffinity(0, old)
    assert waited >= 0.1, waited


def test_a_run_records_how_long_the_generator_waited_for_a_core(http_echo: str, tmp_path: Path) -> None:
    from qbench.run.pipeline import run_scenario

    spec = scenario(protocol="http", endpoint={"path": "/echo", "method": "POST"},
                    load={"rate": 50, "duration": 0.5, "timeout": 10})
    share = run_scenario(spec, target=http_echo, out_dir=tmp_path / "run", live=False
                         ).summary.generator.loop_wait_share
    assert thread_wait_s() is None or (share is not None and 0.0 <= share <= 1.0), share


def test_a_timeout_from_the_wheel_closes_the_record_after_the_timeout(http_echo: str, tmp_path: Path) -> None:
    from qbench.run.pipeline import run_scenario

    spec = scenario(protocol="http", endpoint={"path": "/slow", "method": "GET"},
                    load={"burst": 3, "timeout": 0.2})
    result = run_scenario(spec, target=http_echo, out_dir=tmp_path / "run", live=False)
    assert [r.error_kind for r in result.records] == ["timeout"] * 3
    for r in result.records:
        # the timeout runs from the executor's start of the request, a hair before sent_at_s
        assert 0.195 <= r.completed_at_s - r.sent_at_s < 0.45  # type: ignore[operator]  # /slow: 0.5 s


def test_a_run_keeps_no_record_it_has_handed_on(http_echo: str, tmp_path: Path) -> None:
    """Records exist from their send to the next flush to records.jsonl, not for the whole run: at
    every tick (just after a flush) each live record is one a request's task still holds (due and handed
    to its task, on the wire, or being closed) or one of the opening's few that the fail-fast guard
    judges; the run's records are read back whole at the end. (Tasks, not `in_flight`: on a starved
    client due tasks wait for the loop before they send, holding their records.)"""
    import asyncio
    import gc

    from qbench.run.load.generator import LiveStats
    from qbench.run.pipeline import run_scenario
    from qbench.run.results.failfast import OPENING_REQUESTS

    seen: list[tuple[int, int]] = []  # (live records, pending tasks) at ticks with most of the run done

    def count(stats: LiveStats) -> str | None:  # called on the run's loop, after a flush
        if 200 <= stats.completed < 1150 and len(seen) < 2:
            live = sum(isinstance(o, RequestRecord) for o in gc.get_objects())
            seen.append((live, len(asyncio.all_tasks())))
        return None

    spec = scenario(protocol="http", endpoint={"path": "/echo", "method": "POST"},
                    load={"rate": 800, "requests": 1200, "timeout": 10})
    result = run_scenario(spec, target=http_echo, out_dir=tmp_path / "run", live=False, stop_when=count)
    assert seen and all(live <= tasks + OPENING_REQUESTS for live, tasks in seen), seen
    assert [r.request_id for r in result.records] == list(range(1200)) and all(r.ok for r in result.records)
    again = run_scenario(spec, target=http_echo, out_dir=tmp_path / "run", live=False)  # the same folder
    assert len(again.records) == 1200  # its own records, not the first run's too
