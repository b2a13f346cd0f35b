"""The open-loop dispatcher's wake-up (qbench.run.load.waker): never early, close to the instant, and no
polling at high rates. Loose bounds: the host is shared."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from qbench.run.load.waker import (
    SPIN_MARGIN_S,
    SPIN_S,
    TIMER_SLACK_NS,
    SpinWaker,
    TimerFdWaker,
    Waker,
    make_waker,
    timespec,
)


def wakers() -> list[Waker]:
    return [make_waker(), SpinWaker()]


@pytest.mark.parametrize("waker", wakers(), ids=lambda w: w.name)
def test_until_never_returns_early_and_is_usually_within_a_millisecond(waker: Waker) -> None:
    async def run() -> list[float]:
        lags = []
        when = time.perf_counter() + 0.01
        for gap in np.random.default_rng(0).exponential(0.004, 150):
            when += float(gap)
            await waker.until(when)
            lags.append(time.perf_counter() - when)
        return lags

    try:
        lags = np.array(asyncio.run(run()))
    finally:
        waker.close()
    assert (lags >= 0).all()  # never sent before its intended time
    assert np.median(lags) < 5e-3  # loose: the host is shared (quiet: ~0.01 ms, bench/dispatcher_wakeup.py)


@pytest.mark.parametrize("waker", wakers(), ids=lambda w: w.name)
def test_due_instants_do_not_wait(waker: Waker, monkeypatch: pytest.MonkeyPatch) -> None:
    """An instant already passed returns at once: no sleep, no timer (due requests go out back to back)."""
    slept: list[float] = []

    async def recording_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)
    try:
        asyncio.run(waker.until(time.perf_counter() - 1.0))
    finally:
        waker.close()
    assert slept == []


def test_spin_waker_sleeps_to_just_before_then_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[tuple[float, float]] = []  # (delay, when the sleep was asked for)
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        slept.append((delay, time.perf_counter()))
        await real_sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)
    instant = time.perf_counter() + 0.2  # far enough that a busy box's start-up never eats it
    asyncio.run(SpinWaker().until(instant))
    (first, asked_at), *polls = slept
    # one sleep to SPIN_S before the instant, counted from the waker's own clock reading (just before
    # `asked_at`: a busy box may pause between the two, hence no upper bound on the sum)
    assert 0.1 < first <= 0.2 - SPIN_S and asked_at + first >= instant - SPIN_S - 1e-6
    assert {delay for delay, _ in polls} <= {0}  # then polls


linux_only = pytest.mark.skipif(not isinstance(make_waker(), TimerFdWaker), reason="timerfd is Linux-only")


@linux_only
def test_timerfd_waker_polls_only_the_last_fraction_of_a_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """Close instants (high rates) are left to the timer alone; a long wait polls at most its last
    SPIN_MARGIN_S. The spin waker would poll ~1.5 ms before every instant."""
    polls = 0
    real_sleep = asyncio.sleep

    async def counting_sleep(delay: float) -> None:
        nonlocal polls
        polls += delay == 0
        await real_sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", counting_sleep)
    waker = make_waker()

    async def run(gap: float, n: int) -> float:
        nonlocal polls
        polls = 0
        cpu, when = time.process_time(), time.perf_counter()
        for _ in range(n):
            when += gap
            await waker.until(when)
        return time.process_time() - cpu

    try:
        asyncio.run(run(0.0008, 50))
        assert polls <= 5  # the timer wakes the loop; a poll only if it fired a hair early
        cpu_s = asyncio.run(run(0.01, 20))  # 200 ms of waiting
    finally:
        waker.close()
    assert SPIN_MARGIN_S < 0.001 and cpu_s < 0.1  # a spinning wait would use ~all of it


@linux_only
def test_timerfd_waker_restores_the_timer_slack() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    original = libc.prctl(30, 0, 0, 0, 0)  # PR_GET_TIMERSLACK (ns)
    libc.prctl(29, 50_000, 0, 0, 0)  # PR_SET_TIMERSLACK: a known value, so the restore is visible
    try:
        waker = make_waker()
        assert isinstance(waker, TimerFdWaker)
        assert libc.prctl(30, 0, 0, 0, 0) == TIMER_SLACK_NS
        waker.close()
        waker.close()  # idempotent
        assert libc.prctl(30, 0, 0, 0, 0) == 50_000
    finally:
        libc.prctl(29, original, 0, 0, 0)


def test_timespec_rounds_up_and_keeps_nanoseconds_below_a_second() -> None:
    assert timespec(12.5) == (12, 500_000_001)
    assert timespec(7.0) == (7, 1)
    assert timespec(41.9999999999) == (42, 0)  # 999,999,999 + 1 ns: carried into the seconds
    assert all(0 <= timespec(3 + k / 7)[1] < 1_000_000_000 for k in range(7))
