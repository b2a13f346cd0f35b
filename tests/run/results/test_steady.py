"""Steady state: simulated queues whose sustainable rate is known (k workers x a fixed service time)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from qbench.run.records.schema import RequestRecord
from qbench.run.results.steady import (
    LiveTrend,
    Steadiness,
    Trend,
    judge_steady,
    probe_seconds,
    steadiness,
    trend,
)


def queue(rate: float, seconds: float, workers: int = 4, service_s: float = 0.1, seed: int = 0,
          start_events: bool = True) -> list[RequestRecord]:
    """Poisson arrivals at `rate` into `workers` FIFO servers of `service_s` (ceiling workers / service)."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, seconds, int(rate * seconds)))
    free = [0.0] * workers
    records = []
    for i, at in enumerate(arrivals):
        w = int(np.argmin(free))
        start = max(float(at), free[w])
        free[w] = start + service_s
        records.append(RequestRecord(
            request_id=i, user_id=0, session_id="s", endpoint="e", warmup=at < 0.5, intended_at_s=float(at),
            sent_at_s=float(at), started_at_s=start if start_events else None, completed_at_s=free[w],
            outcome="ok"))
    return records


def steady_share(rate: float, seconds: float, runs: int = 12, **kw: float) -> float:
    results = [steadiness(queue(rate, seconds, seed=seed), **kw) for seed in range(runs)]
    return sum(bool(r and r.steady) for r in results) / runs


def test_a_server_below_its_ceiling_is_steady() -> None:
    assert steady_share(30, 10) == 1.0  # 75% of 40 req/s
    assert steady_share(36, 12) >= 0.8  # 90%: noisy, mostly steady


@pytest.mark.parametrize("rate", [46, 52, 80])
def test_a_server_above_its_ceiling_is_not(rate: float) -> None:
    assert steady_share(rate, 12) == 0.0


def test_the_verdict_carries_the_evidence() -> None:
    found = steadiness(queue(48, 10), margin=0.025)
    assert found is not None and not found.steady
    assert found.verdict.startswith("not steady, ") and "backlog +" in found.verdict
    assert found.arrival_rps == pytest.approx(48, rel=0.05) and found.completion_rps < 41
    assert found.backlog is not None and found.backlog.slope > 3 * found.backlog.se
    again = Steadiness.from_dict(found.to_dict())
    assert again == found and found.to_dict()["evidence"].startswith("arrivals 4")


def test_without_start_events_the_latency_trend_is_used() -> None:
    found = steadiness(queue(48, 10, start_events=False))
    assert found is not None and found.wait_name == "latency" and not found.steady


def test_too_few_requests_are_not_judged_and_requests_left_unfinished_stay_in_the_backlog() -> None:
    assert steadiness(queue(2, 5)) is None
    records = queue(30, 10)
    for r in records[len(records) // 2:]:  # the second half never finished: the run ended first
        r.outcome, r.error_kind = "error", "deadline"
    found = steadiness(records)
    assert found is not None and not found.steady


def test_a_trend_is_a_slope_with_its_standard_error() -> None:
    t = np.linspace(0, 10, 200)
    line = trend(t, 3 * t + np.random.default_rng(0).normal(0, 1, t.size))
    assert line is not None and line.slope == pytest.approx(3, abs=0.2) and line.up(1.0)
    flat = trend(t, np.random.default_rng(1).normal(0, 1, t.size))
    assert flat is not None and not flat.up(0.1)
    assert trend([1.0, 2.0], [1.0, 2.0]) is None


def test_the_probe_length_makes_an_overload_of_the_tolerance_certain() -> None:
    seconds = probe_seconds(40, 0.1)
    growth, noise = 0.1 / 1.1 * 40 * seconds, (40 * seconds) ** 0.5
    assert growth == pytest.approx(2 * noise) and 10 < seconds < 15
    assert probe_seconds(40, 0.05) > 3 * seconds  # half the tolerance: four times as long (about)


def test_live_trend_stops_a_slow_overload_but_not_a_server_keeping_up() -> None:
    def feed(arrivals: float, completions: float) -> str | None:
        live, t = LiveTrend(margin=0.025), 0.0
        while t <= 20:
            reason = live.check(t, int(arrivals * t), int(min(completions, arrivals) * t))
            if reason:
                return reason
            t += 0.25
        return None

    assert feed(44, 40) is not None and "not steady, backlog" in (feed(44, 40) or "")
    assert feed(40, 40) is None and feed(39.5, 40) is None


# ---------------------------------------------------------------- a slow drift that certainly grows


def leaking(rate: float, seconds: float, leak_rps: float, seed: int = 0) -> list[RequestRecord]:
    """`queue` (4 x 0.1 s at `rate`) plus, every 1 / `leak_rps` s, a request that starts at once and is
    still on the server when the run ends: the backlog grows at exactly `leak_rps`, the wait stays flat."""
    records = queue(rate, seconds, seed=seed)
    for k, at in enumerate(np.arange(0.6, seconds, 1 / leak_rps)):
        records.append(RequestRecord(
            request_id=len(records) + k, user_id=0, session_id="s", endpoint="e", warmup=False,
            intended_at_s=float(at), sent_at_s=float(at), started_at_s=float(at),
            completed_at_s=seconds + 30, outcome="ok"))
    return records


def test_a_backlog_certainly_growing_by_a_fifth_per_second_is_not_steady_against_a_wait_bound() -> None:
    """The issue's confirmation: backlog +0.19/s, certain, under the overload threshold (2.5% of the
    arrivals): at ~24 completions/s it adds the SLO's 1 s of wait every two minutes."""
    records = leaking(24, 60, 0.2)
    found = steadiness(records, margin=0.025, bound_s=1.0)
    assert found is not None and found.backlog is not None
    assert found.backlog.slope == pytest.approx(0.2, abs=0.06) and found.backlog.slope > 3 * found.backlog.se
    assert found.backlog.slope < 0.025 * found.arrival_rps  # under the overload threshold ...
    assert not found.steady  # ... but certain, and it matters within the hour
    assert "certainly growing: +1 s of queue wait (the SLO's bound) every" in found.verdict
    assert Steadiness.from_dict(found.to_dict()) == found
    unbounded = steadiness(records, margin=0.025)  # no bound to weigh it against: the overload rule alone
    assert unbounded is not None and unbounded.steady


def test_the_issues_confirmation_evidence_is_not_steady() -> None:
    """arrivals 24.2/s, backlog +0.19/s +- 0.03: called steady before, with a 1 s SLO it is not."""
    issue = Steadiness(True, 60.0, 1452, 1440, 24.2, 24.0, 0.025, backlog=Trend(0.19, 0.03),
                       wait=Trend(0.004, 0.003), bound_s=1.0)
    assert judge_steady(issue) and judge_steady(issue)[0].startswith("backlog +0.19/s")
    noisy = replace(issue, backlog=Trend(0.19, 0.08))  # not certain at 3 standard errors
    assert judge_steady(noisy) == []
    tiny = replace(issue, backlog=Trend(0.005, 0.001))  # certain, but 1 s of wait takes over an hour
    assert judge_steady(tiny) == []
    short = replace(issue, window_s=5.0, backlog=Trend(0.5, 0.1))  # a 5 s probe's queue filling up:
    assert judge_steady(short) == []  # certain, but 2.5 requests in the window, not a drift


def test_a_queue_wait_certainly_drifting_up_is_not_steady() -> None:
    issue = Steadiness(True, 60.0, 1452, 1452, 24.2, 24.2, 0.025, backlog=Trend(0.0, 0.05),
                       wait=Trend(0.01, 0.002), bound_s=1.0)
    assert judge_steady(issue) and "queue wait +0.01 s/s" in judge_steady(issue)[0]
    assert judge_steady(replace(issue, bound_s=None)) == []  # under the overload margin, no bound


@pytest.mark.parametrize(("rate", "share"), [(30, 1.0), (34, 0.9)])
def test_a_flat_noisy_backlog_stays_steady_against_a_wait_bound(rate: float, share: float) -> None:
    """75% and 85% of the ceiling, 60 s runs: the drift rule does not mistake a queue's noise for growth."""
    assert steady_share(rate, 60, bound_s=1.0) >= share
