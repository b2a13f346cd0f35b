"""The simulator against closed-form queueing results, and the queue rules it mirrors."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from qbench.tune.search.batch_model import BatchFit
from qbench.tune.search.simulate import (
    ClosedArrivals,
    OpenArrivals,
    SimFunction,
    SimServer,
    lognormal_sigma,
    simulate,
)


def fit(t0: float, alpha: float = 0.0, t0_per_worker: float = 0.0) -> BatchFit:
    return BatchFit(t0, alpha, t0_per_worker, 0.0, 1.0, 2, 2)


def poisson(rate: float, n: int, seed: int = 1) -> OpenArrivals:
    return OpenArrivals(np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n)))


def erlang_c_wait(lam: float, mu: float, c: int) -> float:
    """Mean wait in queue of M/M/c (Erlang C)."""
    a = lam / mu
    rho = a / c
    tail = a**c / math.factorial(c) / (1 - rho)
    p_wait = tail / (sum(a**k / math.factorial(k) for k in range(c)) + tail)
    return p_wait / (c * mu - lam)


@pytest.mark.parametrize(("c", "rho"), [(1, 0.7), (2, 0.8), (4, 0.75)])
def test_mmc_mean_wait_matches_erlang_c(c: int, rho: float) -> None:
    service = 0.1
    lam = rho * c / service
    server = SimServer((SimFunction(fit(service), limit=c, exponential=True),), max_threads=40)
    waits = [simulate(server, poisson(lam, 40_000, seed), seed=seed).mean_wait_s for seed in (1, 2, 3)]
    expected = erlang_c_wait(lam, 1 / service, c)
    assert float(np.mean([w for w in waits if w is not None])) == pytest.approx(expected, rel=0.06)


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    service, rho = 0.05, 0.8
    lam = rho / service
    server = SimServer((SimFunction(fit(service), limit=1),))
    result = simulate(server, poisson(lam, 60_000))
    expected = rho * service / (2 * (1 - rho))
    assert result.mean_wait_s == pytest.approx(expected, rel=0.05)
    assert result.percentile(0) == pytest.approx(service)


@pytest.mark.parametrize(("k", "batch"), [(1, 4), (2, 8)])
def test_saturated_batched_throughput_is_k_b_over_l_of_b(k: int, batch: int) -> None:
    model = fit(0.02, 0.005)
    server = SimServer((SimFunction(model, limit=k, batch=True, max_batch_size=batch),))
    result = simulate(server, ClosedArrivals(users=4 * k * batch, duration_s=60))
    assert result.throughput_rps == pytest.approx(k * batch / model.service_s(batch, k), rel=0.02)
    assert result.mean_batch == pytest.approx(batch, rel=0.01)


def test_max_threads_caps_every_group() -> None:
    one = SimFunction(fit(0.1), group="a", limit=4, share=0.5)
    two = SimFunction(fit(0.1), group="b", limit=4, share=0.5)
    capped = simulate(SimServer((one, two), max_threads=2), ClosedArrivals(users=16, duration_s=30))
    free = simulate(SimServer((one, two), max_threads=40), ClosedArrivals(users=16, duration_s=30))
    assert capped.throughput_rps == pytest.approx(20, rel=0.05)
    assert 70 < free.throughput_rps <= 80.5  # 4 per group; a group is sometimes short of users


def test_shared_group_takes_the_lowest_limit_of_the_functions_called() -> None:
    one = SimFunction(fit(0.1), group="shared", limit=1, share=0.5)
    two = SimFunction(fit(0.1), group="shared", limit=3, share=0.5)
    result = simulate(SimServer((one, two)), ClosedArrivals(users=8, duration_s=30))
    assert result.throughput_rps == pytest.approx(10, rel=0.05)
    uncalled = simulate(SimServer((replace(one, share=0.0), two)), ClosedArrivals(users=8, duration_s=30))
    assert uncalled.throughput_rps == pytest.approx(30, rel=0.05)


def test_batch_wait_gathers_fuller_batches() -> None:
    model = fit(0.05, 0.001)
    greedy = SimFunction(model, limit=1, batch=True, max_batch_size=8)
    waiting = SimFunction(model, limit=1, batch=True, max_batch_size=8, batch_wait_s=0.2)
    arrivals = poisson(20, 2000)
    fuller = simulate(SimServer((waiting,)), arrivals).mean_batch
    assert fuller > simulate(SimServer((greedy,)), arrivals).mean_batch


def test_what_happens_at_one_instant_is_in_before_a_batch_starts() -> None:
    """Eight sends at one instant on a greedy batch of 4 (l(b) = 50 + 10 b ms): two full batches, the
    second waiting the first's 90 ms; three closed-loop users with no think time send again at their
    batch's end, and each batch holds all three (before, the first arrival started a batch alone)."""
    batched = SimFunction(fit(0.05, 0.01), limit=1, batch=True, max_batch_size=4)
    burst = simulate(SimServer((batched,)), OpenArrivals(np.zeros(8)))
    assert burst.batch_sizes == [4, 4]
    assert sorted(np.round(burst.latencies_s, 6)) == [0.09] * 4 + [0.18] * 4
    closed = simulate(SimServer((batched,)), ClosedArrivals(users=3, duration_s=1.0))
    assert closed.batch_sizes and set(closed.batch_sizes) == {3}


def test_max_size_rejects_and_unstable_runs_end() -> None:
    server = SimServer((SimFunction(fit(0.1), limit=1),), max_size=5)
    result = simulate(server, poisson(50, 500), timeout_s=5)
    assert result.rejected > 0
    assert result.sent == 500
    unbounded = simulate(SimServer((SimFunction(fit(0.1), limit=1),)), poisson(50, 500), timeout_s=2)
    assert unbounded.error_rate > 0.5


def test_lognormal_spread_keeps_the_mean_and_is_estimated() -> None:
    server = SimServer((SimFunction(fit(0.1), limit=1, sigma=0.3),))
    result = simulate(server, OpenArrivals(np.arange(4000) * 1.0))
    assert float(result.latencies_s.mean()) == pytest.approx(0.1, rel=0.03)
    assert lognormal_sigma(list(result.latencies_s / 0.1)) == pytest.approx(0.3, rel=0.1)
