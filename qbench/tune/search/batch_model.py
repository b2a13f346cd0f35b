"""A fitted batch-latency model, l(b, k) = t0_k + alpha_k * b (b requests, k workers), and its predictions:
throughput, latency, capacity under an SLO. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_SERVICE_S = 1e-4


@dataclass(frozen=True)
class Observation:
    """One measured batch shape: mean batch size, its service time, the point's worker count."""

    batch_size: float
    service_s: float
    workers: int
    weight: float = 1.0


@dataclass(frozen=True)
class PointLoad:
    """What the model needs to know about a grid point."""

    workers: int  # k = min(concurrency_limit, max_threads)
    max_batch: int  # B (1 without batching)
    rate_rps: float | None = None  # open-loop arrival rate
    users: int | None = None  # closed-loop users
    think_s: float = 0.0
    threads: int = 40  # max_threads (for the memory model)


@dataclass(frozen=True)
class Prediction:
    batch_size: float
    service_s: float
    throughput_rps: float
    mean_latency_s: float | None  # None: the queue grows without bound
    p95_latency_s: float | None


@dataclass(frozen=True)
class BatchFit:
    t0_s: float
    alpha_s: float
    t0_per_worker_s: float
    alpha_per_worker_s: float
    r2: float
    observations: int
    batch_sizes: int  # distinct batch sizes observed
    rel_error: float = 0.0  # weighted RMS residual / weighted mean service time

    def service_s(self, b: float, k: int) -> float:
        extra = max(k - 1, 0)
        t0 = self.t0_s + self.t0_per_worker_s * extra
        alpha = self.alpha_s + self.alpha_per_worker_s * extra
        return max(t0 + alpha * b, MIN_SERVICE_S)

    def coefficients(self, k: int) -> tuple[float, float]:
        """(t0_k, alpha_k): l(b) = t0_k + alpha_k * b at k workers (t0_k kept positive)."""
        extra = max(k - 1, 0)
        alpha = self.alpha_s + self.alpha_per_worker_s * extra
        t0 = self.t0_s + self.t0_per_worker_s * extra
        return max(t0, MIN_SERVICE_S), alpha

    def to_dict(self) -> dict[str, Any]:
        return {
            "formula": "l(b, k) = (t0 + t0_per_worker*(k-1)) + (alpha + alpha_per_worker*(k-1)) * b",
            "t0_s": self.t0_s,
            "alpha_s": self.alpha_s,
            "t0_per_worker_s": self.t0_per_worker_s,
            "alpha_per_worker_s": self.alpha_per_worker_s,
            "r2": self.r2,
            "rel_error": self.rel_error,
            "observations": self.observations,
            "batch_sizes": self.batch_sizes,
        }


class FitError(ValueError):
    """The observations cannot support a fit (the search falls back to smart search)."""


def fit_batch_model(observations: Sequence[Observation]) -> BatchFit:
    """Weighted least squares of l(b, k), k terms only where identified; FitError under 2 batch sizes."""
    obs = [o for o in observations if o.service_s > 0 and o.batch_size > 0 and o.weight > 0]
    sizes = {round(o.batch_size, 1) for o in obs}
    if len(sizes) < 2:
        raise FitError(f"{len(sizes)} distinct batch size(s) observed; the fit needs at least 2")
    b = np.array([o.batch_size for o in obs])
    extra = np.array([max(o.workers - 1, 0) for o in obs], dtype=np.float64)
    y = np.array([o.service_s for o in obs])
    w = np.sqrt(np.array([o.weight for o in obs]))
    columns = [np.ones_like(b), b]
    if len({o.workers for o in obs}) >= 2:
        columns.append(extra)
        if len(obs) >= 5 and _identified([*columns, b * extra]):
            columns.append(b * extra)
    design = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(design * w[:, None], y * w, rcond=None)
    coef = list(coef) + [0.0] * (4 - len(coef))
    residual = y - design @ np.array(coef[: design.shape[1]])
    total = float(np.sum(w**2 * (y - np.average(y, weights=w**2)) ** 2))
    scale = float(np.sum(w**2 * y**2))
    # constant service times (total ~ 0 up to rounding) are fitted exactly by the intercept: R^2 = 1
    r2 = 1.0 - float(np.sum(w**2 * residual**2)) / total if total > 1e-12 * scale else 1.0
    mean = float(np.average(y, weights=w**2))
    rel_error = math.sqrt(float(np.average(residual**2, weights=w**2))) / mean if mean > 0 else 0.0
    return BatchFit(float(coef[0]), float(coef[1]), float(coef[2]), float(coef[3]), r2, len(obs), len(sizes),
                    rel_error)


def _identified(columns: Sequence[Any]) -> bool:
    """Whether the observations tell each column's coefficient apart (full column rank)."""
    design = np.column_stack(columns)
    return bool(int(np.linalg.matrix_rank(design)) == int(design.shape[1]))


def untrusted(fit: BatchFit, min_r2: float = 0.8, max_rel_error: float = 0.15) -> str:
    """Why not to trust `fit` ("" = trust it): R^2 under `min_r2` and residual over `max_rel_error`."""
    if fit.r2 >= min_r2 or fit.rel_error <= max_rel_error:
        return ""
    return (f"poor fit: R^2 {fit.r2:.2f} < {min_r2} and residuals {fit.rel_error:.0%} of the service time "
            f"> {max_rel_error:.0%}")


# ---------------------------------------------------------------- predictions


def predict(fit: BatchFit, load: PointLoad) -> Prediction:
    """Throughput and latency of one configuration under its load (latency None: unbounded queue)."""
    k, cap = max(load.workers, 1), max(load.max_batch, 1)
    x_max = k * cap / fit.service_s(cap, k)
    if load.rate_rps is not None:
        return _open_loop(fit, k, cap, load.rate_rps)
    if load.users is not None and load.think_s > 0:
        return _closed_loop_thinking(fit, k, cap, load.users, load.think_s)
    if load.users is not None:
        return _closed_loop(fit, k, cap, load.users)
    service = fit.service_s(cap, k)
    return Prediction(cap, service, x_max, 1.5 * service, 2 * service)


def _open_loop(fit: BatchFit, k: int, cap: int, rate: float) -> Prediction:
    x_max = k * cap / fit.service_s(cap, k)
    if rate >= x_max:
        return Prediction(cap, fit.service_s(cap, k), x_max, None, None)
    t0, alpha = fit.coefficients(k)
    denominator = k - rate * alpha
    b_star = rate * t0 / denominator if denominator > 0 else float(cap)
    b = min(max(b_star, 1.0), float(cap))
    service = fit.service_s(b, k)
    return Prediction(b, service, rate, 1.5 * service, 2 * service)


def _closed_loop(fit: BatchFit, k: int, cap: int, users: int) -> Prediction:
    b = min(max(users / k, 1.0), float(cap))
    busy = min(k, users)
    service = fit.service_s(b, k)
    throughput = busy * b / service
    mean = users / throughput
    return Prediction(b, service, throughput, mean, max(mean, 1.5 * service))


def _closed_loop_thinking(fit: BatchFit, k: int, cap: int, users: int, think_s: float) -> Prediction:
    x_max = k * cap / fit.service_s(cap, k)
    response = fit.service_s(1, k)
    result = _open_loop(fit, k, cap, users / (response + think_s))
    for _ in range(50):
        rate = min(users / (response + think_s), 0.999 * x_max)
        result = _open_loop(fit, k, cap, rate)
        mean = result.mean_latency_s if result.mean_latency_s is not None else users / x_max
        mean = max(mean, users / x_max - think_s)  # a saturated server holds the rest in its queue
        if math.isclose(mean, response, rel_tol=1e-4):
            break
        response = 0.5 * (response + mean)
    return Prediction(
        result.batch_size,
        result.service_s,
        users / (response + think_s),
        response,
        max(response, 2 * result.service_s),
    )


# latency bounds a prediction can be held to: the open-loop model has a mean and a p95 (p99 taken as p95)
PREDICTED_BOUNDS = {"p50_latency_s": "mean", "mean_latency_s": "mean", "p95_latency_s": "p95",
                    "p99_latency_s": "p95"}


def predicted_capacity(
    fit: BatchFit, load: PointLoad, slo: dict[str, float], steps: int = 30
) -> float | None:
    """The highest open-loop rate meeting the SLO's predictable bounds (None: even a trickle fails)."""
    bounds = {PREDICTED_BOUNDS[m]: b for m, b in slo.items() if m in PREDICTED_BOUNDS}
    k, cap = max(load.workers, 1), max(load.max_batch, 1)
    x_max = k * cap / fit.service_s(cap, k)

    def meets(rate: float) -> bool:
        p = _open_loop(fit, k, cap, rate)
        if p.mean_latency_s is None or p.p95_latency_s is None:
            return False  # at or past X_max: the queue grows without bound
        figures = {"mean": p.mean_latency_s, "p95": p.p95_latency_s}
        return all(figures[name] <= bound for name, bound in bounds.items())

    low, high = 1e-3 * x_max, (1 - 1e-6) * x_max
    if not meets(low):
        return None
    if meets(high):
        return high
    for _ in range(steps):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if meets(middle) else (low, middle)
    return low
