"""A straight-line trend through autocorrelated samples (`fit`), with a 95% interval that keeps its
coverage under AR(1) noise. Method and measured coverage: docs/design/records-and-results.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_POINTS = 5000  # longer series are averaged down to this many equal-count blocks first
MIN_POINTS = 6
PHI_MAX = 0.995
PHI_SE = 1.645  # phi used: the estimate + this many of its standard errors (a one-sided 95% bound)
# Two-sided 95% quantiles of Student's t by degrees of freedom; 1.96 beyond.
T95 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


@dataclass(frozen=True)
class SerialTrend:
    """A slope (per unit of x) with its 95% interval under AR(1) noise, and what it rests on."""

    slope: float
    se: float  # the slope's standard error under phi
    half: float  # half the 95% interval: t(df) x se
    phi: float  # the noise's lag-1 autocorrelation used (conservative: its one-sided 95% bound)
    n: int  # points fitted (after any block averaging)
    df: float  # degrees of freedom of the t quantile (n_eff - 2)

    @property
    def low(self) -> float:
        return self.slope - self.half

    @property
    def high(self) -> float:
        return self.slope + self.half

    @property
    def certain_up(self) -> bool:
        return self.low > 0

    @property
    def certain_down(self) -> bool:
        return self.high < 0


def t95(df: float) -> float:
    """Student's t two-sided 95% quantile (the next lower tabled degrees of freedom: conservative)."""
    if df >= 120:
        return 1.96
    keys = [k for k in T95 if k <= max(df, 2.0)]
    return T95[max(keys)]


def fit(x: Sequence[float] | np.ndarray, v: Sequence[float] | np.ndarray) -> SerialTrend | None:
    """The trend of `v` against `x` (samples in time order); None with too few points or no spread."""
    xs, vs = _reduce(np.asarray(x, dtype=np.float64), np.asarray(v, dtype=np.float64))
    n = xs.size
    if n < MIN_POINTS:
        return None
    xc = xs - xs.mean()
    sxx = float(xc @ xc)
    if sxx <= 0:
        return None
    slope = float(xc @ (vs - vs.mean())) / sxx
    resid = vs - vs.mean() - slope * xc
    design = np.column_stack([np.ones(n), xc])
    gram_inv = np.linalg.inv(design.T @ design)
    rr = float(resid @ resid)
    if rr <= 0:  # an exact line: no noise to speak of
        return SerialTrend(slope, 0.0, 0.0, 0.0, n, float(n - 2))
    observed = float(resid[1:] @ resid[:-1]) / rr
    phi = _phi(observed, design, gram_inv)
    phi = min(PHI_MAX, phi + PHI_SE * math.sqrt(max(1.0 - phi * phi, 0.0) / n))
    s2 = rr / _trace_mr(phi, design, gram_inv)
    w = xc / sxx
    se = math.sqrt(max(s2 * float(w @ _times_r(phi, w)), 0.0))
    df = max(n * (1 - phi) / (1 + phi), 4.0) - 2
    return SerialTrend(slope, se, t95(df) * se, phi, n, df)


def _reduce(x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Over MAX_POINTS samples: the means of MAX_POINTS equal-count blocks (time order kept)."""
    if x.size <= MAX_POINTS:
        return x, v
    parts = np.array_split(np.arange(x.size), MAX_POINTS)
    return np.array([x[p].mean() for p in parts]), np.array([v[p].mean() for p in parts])


def _times_r(phi: float, a: np.ndarray) -> np.ndarray:
    """R(phi) a, R_ij = phi^|i-j|, in O(n): a forward and a backward AR(1) filter, less the diagonal."""
    if phi == 0:
        return a
    from scipy.signal import lfilter  # here: its import is ~65 MiB, for soak verdicts only

    forward = lfilter([1.0], [1.0, -phi], a, axis=0)
    backward = lfilter([1.0], [1.0, -phi], a[::-1], axis=0)[::-1]
    return np.asarray(forward + backward - a)


def _lag(a: np.ndarray) -> np.ndarray:
    """L a, L with 1/2 on both off-diagonals."""
    out = np.zeros_like(a)
    out[:-1] += a[1:] / 2
    out[1:] += a[:-1] / 2
    return out


def _trace_mr(phi: float, design: np.ndarray, gram_inv: np.ndarray) -> float:
    """tr(M R) = tr(R) - tr((X'X)^-1 X'RX): the residuals' expected sum of squares per unit variance."""
    return float(design.shape[0]) - float(np.trace(gram_inv @ (design.T @ _times_r(phi, design))))


def _expected_lag1(phi: float, design: np.ndarray, gram_inv: np.ndarray) -> float:
    """E[sum r_i r_(i+1)] / E[sum r_i^2] for residuals of AR(1) noise of `phi`: tr(M L M R) / tr(M R),
    M = I - X G X' (G = (X'X)^-1): tr(LR) - 2 tr(G X'LRX) + tr(G X'LX G X'RX) over tr(R) - tr(G X'RX)."""
    n = float(design.shape[0])
    rx = _times_r(phi, design)
    x_rx = design.T @ rx
    tr_mlmr = ((n - 1) * phi - 2 * float(np.trace(gram_inv @ (design.T @ _lag(rx))))
               + float(np.trace(gram_inv @ (design.T @ _lag(design)) @ gram_inv @ x_rx)))
    return tr_mlmr / (n - float(np.trace(gram_inv @ x_rx)))


def _phi(observed: float, design: np.ndarray, gram_inv: np.ndarray) -> float:
    """The phi (0 to PHI_MAX) whose expected lag-1 ratio matches the residuals' (moment matching)."""
    lo, hi = 0.0, PHI_MAX
    if _expected_lag1(lo, design, gram_inv) >= observed:
        return 0.0
    if _expected_lag1(hi, design, gram_inv) <= observed:
        return PHI_MAX
    for _ in range(30):
        mid = (lo + hi) / 2
        if _expected_lag1(mid, design, gram_inv) < observed:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
