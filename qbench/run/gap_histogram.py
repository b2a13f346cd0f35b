"""A fixed log-bucket histogram of gaps (seconds): compact on a record, mergeable across requests and
processes, with a stated error. How the run's inter-token-gap percentiles are taken over EVERY gap
(qbench.run.results.summary.itl_stats) while a record stays one flat row.

    bucket i      holds gaps g with GAMMA^(i-1) < g <= GAMMA^i, GAMMA = 1.01 (the same buckets for every
                  request, so merging is adding counts); gaps under MIN_GAP_S (two chunks read at once)
                  count in MIN_GAP_S's bucket
    value         a bucket stands for 2 GAMMA^i / (GAMMA + 1): within RELATIVE_ERROR (0.4975%) of every
                  gap in it, so a percentile read from the merged histogram is within 0.5% of the exact
                  type-7 percentile of the gaps (20 ms: within 0.1 ms)
    text          "i:n i:n ..." (bucket index, count; ascending index): the record's `itl_hist`; a
                  request's gaps take one pair per distinct bucket (at most ~2,100 buckets from 1 us to
                  1,000 s, a few dozen for a usual stream)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
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
    """`merge` of many records' texts, given as pyarrow string arrays (a batch of rows each), parsed
    by Arrow and added by numpy: the same counts, without a Python loop over the records (a few
    seconds for millions). None when a text is missing (null or empty): those records have no
    histogram."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    total: Counter[int] = Counter()
    for texts in batches:
        if texts.null_count or pc.any(pc.equal(pc.binary_length(texts), 0)).as_py():
            return None
        pairs = pc.list_flatten(pc.utf8_split_whitespace(texts))  # "" between runs of spaces: dropped
        pairs = pairs.filter(pc.greater(pc.binary_length(pairs), 0))
        parts = pc.split_pattern(pairs, ":", max_splits=1)
        try:
            index = pc.list_element(parts, 0).cast(pa.int64()).to_numpy()
            count = pc.list_element(parts, 1).cast(pa.int64()).to_numpy()
        except (pa.ArrowInvalid, IndexError) as exc:
            raise ValueError(f"a malformed gap histogram: {exc}") from None
        buckets, where = np.unique(index, return_inverse=True)
        sums = np.bincount(where, weights=count, minlength=buckets.size)  # exact below 2**53 gaps
        total.update(dict(zip(buckets.tolist(), sums.astype(np.int64).tolist(), strict=True)))
    return total


def percentiles(counts: Mapping[int, int], qs: Iterable[float]) -> list[float]:
    """Type-7 (linear) percentiles (q in 0..1) of the gaps a histogram holds, each gap taken as its
    bucket's value (within RELATIVE_ERROR); [] for an empty histogram."""
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
