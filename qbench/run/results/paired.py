"""Paired comparison: two runs that followed one schedule, compared request by request.

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

Both read the runs as columns (`qbench.run.columns.Columns`: a few float64 arrays, never a Python
object per request), so two runs of millions of requests compare in seconds. A bootstrap resample is
`blocks(n)` windows of the series; its median is found exactly, without building the resample, as an
order statistic of the union of those windows (`_window_medians`): the same digits as sorting it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from qbench.run.columns import Columns

PHASES = ("latency_s", "queue_wait_s", "service_s")
MIN_PAIRS = 10
TIME_TOLERANCE_S = 1e-6
ALPHA = 0.05
RESAMPLES = 2000


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


def pair_runs(a: Columns, b: Columns, seed: int = 0) -> Pairing:
    """Detect a shared schedule and compare the phases of the requests ok in both runs."""
    rows_a, rows_b = _matched(a, b)
    smaller = min(len(a), len(b))
    if rows_a.size < MIN_PAIRS or rows_a.size < 0.9 * smaller:
        reason = (f"unpaired: only {rows_a.size} of {smaller} requests share an id and intended send time "
                  "(different schedules); replay A's schedule (qbench run --replay A) to pair them")
        xa, xb = _OkSeries(a), _OkSeries(b)
        unpaired = (_unpaired(xa.values(name), xb.values(name), name, seed) for name in PHASES)
        return Pairing(False, reason, int(rows_a.size), 0, 0, tuple(p for p in unpaired if p is not None))
    order = np.lexsort((a.ints("request_id")[rows_a], a.floats("intended_at_s")[rows_a]))  # stable
    rows_a, rows_b = rows_a[order], rows_b[order]
    measured = a.measured()[rows_a] & b.measured()[rows_b]
    ok_a, ok_b = a.ok()[rows_a], b.ok()[rows_b]
    both = measured & ok_a & ok_b
    rows_a, rows_b = rows_a[both], rows_b[both]
    phases = (_phase(a.floats(name)[rows_a], b.floats(name)[rows_b], name, seed) for name in PHASES)
    reason = f"paired: {order.size} requests share a schedule with A ({rows_a.size} ok in both)"
    return Pairing(True, reason, int(order.size), int(np.sum(measured & ok_a & ~ok_b)),
                   int(np.sum(measured & ok_b & ~ok_a)), tuple(p for p in phases if p is not None))


def _matched(a: Columns, b: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(rows of A, rows of B), in B's order: each request of B with A's request of the same id (the last
    one A holds with that id) when their intended send times agree to TIME_TOLERANCE_S."""
    ids_a, ids_b = a.ints("request_id"), b.ints("request_id")
    by_id = np.argsort(ids_a, kind="stable")
    at = np.searchsorted(ids_a[by_id], ids_b, side="right") - 1  # the last of equal ids
    found = at >= 0
    found[found] = ids_a[by_id[at[found]]] == ids_b[found]
    rows_b = np.flatnonzero(found)
    rows_a = by_id[at[rows_b]]
    close = np.abs(a.floats("intended_at_s")[rows_a] - b.floats("intended_at_s")[rows_b]) <= TIME_TOLERANCE_S
    return rows_a[close], rows_b[close]


def _phase(a: np.ndarray, b: np.ndarray, name: str, seed: int) -> PairedPhase | None:
    """The paired figures of one phase from its values in A and B, pair by pair (NaN: no value)."""
    present = ~(np.isnan(a) | np.isnan(b))
    a, b = a[present], b[present]
    if a.size < MIN_PAIRS:
        return None
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


def _block_bootstrap(x: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES) -> np.ndarray:
    """Medians of `resamples` moving-block bootstrap series of x.

    A series is `count` windows of `length` consecutive values at random starts, put end to end and cut
    to n values (the last window shortened). The starts are drawn 100 series at a time, as they always
    were, so a seed gives the same series as before the medians were computed without building them.
    """
    n = x.size
    length = -(-n // blocks(n))
    count = -(-n // length)
    starts = np.concatenate([rng.integers(0, n - length + 1, size=(min(100, resamples - first), count))
                             for first in range(0, resamples, 100)])
    sizes = np.full(count, length)
    sizes[-1] = n - (count - 1) * length
    return _window_medians(x, starts, starts + sizes)


def _window_medians(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """np.median of each row's values x[starts[i, j]:ends[i, j]] (all j), without gathering them.

    The values are replaced by their ranks (0..n-1, ties in order), and the middle order statistics
    of each union of windows are found in a wavelet matrix of the ranks, one bit of the answer per
    level, from the top bit down: at each level a window holds as many values whose bit is 0 as the
    level's zero count (a prefix sum) gives between its two ends. Only one level is held at a time,
    and all the rows advance together, so memory is a few arrays of n and time is O(n log n).
    """
    n = x.size
    total = int((ends - starts)[0].sum())
    order = np.argsort(x)  # ties in any order: equal values, equal medians
    ranks = np.empty(n, dtype=np.int32)
    ranks[order] = np.arange(n, dtype=np.int32)
    rows = starts.shape[0]
    middle = np.repeat([(total - 1) // 2, total // 2], rows)  # the two middle values (one when odd)
    found = _order_statistics(ranks, np.vstack([starts, starts]), np.vstack([ends, ends]), middle)
    middles: np.ndarray = (x[order[found[:rows]]] + x[order[found[rows:]]]) / 2  # np.median's mean of two
    return middles


def _order_statistics(ranks: np.ndarray, starts: np.ndarray, ends: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row i, the k[i]-th smallest (0-based) of ranks[starts[i, j]:ends[i, j]] over all j."""
    n = ranks.size
    seq = ranks
    s, e, k = starts.astype(np.int64), ends.astype(np.int64), k.astype(np.int64)
    value = np.zeros(k.size, dtype=np.int64)
    zeros = np.zeros(n + 1, dtype=np.int32)  # n < 2**31: a column of a Parquet file
    for level in range(max(n - 1, 1).bit_length() - 1, -1, -1):
        one = ((seq >> level) & 1).astype(bool)
        np.cumsum(~one, out=zeros[1:])
        zs, ze = zeros[s].astype(np.int64), zeros[e].astype(np.int64)
        here = (ze - zs).sum(axis=1)  # values of the rows' windows whose bit is 0 at this level
        low = k < here
        k = np.where(low, k, k - here)
        value |= (~low).astype(np.int64) << level
        s = np.where(low[:, None], zs, zeros[n] + s - zs)
        e = np.where(low[:, None], ze, zeros[n] + e - ze)
        seq = np.concatenate([seq[~one], seq[one]])  # the next level: stable by this bit
    return value


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
    return float(stats.wilcoxon(block, zero_method="wilcox", alternative="two-sided").pvalue)


def unpaired_phase(a: Columns, b: Columns, name: str, seed: int = 0) -> PairedPhase | None:
    """Median of B minus median of A over ok measured requests of two independent runs."""
    return _unpaired(_OkSeries(a).values(name), _OkSeries(b).values(name), name, seed)


def _unpaired(xa: np.ndarray, xb: np.ndarray, name: str, seed: int) -> PairedPhase | None:
    if min(xa.size, xb.size) < MIN_PAIRS:
        return None
    rng = np.random.default_rng(seed)
    low, high = np.percentile(_block_bootstrap(xb, rng) - _block_bootstrap(xa, rng),
                              [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
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


class _OkSeries:
    """A run's ok requests outside the warm-up in intended-send order (then request id), as row numbers."""

    def __init__(self, cols: Columns) -> None:
        order = np.lexsort((cols.ints("request_id"), cols.floats("intended_at_s")))  # stable
        self.cols = cols
        self.rows = order[(cols.ok() & cols.measured())[order]]

    def values(self, name: str) -> np.ndarray:
        """The phase's values in that order, requests without one left out."""
        values = self.cols.floats(name)[self.rows]
        present: np.ndarray = values[~np.isnan(values)]
        return present
