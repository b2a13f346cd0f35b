"""A trend's interval under autocorrelated noise (qbench.run.results.serial_trend): its coverage on
generated AR(1) series, the O(n) product with R against the dense matrix, exact lines and long series."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qbench.run.results import serial_trend
from qbench.run.results.serial_trend import fit


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    out = np.empty(n)
    out[0] = rng.normal()
    shocks = rng.normal(0, math.sqrt(1 - phi * phi), n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


@pytest.mark.parametrize(("n", "phi"), [(36, 0.0), (36, 0.9), (96, 0.5), (96, 0.95)])
def test_the_interval_covers_the_true_slope_about_95_percent_of_the_time(n: int, phi: float) -> None:
    """150 series each; batch means covered 53-78% of them at phi 0.9-0.95, this covers >= 90%."""
    rng = np.random.default_rng(n + int(phi * 100))
    t = np.arange(n) * 5.0
    covered, up = 0, 0
    for _ in range(150):
        trend = fit(t, 0.3 * t + ar1(rng, n, phi))
        assert trend is not None
        covered += trend.low <= 0.3 <= trend.high
        up += trend.low > 0.3
    assert covered >= 135 and up <= 8, (covered, up)


def test_r_times_a_vector_is_the_dense_product() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(50, 2))
    lags = np.abs(np.subtract.outer(np.arange(50), np.arange(50)))
    for phi in (0.0, 0.3, 0.97):
        assert np.allclose(serial_trend._times_r(phi, a), np.power(phi, lags) @ a)


def test_an_exact_line_has_no_interval_and_too_few_points_no_trend() -> None:
    t = np.arange(20.0)
    trend = fit(t, 3.0 + 2.0 * t)
    assert trend is not None and trend.slope == pytest.approx(2.0) and trend.half == pytest.approx(0.0)
    assert fit(t[:5], t[:5]) is None and fit(np.ones(10), np.arange(10.0)) is None


def test_a_day_of_samples_is_averaged_down_and_keeps_its_slope() -> None:
    rng = np.random.default_rng(2)
    t = np.arange(17_280) * 5.0  # a day every 5 s
    trend = fit(t, 1e-3 * t + ar1(rng, t.size, 0.9))
    assert trend is not None and trend.n == serial_trend.MAX_POINTS
    assert trend.low <= 1e-3 <= trend.high and trend.certain_up


def test_white_noise_is_read_as_white_and_strong_memory_as_strong() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(200.0)
    white, sticky = fit(t, rng.normal(size=200)), fit(t, ar1(rng, 200, 0.9))
    assert white is not None and sticky is not None
    assert white.phi < 0.35 and sticky.phi > 0.75
