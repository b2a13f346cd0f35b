"""Verdicts of drifting series (qbench.run.soak.drift), a truth table at the sizes users run: leaks of
12-30 KiB a request on 300 MiB to 16 GiB servers are growing, flat series of the same sizes flat, growth
that stops bounded at its level, short noisy runs "can't tell yet", and flat autocorrelated noise raises
few false alarms; seeded, no timing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qbench.run.soak.command import HEALTH_SIGNALS, SLICE_SIGNALS
from qbench.run.soak.drift import Verdict, judge

MIB, GIB, KIB = 2**20, 2**30, 2**10
RSS = next(s for s in HEALTH_SIGNALS if s.key == "rss_bytes")
HOST = 64 * GIB  # the host's memory: memory's ceiling without a --limit
SIZES = [300 * MIB, 4 * GIB, 8 * GIB, 16 * GIB]


def series(n: int, rate: float = 20.0, every_s: float = 5.0) -> tuple[list[float], np.ndarray]:
    t = [k * every_s for k in range(n)]
    return t, np.array([rate * s for s in t])


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> np.ndarray:
    """AR(1) noise of lag-1 correlation `phi` and marginal standard deviation `sd`."""
    out = np.empty(n)
    out[0] = rng.normal(0, sd)
    shocks = rng.normal(0, sd * math.sqrt(1 - phi * phi), n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def rss(values: np.ndarray, t: list[float], x: np.ndarray, cut: float = 120.0) -> Verdict:
    return judge(RSS, t, list(x), list(values), steady_from_s=cut, limit=HOST, rate_rps=20.0,
                 limit_source="the host's memory")


@pytest.mark.parametrize("level", SIZES)
@pytest.mark.parametrize("per_request", [12 * KIB, 16 * KIB])
def test_a_leak_is_growing_with_its_rate_a_day_whatever_the_level(level: int, per_request: int) -> None:
    """RSS every 5 s for 10 minutes at 20 req/s, 2 MiB of noise: the leak is ~20-26 GiB a day."""
    rng = np.random.default_rng(level // MIB + per_request)
    t, x = series(120)
    verdict = rss(level + per_request * x + rng.normal(0, 2 * MIB, x.size), t, x)
    assert verdict.kind == "growing", verdict.text()
    assert verdict.per_1k is not None and verdict.per_1k.low <= per_request * 1000 <= verdict.per_1k.high
    assert verdict.change is not None
    assert verdict.change.value == pytest.approx(per_request * 20 * 86400, rel=0.1)
    assert "a day at this rate" in verdict.text() and "the host's memory" in verdict.text()


@pytest.mark.parametrize("level", SIZES)
def test_a_flat_series_is_flat_whatever_the_level(level: int) -> None:
    rng = np.random.default_rng(level // MIB)
    t, x = series(120)
    verdict = rss(level + rng.normal(0, 2 * MIB, x.size), t, x)
    assert verdict.kind == "flat", verdict.text()
    assert verdict.change is not None and verdict.matters is not None
    assert max(abs(verdict.change.low), abs(verdict.change.high)) < verdict.matters
    assert "flat at" in verdict.text() and "at most" in verdict.text()


def test_the_issues_soak_a_16_kib_leak_on_a_4_gib_server_over_180_s_is_growing() -> None:
    """The case that read "flat" before: 4 GiB of ballast, 16 KiB kept a request, 180 s at 20 req/s."""
    t, x = series(36)
    verdict = rss(4 * GIB + 16 * KIB * x + (x % 7) * 1000.0, t, x, cut=36.0)
    assert verdict.kind == "growing", verdict.text()
    assert verdict.change is not None and verdict.change.value > 20 * GIB


def test_49_gib_a_day_that_never_stops_is_growing_not_bounded() -> None:
    rng = np.random.default_rng(7)
    t, x = series(120)
    verdict = rss(8 * GIB + 30 * KIB * x + rng.normal(0, 2 * MIB, x.size), t, x)
    assert verdict.kind == "growing", verdict.text()
    assert verdict.limit_after_requests is not None and verdict.limit_after_s is not None
    assert verdict.limit_after_requests == pytest.approx((HOST - (8 * GIB + 30 * KIB * x[-1])) / (30 * KIB),
                                                         rel=0.05)


def test_a_certain_but_negligible_creep_is_flat() -> None:
    t, x = series(120)
    values = 300 * MIB + 2.0 * x  # 2 bytes a request: certain, and 3.3 MiB a day
    verdict = rss(values, t, x, cut=0)
    assert verdict.kind == "flat", verdict.text()


@pytest.mark.parametrize("level", [300 * MIB, 16 * GIB])
def test_growth_that_stops_is_a_bound_with_its_level(level: int) -> None:
    rng = np.random.default_rng(3)
    t, x = series(160)
    grown = np.minimum(x, 6000) * 40_000  # 40 kB a session up to 6,000 sessions, then kept
    verdict = rss(level + grown + rng.normal(0, MIB, x.size), t, x, cut=0)
    assert verdict.kind == "bounded", verdict.text()
    assert verdict.bound == pytest.approx(level + 6000 * 40_000, rel=0.02)
    assert verdict.bound_at_requests is not None and 5000 < verdict.bound_at_requests <= 6100
    assert verdict.per_1k is not None and verdict.per_1k.low <= 40e6 <= verdict.per_1k.high
    assert verdict.last_half is not None and verdict.last_half.low <= 0 <= verdict.last_half.high
    assert "a bound, not a leak" in verdict.text() and "~39.1 KiB a request" in verdict.text()


def test_a_bound_then_a_creep_that_matters_is_growing_at_the_creeps_rate() -> None:
    """40 kB a request up to 2,000 requests, then 2 KiB a request (3.3 GiB a day at 20 req/s): the
    verdict is the creep, said after the rise that stopped, not "a bound, not a leak"."""
    rng = np.random.default_rng(6)
    t, x = series(160)
    values = 4 * GIB + np.minimum(x, 2000) * 40_000 + np.maximum(x - 2000, 0) * 2 * KIB
    verdict = rss(values + rng.normal(0, 256 * KIB, x.size), t, x, cut=0)
    assert verdict.kind == "growing", verdict.text()
    assert verdict.per_1k is not None and verdict.per_1k.low <= 2 * KIB * 1000 <= verdict.per_1k.high
    assert verdict.bound_at_requests is not None and 1800 < verdict.bound_at_requests <= 2100
    assert "after a rise of" in verdict.text() and "a bound, not a leak" not in verdict.text()


def test_growth_still_going_in_the_last_half_is_not_a_bound() -> None:
    """Slower in the last half, but certainly still growing: a leak that slowed, not a bound."""
    rng = np.random.default_rng(4)
    t, x = series(160)
    values = 4 * GIB + np.where(x < 1600, 40_000 * x, 40_000 * 1600 + 10_000 * (x - 1600))
    verdict = rss(values + rng.normal(0, MIB, x.size), t, x, cut=0)
    assert verdict.kind == "growing", verdict.text()


def test_a_short_noisy_run_cannot_tell_yet_and_says_how_much_longer_would() -> None:
    """3 minutes of 8 MiB noise on 4 GiB, a 2 KiB leak (3.3 GiB a day): the interval spans 0 and 1 GiB."""
    rng = np.random.default_rng(5)
    t, x = series(36)
    verdict = rss(4 * GIB + 2 * KIB * x + rng.normal(0, 8 * MIB, x.size), t, x, cut=0)
    assert verdict.kind == "unsure", verdict.text()
    assert verdict.more_s is not None and verdict.more_s > 0
    assert "can't tell yet" in verdict.text() and "more would tell" in verdict.text()
    longer_t, longer_x = series(36 + int(verdict.more_s / 5) + 1)
    noise = rng.normal(0, 8 * MIB, longer_x.size)
    longer = rss(4 * GIB + 2 * KIB * longer_x + noise, longer_t, longer_x, cut=0)
    assert longer.kind != "unsure", longer.text()  # the run it asked for tells


def test_what_matters_for_memory_scales_with_the_ceiling_within_its_floor_and_cap() -> None:
    assert RSS.matters(16 * GIB, 24 * GIB) == pytest.approx(0.02 * 24 * GIB)
    assert RSS.matters(300 * MIB, 2 * GIB) == 64 * MIB
    assert RSS.matters(300 * MIB, 2048 * GIB) == GIB
    p95 = next(s for s in SLICE_SIGNALS if s.key == "p95_latency_s")
    assert p95.horizon == "day" and p95.matters(0.2, None) == pytest.approx(0.02)  # 10% of its level a day
    assert p95.matters(0.2, 1.0) == pytest.approx(0.02)  # far from a 1 s SLO: the same
    assert p95.matters(0.95, 1.0, 0.95) == pytest.approx(0.05 / 7)  # near it: what reaches it in a week


def test_near_its_limit_a_leak_of_a_few_percent_of_the_limit_a_day_is_growing_not_flat() -> None:
    """The issue's server: 15.6 GiB with --limit rss=16GiB, leaking ~250 MiB a day (10 minutes at 20 req/s,
    0.5 MiB of noise). 2% of the limit (328 MiB a day) would call it flat; a seventh of the 0.4 GiB left
    (58 MiB a day) matters: growing, and it says when it crosses the limit (~1.6 days)."""
    rng = np.random.default_rng(5)
    t, x = series(120)
    per_request = 250 * MIB / (20 * 86400)
    values = 15.6 * GIB + per_request * x + rng.normal(0, 0.5 * MIB, x.size)
    verdict = judge(RSS, t, list(x), list(values), steady_from_s=0, limit=16 * GIB, rate_rps=20.0,
                    limit_source="--limit")
    assert verdict.kind == "growing", verdict.text()
    assert verdict.matters == pytest.approx((16 * GIB - verdict.end) / 7)  # type: ignore[operator]
    assert verdict.limit_after_s is not None and 1.2 * 86400 < verdict.limit_after_s < 2.2 * 86400
    assert "reaches 16 GiB (--limit) after" in verdict.text() and "h at this rate" in verdict.text()


def test_false_alarms_on_flat_autocorrelated_noise_stay_under_5_percent() -> None:
    """200 flat series of AR(1) noise (phi 0.9, 4 MiB) on 8 GiB: growing/falling/bounded at most 5%."""
    rng = np.random.default_rng(11)
    t, x = series(96)
    kinds = [rss(8 * GIB + ar1(rng, x.size, 0.9, 4 * MIB), t, x, cut=0).kind for _ in range(200)]
    alarms = sum(kind in ("growing", "falling", "bounded") for kind in kinds)
    assert alarms <= 10, kinds


def test_latency_is_judged_by_what_it_does_in_a_day_and_against_the_slo() -> None:
    """p95 +2% over a 10-minute run (0.2 s, 20 slices of 30 s) is +0.58 s a day at this rate: growing,
    not "flat over the run"; with a 1 s SLO it says when p95 crosses it (~33 h). A p95 that only
    wobbles stays flat or can't tell, never growing."""
    p95 = next(s for s in SLICE_SIGNALS if s.key == "p95_latency_s")
    t, x = series(20, every_s=30.0)
    creeping = 0.2 + 0.0002 * np.arange(20)
    verdict = judge(p95, t, list(x), list(creeping), steady_from_s=0, rate_rps=20.0, limit=1.0,
                    limit_source="the SLO")
    assert verdict.kind == "growing" and verdict.horizon == "day", verdict.text()
    assert verdict.change is not None and verdict.change.value == pytest.approx(0.0002 / 30 * 86400, rel=0.01)
    assert verdict.limit_after_s is not None and verdict.limit_after_s == pytest.approx(
        (1.0 - creeping[-1]) / (0.0002 / 30), rel=0.02)
    text = verdict.text()
    assert "a day at this rate" in text and "an hour" in text and "reaches 1 s (the SLO) after" in text, text
    rng = np.random.default_rng(3)
    wobbling = [judge(p95, t, list(x), list(0.2 + rng.normal(0, 0.004, 20)), steady_from_s=0, rate_rps=20.0)
                for _ in range(40)]
    assert sum(v.kind in ("growing", "falling") for v in wobbling) <= 2, [v.kind for v in wobbling]


def test_few_samples_after_the_cut_say_so_and_missing_values_are_skipped() -> None:
    t, x = series(20)
    verdict = judge(RSS, t, list(x), [None] * 14 + [float(MIB)] * 6, steady_from_s=0)
    assert (verdict.kind, verdict.samples) == ("short", 6)
    assert "too few samples" in verdict.text()


def test_a_verdict_reads_itself_back() -> None:
    t, x = series(40)
    verdict = judge(RSS, t, list(x), list(MIB * np.arange(40.0) * 50), steady_from_s=0, limit=2**34,
                    rate_rps=20, limit_source="--limit")
    assert Verdict.from_dict(verdict.to_dict()) == verdict
