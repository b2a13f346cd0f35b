"""The open-loop dispatcher's wake-up: never early, and (statistically) close to the intended time."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest

from qbench.run.loadgen import SPIN_S, LoadGenerator
from qbench.run.protocols.base import Clock


def test_until_never_returns_early_and_is_usually_within_a_millisecond() -> None:
    clock = Clock()
    owner = SimpleNamespace(clock=clock)

    async def run() -> list[float]:
        lags = []
        when = clock.now() + 0.01
        for gap in np.random.default_rng(0).exponential(0.004, 150):
            when += float(gap)
            await LoadGenerator._until(owner, when)  # type: ignore[arg-type]
            lags.append(clock.now() - when)
        return lags

    lags = np.array(asyncio.run(run()))
    assert (lags >= 0).all()  # never sent before its intended time
    assert np.median(lags) < 1e-3  # epoll alone rounds up to whole ms; loose: the host is shared
    assert SPIN_S < 0.01


def test_due_requests_do_not_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request already due goes out at once: no sleep at all (the old loop slept >= 1 ms per request
    whenever it was a hair early, and epoll rounded that up)."""
    clock = Clock()
    owner = SimpleNamespace(clock=clock)
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)
    asyncio.run(LoadGenerator._until(owner, clock.now() - 1.0))  # type: ignore[arg-type]
    assert slept == []
    asyncio.run(LoadGenerator._until(owner, clock.now() + 0.02))  # type: ignore[arg-type]
    assert slept[0] == pytest.approx(0.02 - SPIN_S, abs=0.005) and set(slept[1:]) <= {0}
