"""Which requests ran together in one batch, as a client sees it: their process_starts arrive together."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def start_groups(starts: Iterable[tuple[float, T]], tol_s: float, max_size: int | None = None
                 ) -> list[list[T]]:
    """The items in order of their start, grouped: an item joins the group before it when it started within
    `tol_s` of that group's first start (and the group holds fewer than `max_size`), else opens one."""
    groups: list[list[T]] = []
    first = -math.inf
    for started, item in sorted(starts, key=lambda pair: pair[0]):
        if groups and started - first <= tol_s and (max_size is None or len(groups[-1]) < max_size):
            groups[-1].append(item)
        else:
            groups.append([item])
            first = started
    return groups
