"""Schedules: counts and times for rate x duration, Poisson statistics, ramps, bursts, users."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.scenario.schedule import OpenPlan, UserPlan, plan, stage_offsets
from qbench.run.scenario.schema import Load, Stage


def offsets(**load: object) -> np.ndarray:
    result = plan(Load.model_validate(load), seed=0)
    assert isinstance(result, OpenPlan)
    return result.offsets


@pytest.mark.parametrize(
    ("rate", "duration", "count"),
    [(10, 2, 20), (3, 1, 3), (10, 0.3, 3), (0.5, 10, 5), (7, 1.5, 11)],
)
def test_constant_rate_count_and_spacing(rate: float, duration: float, count: int) -> None:
    times = offsets(rate=rate, duration=duration)
    assert len(times) == count
    np.testing.assert_allclose(times, np.arange(count) / rate)


def test_requests_cap_the_count_and_alone_are_a_stop_condition() -> None:
    assert len(offsets(rate=10, duration=5, requests=7)) == 7
    times = offsets(rate=4, requests=9)
    assert len(times) == 9
    np.testing.assert_allclose(times[-1], 2.0)


def test_poisson_statistics_with_a_seed() -> None:
    times = offsets(rate=50, duration=200, arrival="poisson")
    gaps = np.diff(times)
    assert abs(len(times) - 10_000) < 4 * np.sqrt(10_000)  # count ~ Poisson(10000)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1
    counts = np.histogram(times, bins=np.arange(0, 201, 1.0))[0]
    assert counts.var() / counts.mean() == pytest.approx(1.0, rel=0.25)  # Poisson: dispersion = 1
    np.testing.assert_array_equal(times, offsets(rate=50, duration=200, arrival="poisson"))  # seeded


def test_different_seeds_differ() -> None:
    load = Load.model_validate({"rate": 5, "duration": 10, "arrival": "poisson"})
    a, b = plan(load, seed=1), plan(load, seed=2)
    assert isinstance(a, OpenPlan) and isinstance(b, OpenPlan)
    assert not np.array_equal(a.offsets[:5], b.offsets[:5])


def test_linear_ramp_inverts_the_cumulative_intensity() -> None:
    # rate 0 -> 10 over 10 s: Lambda(t) = t^2 / 2, so request k is at sqrt(2k); 50 requests in total
    times = offsets(stages=[{"duration": 10, "rate": 0, "to": 10}])
    assert len(times) == 50
    np.testing.assert_allclose(times, np.sqrt(2 * np.arange(50)))


def test_stages_chain_and_skip_idle_stages() -> None:
    times = offsets(
        stages=[{"duration": 2, "rate": 5}, {"duration": 3, "rate": 0}, {"duration": 1, "rate": 10}]
    )
    assert len(times) == 20
    assert not np.any((times > 2) & (times < 5))
    np.testing.assert_allclose(times[10:], 5 + np.arange(10) / 10)


def test_poisson_ramp_follows_the_intensity() -> None:
    rng = np.random.default_rng(3)
    stages = [Stage(duration=100, rate=10, to=30)]
    times = stage_offsets(stages, poisson=True, rng=rng)
    first, second = np.sum(times < 50), np.sum(times >= 50)
    assert first == pytest.approx(750, abs=4 * np.sqrt(750))  # integral of 10..20 over 50 s
    assert second == pytest.approx(1250, abs=4 * np.sqrt(1250))


def test_burst_and_repeated_burst() -> None:
    np.testing.assert_array_equal(offsets(burst=4), np.zeros(4))
    np.testing.assert_array_equal(offsets(burst=2, interval=1, duration=3), [0, 0, 1, 1, 2, 2])


def test_users_plan_spreads_starts_over_ramp_up() -> None:
    result = plan(Load.model_validate({"users": 4, "ramp_up": 2, "duration": 5, "think_time": 0.5}))
    assert isinstance(result, UserPlan)
    np.testing.assert_allclose(result.start_offsets, [0, 0.5, 1.0, 1.5])
    assert result.think_time == 0.5 and result.duration == 5
