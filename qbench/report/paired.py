"""Paired comparison: two runs that followed one schedule, compared request by request.

When run B replayed run A's schedule (`qbench run --replay A`, or the same trace), request k was meant
to be sent at the same instant in both, with the same body. The per-request difference B - A then
cancels the arrival noise (which requests happened to land in a busy moment) that dominates an
unpaired comparison of two percentile tables, so a small change shows with far fewer requests.

Detection: runs are paired when at least 90% of the smaller run's requests have a partner with the
same request id and the same intended send time (to 1 us), and there are at least `MIN_PAIRS`.
For each phase, over requests ok and outside the warm-up in both runs:

    median of d = B - A        with a 95% bootstrap confidence interval (percentile method,
                               2,000 resamples, seeded: the same runs give the same interval)
    B faster for N% of pairs   share of d < 0 (and slower: d > 0)
    Wilcoxon signed-rank test  two-sided p-value that the differences are centred on 0 (scipy)

B is called faster (or slower) only when p < 0.05 and the interval excludes 0.

Runs that do not share a schedule get the unpaired counterpart (`unpaired_phase`): the difference of
the two medians with a bootstrap interval over both samples, and a Mann-Whitney U test; with the same
number of requests it needs a much larger change to reach the same confidence
(`tests/report/test_paired.py` shows one; `bench/paired_vs_unpaired.py` measures how many requests each
needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from qbench.run.records import RequestRecord

PHASES = ("latency_s", "queue_wait_s", "service_s")
MIN_PAIRS = 10
TIME_TOLERANCE_S = 1e-6
ALPHA = 0.05


@dataclass(frozen=True)
class PairedPhase:
    """One phase compared request by request (seconds; d = B - A)."""

    phase: str
    pairs: int
    median_a: float
    median_b: float
    median_diff: float
    ci_low: float
    ci_high: float
    b_faster: float  # share of pairs with d < 0
    b_slower: float  # share of pairs with d > 0
    p_value: float | None  # Wilcoxon signed-rank (paired) or Mann-Whitney U (unpaired), two-sided
    paired: bool = True

    @property
    def verdict(self) -> str:
        """'faster', 'slower' or 'no clear difference' (for B against A)."""
        if self.p_value is None or self.p_value >= ALPHA or self.ci_low <= 0 <= self.ci_high:
            return "no clear difference"
        return "faster" if self.median_diff < 0 else "slower"


@dataclass(frozen=True)
class Pairing:
    """Whether two runs share a schedule, and the paired figures when they do."""

    shared: bool
    reason: str  # why (not) paired, for the terminal and the report
    matched: int  # requests with the same id and intended time in both runs
    ok_in_a_only: int  # matched requests that failed in B only
    ok_in_b_only: int  # matched requests that failed in A only
    phases: tuple[PairedPhase, ...] = ()


def pair_runs(a: list[RequestRecord], b: list[RequestRecord], seed: int = 0) -> Pairing:
    """Detect a shared schedule and compare the phases of the requests ok in both runs."""
    by_id = {r.request_id: r for r in a}
    matched = [(by_id[r.request_id], r) for r in b if r.request_id in by_id
               and abs(by_id[r.request_id].intended_at_s - r.intended_at_s) <= TIME_TOLERANCE_S]
    smaller = min(len(a), len(b))
    if len(matched) < MIN_PAIRS or len(matched) < 0.9 * smaller:
        reason = (f"unpaired: only {len(matched)} of {smaller} requests share an id and intended send time "
                  "(different schedules); replay A's schedule (qbench run --replay A) to pair them")
        unpaired = (unpaired_phase(a, b, name, seed) for name in PHASES)
        return Pairing(False, reason, len(matched), 0, 0, tuple(p for p in unpaired if p is not None))
    measured = [(x, y) for x, y in matched if not x.warmup and not y.warmup]
    both = [(x, y) for x, y in measured if x.ok and y.ok]
    phases = tuple(p for p in (_phase(both, name, seed) for name in PHASES) if p is not None)
    reason = f"paired: {len(matched)} requests share a schedule with A ({len(both)} ok in both)"
    return Pairing(True, reason, len(matched), sum(x.ok and not y.ok for x, y in measured),
                   sum(y.ok and not x.ok for x, y in measured), phases)


def _phase(pairs: list[tuple[RequestRecord, RequestRecord]], name: str, seed: int) -> PairedPhase | None:
    values = [(getattr(x, name), getattr(y, name)) for x, y in pairs]
    values = [(u, v) for u, v in values if u is not None and v is not None]
    if len(values) < MIN_PAIRS:
        return None
    a, b = np.array(values, dtype=np.float64).T
    d = b - a
    low, high = _median_ci(d, seed)
    return PairedPhase(
        phase=name,
        pairs=int(d.size),
        median_a=float(np.median(a)),
        median_b=float(np.median(b)),
        median_diff=float(np.median(d)),
        ci_low=low,
        ci_high=high,
        b_faster=float(np.mean(d < 0)),
        b_slower=float(np.mean(d > 0)),
        p_value=_wilcoxon(d),
    )


def _median_ci(d: np.ndarray, seed: int) -> tuple[float, float]:
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    result = stats.bootstrap(
        (d,), np.median, confidence_level=1 - ALPHA, n_resamples=2000, method="percentile",
        batch=200, rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _wilcoxon(d: np.ndarray) -> float | None:
    if not np.any(d != 0):
        return None
    return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def unpaired_phase(
    a: list[RequestRecord], b: list[RequestRecord], name: str, seed: int = 0
) -> PairedPhase | None:
    """Median of B minus median of A over ok measured requests of two independent runs."""
    xa, xb = _ok_values(a, name), _ok_values(b, name)
    if min(xa.size, xb.size) < MIN_PAIRS:
        return None
    result = stats.bootstrap(
        (xb, xa), lambda y, x, axis=-1: np.median(y, axis=axis) - np.median(x, axis=axis),
        confidence_level=1 - ALPHA, n_resamples=2000, method="percentile", batch=200,
        rng=np.random.default_rng(seed),
    )
    test = stats.mannwhitneyu(xb, xa, alternative="two-sided")
    return PairedPhase(
        phase=name,
        pairs=int(min(xa.size, xb.size)),
        median_a=float(np.median(xa)),
        median_b=float(np.median(xb)),
        median_diff=float(np.median(xb) - np.median(xa)),
        ci_low=float(result.confidence_interval.low),
        ci_high=float(result.confidence_interval.high),
        b_faster=float("nan"),
        b_slower=float("nan"),
        p_value=float(test.pvalue),
        paired=False,
    )


def _ok_values(records: list[RequestRecord], name: str) -> np.ndarray:
    values = (getattr(r, name) for r in records if r.ok and not r.warmup)
    return np.array([v for v in values if v is not None], dtype=np.float64)
