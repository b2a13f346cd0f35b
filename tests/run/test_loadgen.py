"""The executor's shared timeout wheel (loadgen.DeadlineWheel) and the dispatcher's batched sends."""

from __future__ import annotations

import asyncio

import pytest

from qbench.run.loadgen import DeadlineWheel
from qbench.run.records import RequestRecord


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
