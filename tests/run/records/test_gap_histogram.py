"""The gap histogram: percentiles within its stated error of the exact ones, merging is adding."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.records import gap_histogram as gh


def test_percentiles_are_within_the_stated_error_of_the_exact_ones() -> None:
    rng = np.random.default_rng(7)
    gaps = np.concatenate([rng.lognormal(np.log(0.02), 0.08, 6000), rng.uniform(0.03, 0.2, 60)])
    qs = [0.0, 0.5, 0.9, 0.95, 0.99, 1.0]
    got = gh.percentiles(gh.histogram(gaps.tolist()), qs)
    exact = np.percentile(gaps, [q * 100 for q in qs])
    for g, e in zip(got, exact, strict=True):
        assert abs(g - e) <= gh.RELATIVE_ERROR * e * (1 + 1e-9)
    assert gh.RELATIVE_ERROR < 0.005


def test_encode_decode_round_trip_and_merge_adds_counts() -> None:
    a, b = [0.02, 0.021, 0.02], [0.02, 1.5, 1e-9]  # a zero-ish gap counts in MIN_GAP_S's bucket
    text_a, text_b = gh.encode(gh.histogram(a)), gh.encode(gh.histogram(b))
    assert text_a is not None and gh.decode(text_a) == gh.histogram(a)
    merged = gh.merge([text_a, text_b, None])
    assert merged == gh.histogram(a + b) and sum(merged.values()) == 6
    assert gh.encode({}) is None and gh.percentiles({}, [0.5]) == []
    assert gh.bucket(1e-9) == gh.bucket(gh.MIN_GAP_S)
    assert gh.bucket_value(gh.bucket(0.02)) == pytest.approx(0.02, rel=gh.RELATIVE_ERROR)


def test_bucket_edges() -> None:
    """Bucket i holds (GAMMA^(i-1), GAMMA^i]: an edge belongs to the bucket below it."""
    assert gh.bucket(gh.GAMMA ** -300) == -300
    assert gh.bucket(gh.GAMMA ** -300 * 1.0001) == -299


def test_merging_arrow_batches_adds_the_same_counts_as_merge() -> None:
    """The summary parses a long run's histograms as Arrow arrays: the same counts as `merge`, None when
    a record has no histogram (the pooled statistics apply), ValueError on a malformed one."""
    import pyarrow as pa

    rng = np.random.default_rng(3)
    texts = [gh.encode(gh.histogram(rng.lognormal(np.log(0.02), 0.5, int(rng.integers(1, 60)))))
             for _ in range(500)]
    batches = [pa.array(texts[:123]), pa.array(texts[123:])]
    assert gh.merge_arrays(batches) == gh.merge(texts)
    assert gh.merge_arrays([pa.array(["-3:2  5:1 "]), pa.array(["5:4"])]) == {-3: 2, 5: 5}
    assert gh.merge_arrays([]) == {}
    assert gh.merge_arrays([pa.array(texts[:3]), pa.array(["1:2", None])]) is None
    assert gh.merge_arrays([pa.array(["1:2", ""])]) is None
    for bad in ("1:x", "12", "1:2:3"):
        with pytest.raises(ValueError, match="malformed"):
            gh.merge_arrays([pa.array([bad])])
        with pytest.raises(ValueError):
            gh.decode(bad)


def test_merge_present_says_which_rows_had_a_histogram() -> None:
    import pyarrow as pa

    counts, present = gh.merge_present([pa.array(["1:2", None, ""]), pa.array(["1:1 4:3"])])
    assert counts == {1: 3, 4: 3} and present.tolist() == [True, False, False, True]
    counts, present = gh.merge_present([])
    assert counts == {} and present.size == 0


def test_a_stand_in_counts_each_gap_at_a_statistic_at_or_above_it() -> None:
    """9 gaps as (p50, p95, max) shares (0.5, 0.45, 0.05): 4 at the median (9 x 0.5 = 4.5 rounds to even),
    5 at the p95, none at the max; a missing median is stood in for by the next statistic up."""
    p50, p95, top = np.array([0.04, np.nan]), np.array([0.09, 0.3]), np.array([0.1, 0.35])
    counts = gh.stand_in(np.array([9, 3]), [p50, p95, top], [0.5, 0.45, 0.05])
    assert counts == {gh.bucket(0.04): 4, gh.bucket(0.09): 5, gh.bucket(0.3): 3}
    assert sum(gh.stand_in(np.array([7]), [np.array([0.01])], [1.0]).values()) == 7
    assert gh.stand_in(np.array([5]), [np.array([np.nan])], [1.0]) == {}  # nothing known: nothing counted
