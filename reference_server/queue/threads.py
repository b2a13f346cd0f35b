"""Sync calls on worker threads behind the queue's CapacityLimiter, without anyio's per-call machinery.

`anyio.to_thread.run_sync` costs the event loop a cancel scope, a limiter acquire and release that ask
for the current task (each a `getpid` syscall in CPython's asyncio), a `queue.Queue` whose Condition
wakes the worker in Python, and a checkpoint; the queue hands each batch to a thread this way, so on
the CPU stand-in of a GPU server that was a visible share of the core's CPU per prediction. `Threads`
keeps what it must: the same limiter (`max_threads` bounds every thread the queue runs, whoever
asks), the caller's context (a workload's thread fills the BATCH_PHASES dict its job set), an
exception raised where it was awaited; a worker is told its job through a `SimpleQueue` (C), and the
loop hears the result through `call_soon_threadsafe`.

The limiter's token comes back when the thread returns, or at once when the awaiting task is
cancelled (as anyio gives it back, so as Gradio does: the next job may start its thread while the
cancelled one's runs on, unseen). Idle workers wait for the next call and are reused; each is a
daemon thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

import anyio


class _Token:
    """A call's hold on one of the limiter's tokens (its borrower), given back once."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = True


_Job = tuple[asyncio.AbstractEventLoop, contextvars.Context, Callable[..., Any], tuple[Any, ...],
             "asyncio.Future[Any]", _Token]


class _Worker:
    """One daemon thread running the jobs put into its mailbox, one at a time."""

    def __init__(self, threads: Threads) -> None:
        self.threads = threads
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, name="qbench-worker", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            loop, context, fn, args, future, token = job
            try:
                result, error = context.run(fn, *args), None
            except BaseException as exc:  # noqa: BLE001 - raised again where the call is awaited
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(self.threads.finished, self, future, token, result, error)
            except RuntimeError:  # the loop closed while this ran: nobody waits for the answer
                return
            del job, future, result, error  # do not hold the last call's objects while idle


class Threads:
    """`await threads.run(fn, *args)`: `fn(*args)` on a worker thread within `limiter`'s tokens."""

    def __init__(self, limiter: anyio.CapacityLimiter) -> None:
        self.limiter = limiter
        self._idle: list[_Worker] = []
        self._closed = False

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        token = _Token()  # the limiter's borrower: this call, not the task (a task may run several)
        try:
            self.limiter.acquire_on_behalf_of_nowait(token)
        except anyio.WouldBlock:
            await self.limiter.acquire_on_behalf_of(token)
        self._closed = False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        worker = self._idle.pop() if self._idle else _Worker(self)
        worker.jobs.put((loop, contextvars.copy_context(), fn, args, future, token))
        try:
            return await future
        except asyncio.CancelledError:
            self._give_back(token)
            raise

    def _give_back(self, token: _Token) -> None:
        if token.held:
            token.held = False
            self.limiter.release_on_behalf_of(token)

    def finished(self, worker: _Worker, future: asyncio.Future[Any], token: _Token, result: Any,
                 error: BaseException | None) -> None:
        """On the loop: the token back to the limiter, the worker idle, the answer to the caller."""
        self._give_back(token)
        if self._closed:
            worker.jobs.put(None)  # a call that outlived close(): its thread ends now
        else:
            self._idle.append(worker)
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def close(self) -> None:
        """Let the idle workers end (a running one ends when its call returns); a later `run` starts
        workers again."""
        self._closed = True
        for worker in self._idle:
            worker.jobs.put(None)
        self._idle.clear()
