"""Verdicts of drifting series (qbench.run.soak.drift): known slopes found within their interval, flat noise
judged flat, growth that stops reported as a bound, a limit's crossing; seeded, no timing."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.soak.drift import Signal, Verdict, judge

MIB = 2**20
RSS = Signal("server RSS", "rss_bytes", "B", 4 * MIB, 0.02)


def series(values: np.ndarray, rate: float = 20.0, every_s: float = 5.0) -> tuple[list[float], list[float]]:
    t = [k * every_s for k in range(values.size)]
    return t, [rate * s for s in t]


@pytest.mark.parametrize("per_request", [10_000, 38_000, 100_000])
def test_a_linear_leak_is_growing_and_its_slope_within_the_interval(per_request: int) -> None:
    rng = np.random.default_rng(1)
    t, x = series(np.zeros(120))
    values = 200 * MIB + per_request * np.array(x) + rng.normal(0, 2 * MIB, len(x))
    verdict = judge(RSS, t, x, list(values), steady_from_s=60)
    assert verdict.kind == "growing"
    assert verdict.per_1k is not None and verdict.per_1k.low <= per_request * 1000 <= verdict.per_1k.high
    assert verdict.per_hour is not None
    assert verdict.per_hour.value == pytest.approx(per_request * 20 * 3600, rel=0.1)
    assert "growing" in verdict.text() and "per 1,000 requests" in verdict.text()


def test_noise_around_a_level_is_flat() -> None:
    rng = np.random.default_rng(2)
    t, x = series(np.zeros(120))
    verdict = judge(RSS, t, x, list(300 * MIB + rng.normal(0, 3 * MIB, len(x))), steady_from_s=60)
    assert verdict.kind == "flat", verdict.text()
    assert "flat at 300 MiB" in verdict.text()


def test_a_certain_but_negligible_creep_is_flat() -> None:
    t, x = series(np.zeros(120))
    values = 300 * MIB + 2.0 * np.array(x)  # 2 bytes a request: certain, and nothing
    assert judge(RSS, t, x, list(values), steady_from_s=0).kind == "flat"


def test_growth_that_stops_is_a_bound_with_its_level() -> None:
    rng = np.random.default_rng(3)
    t, x = series(np.zeros(160))
    grown = np.minimum(np.array(x), 6000) * 40_000  # 40 kB a session up to 6,000 sessions, then kept
    values = 200 * MIB + grown + rng.normal(0, MIB, len(x))
    verdict = judge(RSS, t, x, list(values), steady_from_s=0)
    assert verdict.kind == "bounded", verdict.text()
    assert verdict.bound == pytest.approx(200 * MIB + 6000 * 40_000, rel=0.02)
    assert verdict.bound_at_requests is not None and 5000 < verdict.bound_at_requests <= 6100
    assert verdict.per_1k is not None and verdict.per_1k.low <= 40e6 <= verdict.per_1k.high
    assert "a bound, not a leak" in verdict.text() and "~39.1 KiB a request" in verdict.text()


def test_a_growing_signal_says_when_it_crosses_the_limit() -> None:
    t, x = series(np.zeros(60))
    values = 1024 * MIB + 100_000 * np.array(x)
    verdict = judge(RSS, t, x, list(values), steady_from_s=0, limit=16 * 2**30, rate_rps=20)
    assert verdict.limit_after_requests is not None and verdict.limit_after_s is not None
    left = (16 * 2**30 - values[-1]) / 100_000
    assert verdict.limit_after_requests == pytest.approx(left, rel=0.01)
    assert verdict.limit_after_s == pytest.approx(left / 20, rel=0.01)
    assert "reaches 16 GiB after" in verdict.text()


def test_few_samples_after_the_cut_say_so_and_missing_values_are_skipped() -> None:
    t, x = series(np.zeros(20))
    verdict = judge(RSS, t, x, [None] * 14 + [float(MIB)] * 6, steady_from_s=0)
    assert (verdict.kind, verdict.samples) == ("short", 6)
    assert "too few samples" in verdict.text()


def test_a_verdict_reads_itself_back() -> None:
    t, x = series(np.zeros(40))
    verdict = judge(RSS, t, x, list(MIB * np.arange(40.0) * 50), steady_from_s=0, limit=2**34, rate_rps=20)
    assert Verdict.from_dict(verdict.to_dict()) == verdict
