"""Smart search: coordinate hill climbing over a grid's axes from its middle, keeping every point it measured
(`smart_search`); `full_search` measures the whole grid. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qbench.tune.knobs.grid import Grid, Point
from qbench.tune.ranking.recommend import tied
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult

Evaluate = Callable[[Point], PointResult]


def score(result: PointResult, constraints: Constraints) -> tuple[int, float]:
    """(2, goodput or capacity) feasible > (1, -excess over bounds) infeasible > (0, 0) failed."""
    if not constraints.usable(result):
        return (0, 0.0)
    if constraints.violations(result):
        return (1, -constraints.excess(result))
    return (2, constraints.value(result))


@dataclass
class SearchResult:
    results: list[PointResult]  # every evaluated point, in evaluation order
    grid_size: int
    path: list[str] = field(default_factory=list)  # point ids the climb moved through

    @property
    def trials(self) -> int:
        return len(self.results)

    @property
    def saved(self) -> int:
        return self.grid_size - self.trials

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "grid_size": self.grid_size, "saved": self.saved, "path": self.path}


@dataclass
class _Climber:
    grid: Grid
    evaluate: Evaluate
    constraints: Constraints
    min_gain: float
    seen: dict[tuple[int, ...], PointResult] = field(default_factory=dict)
    order: list[PointResult] = field(default_factory=list)

    def result(self, coords: tuple[int, ...]) -> PointResult:
        if coords not in self.seen:
            outcome = self.evaluate(self.grid.point_at(coords))
            self.seen[coords] = outcome
            self.order.append(outcome)
        return self.seen[coords]

    def better(self, new: PointResult, old: PointResult) -> bool:
        """A higher score, and not a tie between feasible points (`recommend.tied`)."""
        (tier, _), (old_tier, _) = score(new, self.constraints), score(old, self.constraints)
        if tier == old_tier == 2 and tied(new, old, self.constraints):
            return False
        return score(new, self.constraints) > score(old, self.constraints)

    def gain(self, new: PointResult, old: PointResult) -> float:
        """Relative goodput gain between two feasible points (inf when the tier improved)."""
        (tn, gn), (to, go) = score(new, self.constraints), score(old, self.constraints)
        if tn != to or tn != 2:
            return float("inf") if self.better(new, old) else 0.0
        return (gn - go) / go if go > 0 else float("inf")

    def step(self, coords: tuple[int, ...], axis: int, direction: int) -> tuple[int, ...] | None:
        index = coords[axis] + direction
        if not 0 <= index < self.grid.shape[axis]:
            return None
        return coords[:axis] + (index,) + coords[axis + 1 :]

    def climb_axis(self, coords: tuple[int, ...], axis: int) -> tuple[int, ...]:
        for direction in (1, -1):
            moved = False
            while (nxt := self.step(coords, axis, direction)) is not None:
                new, old = self.result(nxt), self.result(coords)
                if not self.better(new, old):
                    break
                coords, moved = nxt, True
                if self.gain(new, old) < self.min_gain:
                    break  # early exit: the last step gained under 5 %, stop walking this axis
            if moved:
                break
        return coords

    def diagonal(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """Best improving move along several axes at once (escapes ridges such as k = min(c, threads))."""
        best = coords
        for delta in itertools.product((-1, 0, 1), repeat=len(coords)):
            if sum(d != 0 for d in delta) < 2:
                continue  # single-axis moves were tried by climb_axis
            nxt = tuple(c + d for c, d in zip(coords, delta, strict=True))
            if all(0 <= c < n for c, n in zip(nxt, self.grid.shape, strict=True)):
                if self.better(self.result(nxt), self.result(best)):
                    best = nxt
        return best


def smart_search(
    grid: Grid, evaluate: Evaluate, constraints: Constraints, *, min_gain: float = 0.05, max_passes: int = 20
) -> SearchResult:
    """Coordinate hill climbing over `grid`; a step that gains under `min_gain` ends its axis's walk."""
    climber = _Climber(grid, evaluate, constraints, min_gain)
    coords = tuple(n // 2 for n in grid.shape)
    climber.result(coords)
    path = [grid.point_at(coords).point_id]
    for _ in range(max_passes):
        start = coords
        for axis in range(len(grid.shape)):
            coords = climber.climb_axis(coords, axis)
            if grid.point_at(coords).point_id != path[-1]:
                path.append(grid.point_at(coords).point_id)
        if coords == start:
            coords = climber.diagonal(coords)
            if coords == start:
                break
            path.append(grid.point_at(coords).point_id)
    return SearchResult(climber.order, grid.size, path)


def full_search(grid: Grid, evaluate: Evaluate) -> SearchResult:
    """Every point of the grid, in order (the reference the smart search is checked against)."""
    return SearchResult([evaluate(p) for p in grid.points()], grid.size)
