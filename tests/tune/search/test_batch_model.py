"""qbench.tune.search.batch_model: the l(b, k) fit and what it predicts, against closed forms.

The fit on the sleep workload, the open- and closed-loop predictions at a few loads and the SLO capacity
with a p95 bound run in test_search_model.py; this file covers the rest of the module's contract."""

from __future__ import annotations

import pytest

from qbench.tune.search.batch_model import (
    MIN_SERVICE_S,
    BatchFit,
    FitError,
    Observation,
    PointLoad,
    fit_batch_model,
    predict,
    predicted_capacity,
    untrusted,
)

# l(b, k) = (0.04 + 0.01 (k-1)) + (0.006 + 0.002 (k-1)) b
FIT = BatchFit(0.04, 0.006, 0.01, 0.002, r2=1.0, observations=5, batch_sizes=2)
LINE = BatchFit(0.05, 0.01, 0.0, 0.0, r2=1.0, observations=2, batch_sizes=2)  # l(b) = 0.05 + 0.01 b


@pytest.mark.parametrize(
    ("b", "k", "expected"),
    [(1, 1, 0.046), (8, 1, 0.088), (1, 3, 0.06 + 0.01), (4, 3, 0.06 + 0.01 * 4), (2, 0, 0.052)],
)
def test_service_time_adds_the_per_worker_terms(b: float, k: int, expected: float) -> None:
    assert FIT.service_s(b, k) == pytest.approx(expected)  # k = 0 counts as one worker


def test_service_time_and_t0_are_kept_positive() -> None:
    negative = BatchFit(-0.5, 0.01, 0.0, 0.0, r2=1.0, observations=2, batch_sizes=2)
    assert negative.service_s(1, 1) == MIN_SERVICE_S
    assert negative.coefficients(1) == (MIN_SERVICE_S, 0.01)
    assert FIT.coefficients(3) == pytest.approx((0.06, 0.01))


def test_to_dict_names_the_formula_and_every_coefficient() -> None:
    out = FIT.to_dict()
    assert out["formula"].startswith("l(b, k) = ")
    assert (out["t0_s"], out["alpha_s"], out["t0_per_worker_s"], out["alpha_per_worker_s"]) == (
        0.04, 0.006, 0.01, 0.002)
    assert (out["r2"], out["rel_error"], out["observations"], out["batch_sizes"]) == (1.0, 0.0, 5, 2)


def test_unusable_observations_are_dropped_before_the_fit() -> None:
    good = [Observation(1, 0.06, 1), Observation(8, 0.13, 1)]
    junk = [Observation(4, 0.0, 1), Observation(0, 0.1, 1), Observation(2, 5.0, 1, weight=0.0)]
    fit = fit_batch_model(good + junk)
    assert (fit.observations, fit.batch_sizes) == (2, 2)
    assert (fit.t0_s, fit.alpha_s) == pytest.approx((0.05, 0.01))


@pytest.mark.parametrize("sizes", [[], [4.0], [4.0, 4.04]])  # sizes are told apart to 0.1
def test_fewer_than_two_distinct_batch_sizes_cannot_be_fitted(sizes: list[float]) -> None:
    with pytest.raises(FitError, match=f"{len(set(round(s, 1) for s in sizes))} distinct batch size"):
        fit_batch_model([Observation(b, 0.05 + 0.01 * b, 1) for b in sizes])


def test_one_worker_count_fits_no_contention_terms() -> None:
    fit = fit_batch_model([Observation(b, 0.05 + 0.01 * b + (0.01 if b == 4 else 0), 2) for b in (1, 4, 8)])
    assert (fit.t0_per_worker_s, fit.alpha_per_worker_s) == (0.0, 0.0) and fit.r2 < 1.0


def test_four_observations_fit_a_per_worker_t0_but_no_per_worker_slope() -> None:
    # truth: t0 grows 0.02 per extra worker, alpha does not; 4 observations over k = 1, 3
    obs = [Observation(b, 0.05 + 0.02 * (k - 1) + 0.01 * b, k) for b, k in [(1, 1), (8, 1), (1, 3), (8, 3)]]
    fit = fit_batch_model(obs)
    assert fit.t0_per_worker_s == pytest.approx(0.02) and fit.alpha_per_worker_s == 0.0
    assert fit.service_s(4, 2) == pytest.approx(0.05 + 0.02 + 0.04)


def test_one_batch_size_at_one_worker_count_leaves_the_per_worker_slope_out() -> None:
    """The model search's design on concurrency 1-2 x batch 1-16 (seen on a busy box): batch 8 alone at
    k = 1, four batch sizes at k = 2. Those do not tell k = 1's alpha from its t0, so no b x k term:
    the fit keeps one alpha (the truth's 0.01 s per request), not a minimum-norm guess at it."""
    truth = [(8, 1, 0.137), (1, 2, 0.062), (4, 2, 0.088), (8, 2, 0.128), (16, 2, 0.210)]
    fit = fit_batch_model([Observation(b, s, k) for b, k, s in truth])
    assert fit.alpha_per_worker_s == 0.0 and fit.observations == 5
    assert 0.005 < fit.alpha_s < 0.015 and 0.03 < fit.t0_s < 0.07 and fit.r2 > 0.95
    # the same five with a second batch size at k = 1 identify the slope per worker count
    both = fit_batch_model([Observation(b, 0.05 + 0.01 * b + 0.004 * b * (k - 1), k)
                            for b, k in [(1, 1), (8, 1), (1, 2), (4, 2), (16, 2)]])
    assert both.alpha_per_worker_s == pytest.approx(0.004) and both.alpha_s == pytest.approx(0.01)


def test_weights_pull_the_fit_toward_the_heavier_observation() -> None:
    light = fit_batch_model([Observation(1, 0.06, 1), Observation(8, 0.13, 1), Observation(8, 0.20, 1)])
    heavy = fit_batch_model([Observation(1, 0.06, 1), Observation(8, 0.13, 1, weight=9.0),
                             Observation(8, 0.20, 1)])
    # at b = 8 the weighted least squares lands on the weighted mean of the two service times
    assert light.service_s(8, 1) == pytest.approx((0.13 + 0.20) / 2)
    assert heavy.service_s(8, 1) == pytest.approx((9 * 0.13 + 0.20) / 10)
    assert light.rel_error > heavy.rel_error > 0


def test_a_constant_service_time_fits_exactly_with_r2_one() -> None:
    fit = fit_batch_model([Observation(b, 0.02, 1) for b in (1, 2, 8)])
    assert fit.t0_s == pytest.approx(0.02) and fit.alpha_s == pytest.approx(0.0, abs=1e-12)
    assert fit.r2 == 1.0 and fit.rel_error == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    ("r2", "rel_error", "trusted"),
    [(0.8, 0.5, True), (0.1, 0.15, True), (0.79, 0.16, False)],
)
def test_untrusted_needs_both_a_low_r2_and_large_residuals(
    r2: float, rel_error: float, trusted: bool
) -> None:
    fit = BatchFit(0.05, 0.01, 0.0, 0.0, r2, 3, 3, rel_error)
    reason = untrusted(fit)
    assert (reason == "") is trusted
    if not trusted:
        assert reason == "poor fit: R^2 0.79 < 0.8 and residuals 16% of the service time > 15%"


def test_untrusted_thresholds_are_parameters() -> None:
    fit = BatchFit(0.05, 0.01, 0.0, 0.0, 0.9, 3, 3, 0.2)
    assert untrusted(fit) == "" and untrusted(fit, min_r2=0.95, max_rel_error=0.1).startswith("poor fit")


def test_an_unknown_load_is_predicted_at_saturation() -> None:
    p = predict(LINE, PointLoad(workers=2, max_batch=8))
    assert (p.batch_size, p.service_s) == pytest.approx((8, 0.13))
    assert p.throughput_rps == pytest.approx(2 * 8 / 0.13)
    assert (p.mean_latency_s, p.p95_latency_s) == pytest.approx((1.5 * 0.13, 2 * 0.13))


def test_zero_workers_and_batch_cap_count_as_one() -> None:
    assert predict(LINE, PointLoad(workers=0, max_batch=0)) == predict(LINE, PointLoad(1, 1))


def test_the_open_loop_is_unstable_exactly_at_x_max() -> None:
    x_max = 4 / LINE.service_s(4, 1)  # k B / l(B) with k = 1, B = 4: 4 / 0.09
    at = predict(LINE, PointLoad(1, 4, rate_rps=x_max))
    assert at.mean_latency_s is None and at.p95_latency_s is None and at.batch_size == 4
    # just below it is stable, and b* = r t0 / (k - r alpha) reaches the cap B as r reaches X_max
    below = predict(LINE, PointLoad(1, 4, rate_rps=0.999 * x_max))
    rate = 0.999 * x_max
    assert below.batch_size == pytest.approx(rate * 0.05 / (1 - rate * 0.01)) and below.batch_size < 4
    assert below.throughput_rps == pytest.approx(rate) and below.p95_latency_s is not None


def test_fewer_users_than_workers_keep_only_that_many_busy() -> None:
    p = predict(LINE, PointLoad(workers=8, max_batch=4, users=3))
    assert p.batch_size == 1 and p.throughput_rps == pytest.approx(3 / 0.06)
    assert p.mean_latency_s == pytest.approx(0.06) and p.p95_latency_s == pytest.approx(1.5 * 0.06)


def test_think_time_reaches_the_open_loop_fixed_point() -> None:
    """U users thinking Z: the offered rate U / (R + Z) and the open-loop latency R at that rate agree."""
    users, think = 20, 2.0
    p = predict(LINE, PointLoad(1, 8, users=users, think_s=think))
    assert p.mean_latency_s is not None
    rate = users / (p.mean_latency_s + think)
    open_loop = predict(LINE, PointLoad(1, 8, rate_rps=rate))
    assert p.throughput_rps == pytest.approx(rate)
    assert open_loop.mean_latency_s == pytest.approx(p.mean_latency_s, rel=1e-3)
    assert p.batch_size == pytest.approx(open_loop.batch_size, rel=1e-3)


def test_think_time_past_saturation_queues_the_rest() -> None:
    """1000 users thinking 1 s against X_max = 8 / 0.13 = 61.5 req/s: the response time is what the queue
    holds, U / X_max - Z, and the throughput X_max."""
    x_max = 8 / 0.13
    p = predict(LINE, PointLoad(1, 8, users=1000, think_s=1.0))
    assert p.mean_latency_s == pytest.approx(1000 / x_max - 1.0, rel=1e-3)
    assert p.throughput_rps == pytest.approx(x_max, rel=1e-3)
    assert p.p95_latency_s == p.mean_latency_s


def test_predicted_capacity_under_a_median_bound() -> None:
    """l(b) = 40 ms + 6 ms x b on 4 workers, B = 32, p50 ~ 1.5 l(b*) <= 0.15 s: l(b*) = 0.1 s at b* = 10,
    so 10 (4 - 0.006 r) = 0.04 r, r = 400 req/s (X_max = 128 / 0.232 = 552)."""
    fit = BatchFit(0.04, 0.006, 0.0, 0.0, 1.0, 2, 2)
    load = PointLoad(workers=4, max_batch=32)
    for metric in ("p50_latency_s", "mean_latency_s"):
        assert predicted_capacity(fit, load, {metric: 0.15}) == pytest.approx(400, rel=1e-3)
    # with a p95 bound as well the tighter one binds: 2 l(b*) <= 0.15 -> l(b*) = 0.075, b* = 35/6
    both = predicted_capacity(fit, load, {"p50_latency_s": 0.15, "p99_latency_s": 0.15})
    b_star = 35 / 6
    assert both == pytest.approx(4 * b_star / (0.04 + 0.006 * b_star), rel=1e-3)


def test_predicted_capacity_without_bounds_is_just_below_x_max() -> None:
    found = predicted_capacity(LINE, PointLoad(workers=2, max_batch=8), {})
    assert found is not None and 2 * 8 / 0.13 * (1 - 1e-5) < found < 2 * 8 / 0.13
