"""start_groups: requests whose process_starts arrive together are one batch, as a client sees it."""

from __future__ import annotations

from qbench.run import start_groups


def test_an_item_joins_the_group_whose_first_start_is_within_the_tolerance() -> None:
    # unsorted input; 0.004 joins 0.0's group (within 5 ms of its first), 0.008 is 8 ms past it: a new one
    starts = [(0.008, "c"), (0.0, "a"), (0.004, "b"), (0.011, "d"), (0.5, "e")]
    assert start_groups(starts, 0.005) == [["a", "b"], ["c", "d"], ["e"]]


def test_a_full_group_opens_the_next_and_nothing_gives_no_groups() -> None:
    starts = [(0.0, 1), (0.001, 2), (0.002, 3), (0.003, 4), (0.004, 5)]
    assert start_groups(starts, 0.005, max_size=2) == [[1, 2], [3, 4], [5]]
    assert start_groups(starts, 0.005) == [[1, 2, 3, 4, 5]]
    assert start_groups([], 0.005) == []
