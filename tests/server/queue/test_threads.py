"""Threads: sync calls on worker threads within the limiter's tokens, the caller's context kept."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import pytest

from reference_server.queue.threads import Threads


def run_async(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The test's body on a fresh event loop (the suite's tests call asyncio.run themselves)."""
    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(test())
    return sync


PHASES: contextvars.ContextVar[dict[str, float]] = contextvars.ContextVar("PHASES")


@run_async
async def test_the_result_comes_back_from_another_thread_with_the_callers_context() -> None:
    threads = Threads(anyio.CapacityLimiter(2))
    seen: dict[str, float] = {}
    PHASES.set(seen)

    def call(x: int) -> tuple[int, str]:
        PHASES.get()["filled"] = 1.0  # a workload's phases reach the job that set the dict
        return x * 2, threading.current_thread().name

    value, name = await threads.run(call, 21)
    assert value == 42 and name != threading.current_thread().name
    assert seen == {"filled": 1.0}
    assert threads.limiter.borrowed_tokens == 0
    threads.close()


@run_async
async def test_an_exception_is_raised_where_the_call_is_awaited_and_the_worker_is_reused() -> None:
    threads = Threads(anyio.CapacityLimiter(1))

    def fail() -> None:
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        await threads.run(fail)
    names = {await threads.run(lambda: threading.current_thread().ident) for _ in range(5)}
    assert len(names) == 1  # one token, calls one after another: one worker
    assert threads.limiter.borrowed_tokens == 0
    threads.close()


@run_async
async def test_no_more_threads_run_at_once_than_the_limiter_has_tokens() -> None:
    threads = Threads(anyio.CapacityLimiter(2))
    lock, active, most = threading.Lock(), [0], [0]

    def busy() -> None:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        threading.Event().wait(0.02)
        with lock:
            active[0] -= 1

    await asyncio.gather(*(threads.run(busy) for _ in range(8)))
    assert most[0] == 2
    threads.close()


@run_async
async def test_a_cancelled_call_gives_its_token_back_at_once_as_anyio_does() -> None:
    threads = Threads(anyio.CapacityLimiter(1))
    release = threading.Event()
    task = asyncio.ensure_future(threads.run(release.wait, 10))
    while threads.limiter.borrowed_tokens == 0:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert threads.limiter.borrowed_tokens == 0  # Gradio's next job may start its thread now
    assert await threads.run(lambda: "next") == "next"  # on another worker: the first still waits
    release.set()
    for _ in range(500):  # the cancelled call's thread returns unseen; its token is not given twice
        await asyncio.sleep(0.01)
        if len(threads._idle) == 2:
            break
    assert len(threads._idle) == 2 and threads.limiter.borrowed_tokens == 0
    threads.close()


@run_async
async def test_a_call_that_outlives_close_ends_its_thread() -> None:
    threads = Threads(anyio.CapacityLimiter(2))
    release, ran_on = threading.Event(), []

    def call() -> bool:
        ran_on.append(threading.current_thread())
        return release.wait(10)

    running = asyncio.ensure_future(threads.run(call))
    while not ran_on:
        await asyncio.sleep(0.001)
    threads.close()
    release.set()
    assert await running is True
    ran_on[0].join(5)
    assert not ran_on[0].is_alive() and not threads._idle
