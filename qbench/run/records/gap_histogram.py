"""A fixed log-bucket histogram of gaps (seconds), compact text on a record and mergeable across requests
and processes: percentiles over every gap within 0.5%. Design: docs/design/records-and-results.md."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

GAMMA = 1.01
MIN_GAP_S = 1e-6  # smaller gaps (chunks read in one go) count in this bucket
RELATIVE_ERROR = (GAMMA - 1) / (GAMMA + 1)  # |bucket value - gap| / gap, at most
_LOG_GAMMA = math.log(GAMMA)


def bucket(gap_s: float) -> int:
    """The bucket index of one gap (seconds)."""
    return math.ceil(math.log(max(gap_s, MIN_GAP_S)) / _LOG_GAMMA - 1e-9)


def bucket_value(index: int) -> float:
    """The gap (seconds) a bucket stands for: within RELATIVE_ERROR of every gap in it."""
    return 2 * GAMMA ** index / (GAMMA + 1)


def histogram(gaps: Iterable[float]) -> Counter[int]:
    """Bucket index -> count of `gaps`."""
    return Counter(bucket(g) for g in gaps)


def encode(counts: Mapping[int, int]) -> str | None:
    """The record's text ("i:n i:n", ascending index); None for no gaps."""
    pairs = sorted((i, n) for i, n in counts.items() if n > 0)
    return " ".join(f"{i}:{n}" for i, n in pairs) or None


def decode(text: str | None) -> Counter[int]:
    """Bucket index -> count from a record's text; ValueError on a malformed one."""
    counts: Counter[int] = Counter()
    for pair in (text or "").split():
        index, _, count = pair.partition(":")
        counts[int(index)] += int(count)
    return counts


def merge(texts: Iterable[str | None]) -> Counter[int]:
    """Several records' histograms as one (counts added bucket by bucket)."""
    total: Counter[int] = Counter()
    for text in texts:
        total.update(decode(text))
    return total


def merge_arrays(batches: Iterable[Any]) -> Counter[int] | None:
    """`merge` of texts as pyarrow string arrays; None if a text is null or empty; ValueError if malformed."""
    counts, present = merge_present(batches)
    return counts if bool(present.all()) else None


def merge_present(batches: Iterable[Any]) -> tuple[Counter[int], Any]:
    """(`merge_arrays` of the texts present, a bool per row: False if null or empty); ValueError if bad."""
    import numpy as np
    import pyarrow.compute as pc

    sums: np.ndarray | None = None
    low = 0
    had: list[Any] = []
    for batch in batches:
        present = pc.fill_null(pc.greater(pc.binary_length(batch), 0), False).to_numpy(zero_copy_only=False)
        had.append(present)
        texts = batch if bool(present.all()) else batch.filter(present)
        for start in range(0, len(texts), _PARSE_ROWS):
            numbers = _numbers(texts.slice(start, _PARSE_ROWS))
            index, count = numbers[0::2], numbers[1::2]
            if not index.size:
                continue
            if sums is None:
                sums, low = np.zeros(0, dtype=np.int64), int(index.min())
            low_now = min(low, int(index.min()))
            size = max(int(index.max()) - low_now + 1, sums.size + low - low_now)
            grown = np.zeros(size, dtype=np.int64)
            grown[low - low_now:low - low_now + sums.size] = sums
            sums, low = grown, low_now
            np.add.at(sums, index - low, count)
    rows = np.concatenate(had) if had else np.zeros(0, dtype=bool)
    if sums is None:
        return Counter(), rows
    full = np.flatnonzero(sums)
    return Counter(dict(zip((full + low).tolist(), sums[full].tolist(), strict=True))), rows


def stand_in(counts: Any, values: Sequence[Any], shares: Sequence[float]) -> Counter[int]:
    """Histograms for records that kept only gap statistics: `counts` gaps split by `shares` over `values` (an
    array per statistic), each at the statistic at or above it (an upper bound; NaN: the next statistic)."""
    import numpy as np

    n = np.asarray(counts, dtype=np.int64)
    total: Counter[int] = Counter()
    given = np.zeros(n.size, dtype=np.int64)
    cumulative = 0.0
    columns = [np.asarray(v, dtype=np.float64) for v in values]
    for k, (column, share) in enumerate(zip(columns, shares, strict=True)):
        cumulative += share
        upto = n if k == len(columns) - 1 else np.rint(n * cumulative).astype(np.int64)
        here = upto - given
        filled = column.copy()
        for later in columns[k + 1:]:  # a missing statistic: the next one above it stands for it
            filled = np.where(np.isnan(filled), later, filled)
        use = (here > 0) & ~np.isnan(filled)
        if use.any():
            index = np.ceil(np.log(np.maximum(filled[use], MIN_GAP_S)) / _LOG_GAMMA - 1e-9).astype(np.int64)
            buckets, at = np.unique(index, return_inverse=True)
            for b, c in zip(buckets.tolist(), np.bincount(at, weights=here[use]).tolist(), strict=True):
                total[b] += int(c)
        given = np.where(use, upto, given)
    return total


_PARSE_ROWS = 2_048  # texts parsed at a time (~1 MB of characters: ~10 arrays of a number or a byte each)


def _numbers(texts: Any) -> Any:
    """Every integer of the texts "i:n i:n ..." in order, as int64; ValueError on any other shape."""
    import numpy as np

    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    rows = (offsets[:-1] - offsets[0])[offsets[:-1] < offsets[-1]]  # where each text starts
    digit = (data - np.uint8(48)) < 10  # uint8 wraps below "0"
    minus = data == 45
    token = digit | minus
    first = token.copy()
    first[1:] &= ~token[:-1]
    first[rows] = token[rows]  # the texts are back to back: a text's first number starts there
    last = token.copy()
    last[:-1] &= ~token[1:]
    last[rows[rows > 0] - 1] = token[rows[rows > 0] - 1]
    starts, ends = np.flatnonzero(first), np.flatnonzero(last)
    colons = np.flatnonzero(data == 58)
    negative = minus[starts].astype(np.int64)
    spaces = data[~token & (data != 58)]
    if starts.size % 2 or colons.size * 2 != starts.size or np.count_nonzero(minus) != negative.sum() \
            or not np.array_equal(colons, ends[0::2] + 1) or not np.array_equal(starts[1::2], colons + 1) \
            or np.any(ends < starts + negative) or np.any(ends - starts > 18) \
            or not (spaces == 32).all() and not np.isin(spaces, _SPACES).all():
        raise ValueError("a malformed gap histogram: not 'index:count' pairs apart by whitespace")
    if not starts.size:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(digit)  # each number's digits lie together, after its sign
    lengths = ends + 1 - starts - negative
    powers = 10 ** np.arange(19, dtype=np.int64)  # an int64 has 19 digits at most
    weights = (data[at] - np.uint8(48)).astype(np.int64) * powers[np.repeat(ends, lengths) - at]
    values = np.add.reduceat(weights, np.cumsum(lengths) - lengths)
    values[negative == 1] *= -1
    return values

_SPACES = (9, 10, 11, 12, 13, 32)


def percentiles(counts: Mapping[int, int], qs: Iterable[float]) -> list[float]:
    """Type-7 percentiles (q in 0..1) of the gaps, each at its bucket's value; [] for an empty histogram."""
    ordered = sorted((i, n) for i, n in counts.items() if n > 0)
    total = sum(n for _, n in ordered)
    if not total:
        return []

    def nth(k: int) -> float:  # the k-th smallest gap (0-based), as its bucket's value
        seen = 0
        for index, n in ordered:
            seen += n
            if k < seen:
                return bucket_value(index)
        return bucket_value(ordered[-1][0])

    out = []
    for q in qs:
        rank = q * (total - 1)
        lo = int(rank)
        low, high = nth(lo), nth(min(lo + 1, total - 1))
        out.append(low + (high - low) * (rank - lo))
    return out
