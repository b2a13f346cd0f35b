"""Tune server settings: the pipeline behind `qbench sweep`, `capacity`, `plan` and `serve --replicas`.
Its rooms, bottom first (each imports only run/ and the rooms before it): knobs/ (the settings tuned, the
grid), verdicts/ (what a run's records say beyond its figures), values/ (what later stages share), ranking/
(results -> the recommendation), servers/ (the servers measured, the app hook), points/ (one point
measured), search/ (which points to measure), then the commands' rooms capacity/, sweep/ and plan/.
What report/ and qbench.analysis read of a sweep, a capacity or a plan comes through this face (FACE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qbench import lazy_names

# What the stages above tune/ may use, by the module that defines it.
FACE: dict[str, tuple[str, ...]] = {
    "qbench.tune.plan.replicas": ("plan_lines",),
    "qbench.tune.ranking.recommend": ("Recommendation",),
    "qbench.tune.search.fit": ("MeasuredPoint", "Predicted", "stored_rows"),
    "qbench.tune.values.ceiling": ("Capacity",),
    "qbench.tune.values.capacity_file": ("CapacityFile",),
    "qbench.tune.values.point_file": ("read_point_file",),
    "qbench.tune.values.sweep_info": ("SweepInfo",),
    "qbench.tune.verdicts.overload": ("Overload",),
}
_HOME = {name: module for module, names in FACE.items() for name in names}
__all__ = sorted(_HOME)

if TYPE_CHECKING:
    from qbench.tune.plan.replicas import plan_lines as plan_lines
    from qbench.tune.ranking.recommend import Recommendation as Recommendation
    from qbench.tune.search.fit import MeasuredPoint as MeasuredPoint
    from qbench.tune.search.fit import Predicted as Predicted
    from qbench.tune.search.fit import stored_rows as stored_rows
    from qbench.tune.values.capacity_file import CapacityFile as CapacityFile
    from qbench.tune.values.ceiling import Capacity as Capacity
    from qbench.tune.values.point_file import read_point_file as read_point_file
    from qbench.tune.values.sweep_info import SweepInfo as SweepInfo
    from qbench.tune.verdicts.overload import Overload as Overload


__getattr__ = lazy_names("qbench.tune", _HOME)
