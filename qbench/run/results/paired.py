"""Two runs compared phase by phase: request by request when they followed one schedule (`pair_runs`),
else unpaired (`unpaired_phase`). Design: docs/design/records-and-results.md."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qbench.run.records.columns import Columns

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
        return Pairing(False, reason, int(rows_a.size), 0, 0, _unpaired_phases(a, b, PHASES, seed))
    order = _time_order(a, rows_a)
    rows_a, rows_b = rows_a[order], rows_b[order]
    del order
    measured = a.measured()[rows_a] & b.measured()[rows_b]
    ok_a, ok_b = a.ok()[rows_a], b.ok()[rows_b]
    failed_in_b, failed_in_a = np.sum(measured & ok_a & ~ok_b), np.sum(measured & ok_b & ~ok_a)
    matched = rows_a.size
    both = measured & ok_a & ok_b
    rows_a, rows_b = rows_a[both], rows_b[both]
    del measured, ok_a, ok_b, both
    phases = tuple(_phase(a.floats(name)[rows_a], b.floats(name)[rows_b], name, seed) for name in PHASES)
    reason = f"paired: {matched} requests share a schedule with A ({rows_a.size} ok in both)"
    return Pairing(True, reason, int(matched), int(failed_in_b), int(failed_in_a),
                   tuple(p for p in phases if p is not None))


def _matched(a: Columns, b: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(rows of A, rows of B) in B's order: one id's requests, intended times within TIME_TOLERANCE_S."""
    ids_a = a.ints("request_id")
    by_id = np.argsort(ids_a, kind="stable").astype(np.int32)  # row numbers fit: < 2**31 rows
    sorted_ids = ids_a[by_id]
    del ids_a
    ids_b = b.ints("request_id")
    at = np.searchsorted(sorted_ids, ids_b, side="right").astype(np.int32) - 1  # the last of equal ids
    found = at >= 0
    found[found] = sorted_ids[at[found]] == ids_b[found]
    del sorted_ids, ids_b
    rows_b = np.flatnonzero(found).astype(np.int32)
    rows_a = by_id[at[rows_b]]
    del at, by_id, found
    close = np.abs(a.floats("intended_at_s")[rows_a] - b.floats("intended_at_s")[rows_b]) <= TIME_TOLERANCE_S
    return rows_a[close], rows_b[close]


def _time_order(cols: Columns, rows: np.ndarray) -> np.ndarray:
    """The indices that sort `rows` by intended send time, then request id (a stable sort: ties in order)."""
    intended = cols.floats("intended_at_s")[rows]
    order = np.argsort(intended, kind="stable")
    ordered = intended[order]
    tied = bool(np.any(ordered[1:] == ordered[:-1]))
    del ordered
    if tied:
        return np.lexsort((cols.ints("request_id")[rows], intended))
    return order


def _ok_in_order(cols: Columns) -> np.ndarray:
    """The rows of the requests ok and outside the warm-up, by intended send time then request id."""
    rows = np.flatnonzero(cols.ok() & cols.measured()).astype(np.int32)
    ordered: np.ndarray = rows[_time_order(cols, rows)]
    return ordered


def _values(cols: Columns, rows: np.ndarray, name: str) -> np.ndarray:
    """A phase's values at `rows`, in that order, the rows without one left out."""
    values = cols.floats(name)[rows]
    present: np.ndarray = values[~np.isnan(values)]
    return present


def _phase(a: np.ndarray, b: np.ndarray, name: str, seed: int) -> PairedPhase | None:
    """The paired figures of one phase from its values in A and B, pair by pair (NaN: no value)."""
    present = ~(np.isnan(a) | np.isnan(b))
    if not present.all():  # (a big run's copies only when some request has no value)
        a, b = a[present], b[present]
    del present
    if a.size < MIN_PAIRS:
        return None
    d = b - a
    median_a, median_b = float(np.median(a)), float(np.median(b))
    del a, b  # a big run's bootstrap below needs the room
    low, high = _median_ci(d, seed)
    return PairedPhase(
        phase=name,
        pairs=int(d.size),
        median_a=median_a,
        median_b=median_b,
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
    """Medians of `resamples` moving-block bootstrap series of x, computed without building the series."""
    n = x.size
    length = -(-n // blocks(n))
    count = -(-n // length)
    starts = np.concatenate([rng.integers(0, n - length + 1, size=(min(100, resamples - first), count))
                             for first in range(0, resamples, 100)])
    sizes = np.full(count, length)
    sizes[-1] = n - (count - 1) * length
    return _window_medians(x, starts, starts + sizes)


def _window_medians(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """np.median of each row's values x[starts[i, j]:ends[i, j]] (all j), without gathering them."""
    total = int((ends - starts)[0].sum())
    order = np.argsort(x).astype(np.int32)  # ties in any order: equal values, equal medians
    rows = starts.shape[0]
    middle = np.repeat([(total - 1) // 2, total // 2], rows)  # the two middle values (one when odd)
    found = _order_statistics(order, np.vstack([starts, starts]), np.vstack([ends, ends]), middle)
    middles: np.ndarray = (x[order[found[:rows]]] + x[order[found[rows:]]]) / 2  # np.median's mean of two
    return middles


def _order_statistics(order: np.ndarray, starts: np.ndarray, ends: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row i, the k[i]-th smallest (0-based) rank of the values in its windows (`order` sorts them)."""
    n = order.size
    seq = np.empty(n, dtype=np.int32)  # the ranks, then each level's stable partition of them
    seq[order] = np.arange(n, dtype=np.int32)
    s, e, k = starts.astype(np.int64), ends.astype(np.int64), k.astype(np.int64)
    value = np.zeros(k.size, dtype=np.int64)
    zeros = np.zeros(n + 1, dtype=np.int32)
    scratch = np.empty(n, dtype=np.int32)
    for level in range(max(n - 1, 1).bit_length() - 1, -1, -1):
        np.right_shift(seq, level, out=scratch)
        one = (scratch & 1).astype(bool)
        np.cumsum(~one, out=zeros[1:])
        zs, ze = zeros[s].astype(np.int64), zeros[e].astype(np.int64)
        here = (ze - zs).sum(axis=1)  # values of the rows' windows whose bit is 0 at this level
        low = k < here
        k = np.where(low, k, k - here)
        value |= (~low).astype(np.int64) << level
        s = np.where(low[:, None], zs, zeros[n] + s - zs)
        e = np.where(low[:, None], ze, zeros[n] + e - ze)
        split = int(zeros[n])
        scratch[:split], scratch[split:] = seq[~one], seq[one]  # the next level: stable by this bit
        seq, scratch = scratch, seq
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
    from scipy import stats  # 1.2 s of import: paid only where a comparison runs its tests

    return float(stats.wilcoxon(block, zero_method="wilcox", alternative="two-sided").pvalue)


def unpaired_phase(a: Columns, b: Columns, name: str, seed: int = 0) -> PairedPhase | None:
    """Median of B minus median of A over ok measured requests of two independent runs."""
    phases = _unpaired_phases(a, b, (name,), seed)
    return phases[0] if phases else None


@dataclass(frozen=True)
class _Side:
    """One run's share of an unpaired phase: its values' count, median, block medians and bootstrap."""

    size: int
    median: float
    block_medians: np.ndarray
    resampled: np.ndarray  # medians of the block-bootstrap series

    @classmethod
    def of(cls, x: np.ndarray, rng: np.random.Generator) -> _Side:
        return cls(int(x.size), float(np.median(x)), _block_medians(x), _block_bootstrap(x, rng))


def _unpaired_phases(a: Columns, b: Columns, names: tuple[str, ...], seed: int) -> tuple[PairedPhase, ...]:
    """The unpaired figures of each phase with values in both runs (one run's values held at a time)."""
    rngs = {name: np.random.default_rng(seed) for name in names}
    sides_b = _sides(b, rngs)
    sides_a = _sides(a, {name: rngs[name] for name in names if name in sides_b})
    return tuple(_unpaired(name, sides_a[name], sides_b[name]) for name in names if name in sides_a)


def _sides(cols: Columns, rngs: dict[str, np.random.Generator]) -> dict[str, _Side]:
    """Per phase, the run's side (phases with fewer than MIN_PAIRS values left out)."""
    rows = _ok_in_order(cols) if rngs else np.zeros(0, dtype=np.int32)
    out = {}
    for name, rng in rngs.items():
        x = _values(cols, rows, name)
        if x.size >= MIN_PAIRS:
            out[name] = _Side.of(x, rng)
    return out


def _unpaired(name: str, a: _Side, b: _Side) -> PairedPhase:
    low, high = np.percentile(b.resampled - a.resampled, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    from scipy import stats

    test = stats.mannwhitneyu(b.block_medians, a.block_medians, alternative="two-sided")
    return PairedPhase(
        phase=name,
        pairs=min(a.size, b.size),
        median_a=a.median,
        median_b=b.median,
        median_diff=b.median - a.median,
        ci_low=float(low),
        ci_high=float(high),
        b_faster=float("nan"),
        b_slower=float("nan"),
        p_value=float(test.pvalue),
        paired=False,
    )
