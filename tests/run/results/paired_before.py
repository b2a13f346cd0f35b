"""The paired comparison as it was before issue 47 (records, a Python loop), kept as the oracle that
`qbench.run.results.paired` (columns, vectorised) must match digit for digit. Not imported by qbench.

Paired comparison: two runs that followed one schedule, compared request by request.

When run B replayed run A's schedule (`qbench run --replay A`, or the same trace), request k was meant
to be sent at the same instant in both, with the same body. The per-request difference B - A then
cancels the arrival noise (which requests happened to land in a busy moment) that dominates an
unpaired comparison of two percentile tables, so a small change shows with far fewer requests.

Detection: runs are paired when at least 90% of the smaller run's requests have a partner with the
same request id and the same intended send time (to 1 us), and there are at least `MIN_PAIRS`.
For each phase, over requests ok and outside the warm-up in both runs, in intended-send order:

    median of d = B - A        with a 95% moving-block bootstrap interval (2,000 resamples, seeded)
    B faster for N% of pairs   share of d < 0 (and slower: d > 0)
    Wilcoxon signed-rank test  on the medians of `blocks(n)` consecutive blocks of d

Why blocks: latencies in one run are autocorrelated (a queue remembers its last seconds), so the
requests are not independent samples and a per-request test or an i.i.d. bootstrap is far too sure
of itself (`bench/paired_vs_unpaired.py` measured false alarms on identical servers). Resampling and
testing whole blocks of consecutive requests (10 to 25 blocks) keeps most of that dependence inside a
block. B is called faster (or slower) only when p < 0.05 and the interval excludes 0.

Runs that do not share a schedule get the unpaired counterpart (`unpaired_phase`): the difference of
the two medians with a block-bootstrap interval of each run, and a Mann-Whitney U test on the two
runs' block medians.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    p_value: float | None  # on block medians: Wilcoxon signed-rank (paired) or Mann-Whitney U, two-sided
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
    matched.sort(key=lambda pair: (pair[0].intended_at_s, pair[0].request_id))
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


def blocks(n: int) -> int:
    """How many consecutive blocks n values are cut into for the block bootstrap and the tests."""
    return min(25, max(10, n // 20))


def _block_medians(x: np.ndarray) -> np.ndarray:
    return np.array([np.median(part) for part in np.array_split(x, blocks(x.size))])


def _block_bootstrap(x: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> np.ndarray:
    """Medians of `resamples` moving-block bootstrap series of x (blocks of consecutive values)."""
    n = x.size
    length = -(-n // blocks(n))
    count = -(-n // length)
    out = np.empty(resamples)
    for first in range(0, resamples, 100):  # chunks bound the index matrix's memory
        size = min(100, resamples - first)
        starts = rng.integers(0, n - length + 1, size=(size, count))
        index = (starts[:, :, None] + np.arange(length)).reshape(size, -1)[:, :n]
        out[first:first + size] = np.median(x[index], axis=1)
    return out


def _median_ci(d: np.ndarray, seed: int) -> tuple[float, float]:
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    medians = _block_bootstrap(d, np.random.default_rng(seed))
    low, high = np.percentile(medians, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def _wilcoxon(d: np.ndarray) -> float | None:
    block = _block_medians(d)
    if not np.any(block != 0):
        return None
    from scipy import stats  # here, not at the top: every xdist worker collects this module

    return float(stats.wilcoxon(block, zero_method="wilcox", alternative="two-sided").pvalue)


def unpaired_phase(
    a: list[RequestRecord], b: list[RequestRecord], name: str, seed: int = 0
) -> PairedPhase | None:
    """Median of B minus median of A over ok measured requests of two independent runs."""
    xa, xb = _ok_values(a, name), _ok_values(b, name)
    if min(xa.size, xb.size) < MIN_PAIRS:
        return None
    rng = np.random.default_rng(seed)
    low, high = np.percentile(_block_bootstrap(xb, rng) - _block_bootstrap(xa, rng),
                              [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    from scipy import stats

    test = stats.mannwhitneyu(_block_medians(xb), _block_medians(xa), alternative="two-sided")
    return PairedPhase(
        phase=name,
        pairs=int(min(xa.size, xb.size)),
        median_a=float(np.median(xa)),
        median_b=float(np.median(xb)),
        median_diff=float(np.median(xb) - np.median(xa)),
        ci_low=float(low),
        ci_high=float(high),
        b_faster=float("nan"),
        b_slower=float("nan"),
        p_value=float(test.pvalue),
        paired=False,
    )


def _ok_values(records: list[RequestRecord], name: str) -> np.ndarray:
    ordered = sorted(records, key=lambda r: (r.intended_at_s, r.request_id))
    values = (getattr(r, name) for r in ordered if r.ok and not r.warmup)
    return np.array([v for v in values if v is not None], dtype=np.float64)
