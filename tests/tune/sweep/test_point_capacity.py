"""qbench.tune.sweep.point_capacity: the first guess of a point's capacity search, a result's place on
the grid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qbench.tune.knobs.grid import Point
from qbench.tune.sweep.point_capacity import coords_of, estimate_users
from qbench.tune.values.result import PointResult

from .sweep_configs import config_for


@pytest.mark.parametrize(
    ("knobs", "users"),
    [
        ({"concurrency_limit": 2}, 16),  # 2 x the base server's max_batch_size 4 x 2
        ({"concurrency_limit": 1, "max_batch_size": 1}, 4),  # at least 4
        ({"concurrency_limit": "none"}, 32),  # unknown work slots: 32
    ],
)
def test_a_points_capacity_estimate_uses_twice_its_work_slots(
    tmp_path: Path, knobs: dict[str, Any], users: int
) -> None:
    config = config_for(tmp_path, "concurrency_limit=1,2")
    assert estimate_users(config, Point(knobs)) == users


def test_a_results_coordinates_on_the_grid(tmp_path: Path) -> None:
    config = config_for(tmp_path, "concurrency_limit=1,2,4", "max_batch_size=1,8")
    point = config.grid.point_at((2, 1))
    assert coords_of(config.grid, PointResult(point.point_id, dict(point.knobs))) == (2, 1)
