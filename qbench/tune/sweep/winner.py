"""The winner's capacity after the ranking: confirmed or saved (objective capacity), else measured now."""

from __future__ import annotations

from typing import Protocol

from qbench.errors import QbenchError
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.confirm import Confirmation, confirm_capacity
from qbench.tune.sweep.evaluate import PointServers
from qbench.tune.sweep.point_capacity import coords_of, point_capacity, saved_capacity
from qbench.tune.values.ceiling import Capacity
from qbench.tune.values.result import PointResult


class PhaseObserver(Protocol):
    """Where a sweep's long phases are announced (SweepObserver has it)."""

    def phase(self, text: str) -> None: ...


def winner_capacity(config: SweepConfig, servers: PointServers, winner: PointResult | None,
                     observer: PhaseObserver | None, confirmation: Confirmation | None
                     ) -> tuple[Capacity | None, list[str]]:
    """The winner's capacity and notes: confirmed or saved (objective capacity), else measured now when
    capacity_trials > 0; a failure is a note, not an error."""
    if winner is None:
        return None, []
    if config.constraints.objective == "capacity":
        confirmed = confirmation.capacities.get(winner.point_id) if confirmation else None
        return confirmed or saved_capacity(config.sweep_dir, winner), []
    if config.capacity.trials <= 0:
        return None, []
    if observer:
        seconds = config.capacity.confirm_duration_s
        then = f", then {seconds:g} s to confirm" if seconds else ""
        observer.phase(f"capacity of {winner.point_id}: bisection on the arrival rate{then}")
    try:
        return measure_capacity(config, servers, winner), []
    except QbenchError as exc:
        return None, [f"capacity not measured: {str(exc).splitlines()[0]}"]
    except Exception as exc:  # as for a crashed point: keep the measured points' files
        return None, [f"capacity not measured: {type(exc).__name__}: {exc}".splitlines()[0]]


def measure_capacity(config: SweepConfig, servers: PointServers, winner: PointResult) -> Capacity:
    """The winner's capacity (objective latency) on a server of its own, from its throughput, confirmed."""
    point = config.grid.point_at(coords_of(config.grid, winner))
    work = config.sweep_dir / "capacity"
    with servers.for_point(point, work) as handle:
        return point_capacity(config, handle.base_url, point, work, first_rate=winner.throughput_rps or 1.0,
                              confirm=True)


def confirm_point(config: SweepConfig, servers: PointServers, result: PointResult,
                   observer: PhaseObserver | None) -> Capacity | None:
    """Objective capacity: a point's saved capacity confirmed by a sustained run on its own server."""
    saved = saved_capacity(config.sweep_dir, result)
    if saved is None or saved.capacity_rps is None:
        return saved
    if observer:
        observer.phase(f"confirming {result.point_id}: {config.capacity.confirm_duration_s:g} s at "
                       f"{saved.capacity_rps:.3g} req/s")
    point = config.grid.point_at(coords_of(config.grid, result))
    work = config.sweep_dir / "confirm" / result.point_id
    with servers.for_point(point, work) as handle:
        return confirm_capacity(config, handle.base_url, point, work, saved, restart=handle.restart)
