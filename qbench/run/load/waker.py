"""Wake the event loop at an exact instant without burning a core, for the open-loop dispatcher: a timerfd on
Linux, else sleep then spin; `make_waker()` picks one, QBENCH_WAKER=spin forces the fallback."""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from typing import Protocol

from qbench.run.clib import libc

SPIN_S = 0.0015  # the spin waker wakes this early and polls to the instant
SPIN_ABOVE_S = 0.002  # the timerfd waker polls the last SPIN_MARGIN_S of waits longer than this
SPIN_MARGIN_S = 0.0002
TIMER_SLACK_NS = 10_000  # the generator thread's timer slack during a run (Linux default: 50 us)

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29
_PR_GET_TIMERSLACK = 30


class Waker(Protocol):
    name: str  # "timerfd" or "spin"

    async def until(self, when: float) -> None:
        """Return at `when` (a time.perf_counter() value): never before, and soon after."""
        ...

    def close(self) -> None: ...


class SpinWaker:
    """Portable: sleep to SPIN_S before the instant, then poll the loop to it."""

    name = "spin"

    async def until(self, when: float) -> None:
        delay = when - time.perf_counter()
        if delay > SPIN_S:
            await asyncio.sleep(delay - SPIN_S)
        while time.perf_counter() < when:
            await asyncio.sleep(0)

    def close(self) -> None:
        pass


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class TimerFdWaker:
    """Linux: one timerfd at the absolute instant, re-armed for every wait, read by the event loop."""

    name = "timerfd"

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd: int = fd
        self._spec = _Itimerspec()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._old_slack: int = libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
        libc.prctl(_PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)

    async def until(self, when: float) -> None:
        delay = when - time.perf_counter()
        if delay <= 0:
            return
        # A wake-up after a long idle takes ~0.1-0.2 ms (CPU idle states): for a gap longer than
        # SPIN_ABOVE_S, wake SPIN_MARGIN_S early and poll the rest; closer requests (high rates) rely on
        # the timer alone, so polling never costs more than a few % of a core.
        await self._timer(when - SPIN_MARGIN_S if delay > SPIN_ABOVE_S else when)
        while time.perf_counter() < when:
            await asyncio.sleep(0)

    async def _timer(self, when: float) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._attach(loop)
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = timespec(when)
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _attach(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.fd)
        self._loop = loop
        loop.add_reader(self.fd, self._fired)

    def _fired(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return  # re-armed for a later instant after this expiry was queued
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        if self.fd < 0:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.fd)
        os.close(self.fd)
        self.fd = -1
        if self._old_slack > 0:
            self._libc.prctl(_PR_SET_TIMERSLACK, self._old_slack, 0, 0, 0)


def timespec(when: float) -> tuple[int, int]:
    """(seconds, nanoseconds) of a perf_counter instant, rounded up (never early); nanoseconds < 1 s."""
    secs = int(when)
    nanos = int((when - secs) * 1e9) + 1
    if nanos >= 1_000_000_000:
        secs, nanos = secs + 1, nanos - 1_000_000_000
    return secs, nanos


def make_waker() -> Waker:
    """The timerfd waker on Linux (where perf_counter is CLOCK_MONOTONIC), else the spin waker."""
    monotonic = time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    if sys.platform != "linux" or not monotonic or os.environ.get("QBENCH_WAKER") == "spin":
        return SpinWaker()
    c = libc()
    if c is None:
        return SpinWaker()
    try:
        return TimerFdWaker(c)
    except (OSError, AttributeError):
        return SpinWaker()
