"""A sweep's capacity confirmed by a sustained run, by `qbench capacity`'s rule (`sustain`); under
objective capacity the winner is confirmed and the points ranked again (`rank_confirmed`). Design:
docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qbench.tune.capacity.bisect import sustain
from qbench.tune.capacity.prober import ProbeObserver, Prober
from qbench.tune.knobs.grid import Point
from qbench.tune.ranking.recommend import Ranking
from qbench.tune.sweep.point_runs import point_overrides
from qbench.tune.values.ceiling import (
    Capacity,
    CapacityRecord,
    CapacitySummary,
    ConfirmationSummary,
    ConfirmedPoint,
    held_sentence,
)
from qbench.tune.values.result import PointResult

if TYPE_CHECKING:
    from qbench.tune.sweep.config import SweepConfig

SWEEP_REFINE_FACTOR = 3  # a sweep's bisection probes: up to 3x capacity_duration (qbench capacity: 30 s)
MAX_CONFIRMED = 3  # objective capacity: points confirmed at most before the ranking is taken as it is


def sweep_prober(config: SweepConfig, base_url: str, point: Point, work: Path,
                 observer: ProbeObserver | None = None) -> Prober:
    """The `Prober` of one point's capacity on its warm server: a sweep's probe lengths, folders in `work`."""
    duration = config.probe_duration_s(5.0)
    return Prober(
        config.scenario, base_url, config.constraints, work, config.sweep_dir,
        base_overrides=point_overrides(config, point), duration_s=duration,
        stop_runaway=config.stop_runaway, tolerance=config.capacity.tolerance,
        max_duration_s=SWEEP_REFINE_FACTOR * duration,
        confirm_duration_s=config.capacity.confirm_duration_s or duration, observer=observer,
    )


def confirm_capacity(config: SweepConfig, base_url: str, point: Point, work: Path, capacity: Capacity,
                     observer: ProbeObserver | None = None, restart: Callable[[], str] | None = None
                     ) -> Capacity:
    """`capacity` confirmed by `sustain` on the point's server; `restart`: restart an app qbench launched."""
    prober = sweep_prober(config, base_url, point, work, observer)
    prober.restart = restart
    return sustain(capacity, prober.confirm, config.capacity.plan(confirm=True), restart=lambda failed:
                   prober.fresh_start(failed, capacity.restarts, f"the {failed.kind} run"))


# ---------------------------------------------------------------- objective capacity: rank, confirm, rank


@dataclass
class Confirmation:
    """What the sweep confirmed (recommendation.json: capacity.confirmation)."""

    duration_s: float
    points: list[ConfirmedPoint] = field(default_factory=list)
    capacities: dict[str, Capacity] = field(default_factory=dict)  # by point id, confirmation included
    note: str = ""  # why the winner's capacity is not a confirmed one, when it is not
    winner: str | None = None  # the point ranked first after the confirmations

    def summary(self) -> ConfirmationSummary:
        """What recommendation.json keeps of it (the capacities are in the points' own files)."""
        return ConfirmationSummary(self.duration_s, self.winner, self.note, list(self.points))

    def to_dict(self) -> dict[str, Any]:
        return self.summary().to_dict()


ConfirmPoint = Callable[[PointResult], Capacity | None]  # confirms one point's capacity on its server
Rank = Callable[[list[PointResult]], Ranking]


def rank_confirmed(results: list[PointResult], rank: Rank, confirm: ConfirmPoint, duration_s: float,
                   limit: int = MAX_CONFIRMED) -> tuple[Ranking, Confirmation]:
    """Rank; confirm the winner's capacity (`confirm`; None: nothing to confirm) and rank again, until
    the winner is confirmed or `limit` points were; a confirmed result carries its confirmed capacity."""
    confirmation = Confirmation(duration_s)
    rec = rank(results)
    while rec.winner is not None and rec.winner.point_id not in confirmation.capacities:
        winner = rec.winner
        if len(confirmation.points) >= limit:
            confirmation.note = (f"{winner.point_id}'s capacity is not confirmed: {limit} points were "
                                 "confirmed and each fell below the next one's")
            break
        searched = winner.capacity_rps
        try:
            capacity = confirm(winner)
        except Exception as exc:  # a server that no longer starts: keep the ranking, say so
            confirmation.note = f"{winner.point_id}'s capacity is not confirmed: {str(exc).splitlines()[0]}"
            break
        if capacity is None:
            confirmation.note = f"{winner.point_id}: no capacity to confirm"
            break
        confirmation.capacities[winner.point_id] = capacity
        runs = sum(p.kind == "confirm" for p in capacity.probes)
        confirmation.points.append(ConfirmedPoint(winner.point_id, searched, capacity.capacity_rps,
                                                  capacity.confirmed, runs))
        carry_capacity(winner, capacity)
        rec = rank(results)
    confirmation.winner = rec.winner.point_id if rec.winner is not None else None
    if rec.winner is not None and not confirmation.note:
        done = confirmation.capacities.get(rec.winner.point_id)
        if done is not None and not done.confirmed:
            confirmation.note = (f"no sustained run held at {rec.winner.point_id}: "
                                 f"{_rate(done.capacity_rps)} is the next step down, unconfirmed")
    return rec, confirmation


def carry_capacity(result: PointResult, capacity: Capacity) -> None:
    """`result` with `capacity`: the search without its probes, counted (point results and the ranking)."""
    result.capacity_rps = capacity.capacity_rps
    result.capacity = CapacitySummary.of(capacity)


def capacity_record(capacity: Capacity | None, duration_s: float, searched_rps: float | None = None,
                    confirmation: Confirmation | None = None) -> CapacityRecord | None:
    """recommendation.json's `capacity`: the search with what confirmed it; None without a capacity."""
    if capacity is None:
        return None
    searched = searched_rps if searched_rps is not None else _searched(capacity)
    record = CapacityRecord(capacity, duration_s, searched,
                            confirmation.summary() if confirmation is not None else None)
    record.held = confirmation_line(record)
    return record


def _searched(capacity: Capacity) -> float | None:
    """The answer before any confirmation: the first confirmed rate, else the answer itself."""
    first = next((p for p in capacity.probes if p.kind == "confirm"), None)
    return first.rate_rps if first is not None else capacity.capacity_rps


def confirmation_line(record: CapacityRecord | None) -> str:
    """How the sweep's capacity held, in words (console and report): '' when there is none."""
    if record is None or record.capacity.capacity_rps is None or record.confirm_duration_s is None:
        return ""  # none, or a file from before the confirmation
    rate, confirmed = record.capacity.capacity_rps, record.confirmation
    others = [p for p in confirmed.points if p.point_id != confirmed.winner] if confirmed else []
    fell = "".join(f"; {p.point_id} fell to {_rate(p.capacity_rps)} from {_rate(p.searched_rps)}, "
                   "below the next point" for p in others)
    off = (f"{rate:.3g} req/s is the probes' answer, no sustained run (--confirm-duration 0)"
           if not record.confirm_duration_s else (confirmed.note if confirmed else "") or "no sustained run")
    label, text = held_sentence(record.capacity, off, fell)
    return f"{label}: {text}"


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g} req/s"
