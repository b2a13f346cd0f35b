"""What a capacity search found, as every later stage and file shares it: Probe, Capacity, RateNow, and the
short forms a sweep point and recommendation.json carry. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from qbench.run import Figures, Readable, ReadableOrNone, Steadiness
from qbench.tune.verdicts.degradation import Degradation
from qbench.tune.verdicts.metastable import Metastability
from qbench.tune.verdicts.overload import Overload

HOST_BUSY = 0.1  # the load generator's loop waiting for a core this share of a probe: a busy host


@dataclass
class Probe(Figures, Readable):
    """One measurement at one offered rate (or the closed-loop estimate): its figures and verdict."""

    rate_rps: float  # offered arrival rate (req/s); for the estimate, the completions/s it measured
    passed: bool  # the SLO held and the server kept up (steady), and it was not stopped early
    kind: str = "rate"  # "rate" (open loop) | "confirm" (the sustained run) | "estimate" (closed loop,
    #                     not part of the bracket) | "overload" (past the capacity, not part of it) |
    #                     "stalled" (failed while the host stalled, measured again: not part of it) |
    #                     "recheck" (the first passing rate again after the search:
    #                     qbench.tune.verdicts.degradation) | "after" (the answer again right after the
    #                     overload run: did the server come back? passed or not, not part of the bracket)
    #                     | "now" (an app that ages with use: a sustained run once the others are over,
    #                     the rate it holds now: RateNow; not part of the bracket)
    stopped: str = ""  # why the probe was stopped early (backlog grew), "" when it ran to the end
    violations: list[str] = field(default_factory=list)  # broken bounds and "not steady, ..." evidence
    completed_ok: int = 0
    users: int | None = None  # closed-loop users of the estimate probe
    run_dir: str = ""  # the probe's run folder, relative to the capacity folder
    elapsed_s: float = 0.0  # wall time of the probe
    duration_s: float = 0.0  # seconds of load planned (after the warm-up); 0 in files before it was kept
    steady: bool | None = None  # the server kept up (None: not judged, too few requests or an old file)
    steadiness: Steadiness | None = None  # rates, backlog/wait slopes, verdict (qbench.run.results.steady)
    host_stall: str = ""  # the load generator itself lagged (the host stalled): why, in words; "" when not
    host_wait: float | None = None  # the load generator's loop waited for a core this share of the probe

    @property
    def verdict(self) -> str:
        if self.kind == "estimate":
            return "estimate"
        if self.kind in ("overload", "stalled", "recheck"):
            return self.kind
        if self.stopped:
            return "runaway"
        return "pass" if self.passed else "fail"

    @property
    def why(self) -> str:
        """What broke ('not steady, backlog +5.1/s ± 0.4'; a bound; a stalled host), or '' for a pass."""
        broke = self.stopped or "; ".join(self.violations)
        return f"{broke}; {self.host_stall}" if broke and self.host_stall else broke

    def to_dict(self) -> dict[str, Any]:
        steadiness = self.steadiness.to_dict() if self.steadiness is not None else None
        return {**asdict(self), "steadiness": steadiness, "verdict": self.verdict}


@dataclass(frozen=True)
class RateNow(ReadableOrNone):
    """The rate an app that ages with use holds after qbench's runs (sustained runs, stepping down)."""

    rate_rps: float | None  # the rate that held a sustained run (None: none tried held)
    first_rps: float  # the first rate tried
    start_s: float  # the metric's median when the answer was confirmed (or at the recheck)
    now_s: float  # its median (or projection) once qbench's runs were over, before this run
    slope_s: float  # seconds of the metric added per request served (the measured ageing)
    requests: int  # ok requests qbench's runs had served before it
    metric: str = "service time"
    start_at: str = "the confirmation"  # the run start_s was measured in (or "the recheck")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Capacity(Readable, tolerant=True):
    capacity_rps: float | None = None  # highest rate that met the SLO (None: even the lowest tried failed)
    failing_rate_rps: float | None = None  # lowest rate above it that broke the SLO (None: none did)
    tolerance: float = 0.0
    converged: bool = False  # failing / passing <= 1 + tolerance (or the search hit min_rate / max_rate)
    confirmed: bool = False  # the capacity held a sustained run (SearchPlan.confirm; a repeat without one)
    probes: list[Probe] = field(default_factory=list)  # every probe, in order (the estimate first)
    overload: Overload | None = None  # what happened past the capacity (qbench.tune.verdicts.overload)
    degradation: Degradation | None = None  # the server got slower during the search? (tune.degradation)
    burst_change: Degradation | None = None  # the answer's confirmation against the run right after the
    #                                          run past it: how much that burst aged the server
    recheck_note: str = ""  # why a recheck that ran gave no degradation verdict (too few requests)
    collapsed: str = ""  # the recheck found the server no longer keeping up with a rate it had: why, in words
    metastability: Metastability | None = None  # service time against the queue (tune.metastable)
    lowered_from_rps: float | None = None  # the search's answer, when metastability lowered it
    now: RateNow | None = None  # an app that ages with use: the rate it holds once qbench's runs are over
    restarts: list[str] = field(default_factory=list)  # an app qbench started (--app) that its runs left
    #                                                   collapsed, restarted: after what, in words

    @property
    def at_capacity(self) -> Probe | None:
        """The passing probe at the capacity rate, the sustained confirmation first."""
        hits = [p for p in self.probes if p.kind in ("rate", "confirm") and p.passed
                and p.rate_rps == self.capacity_rps]
        hits.sort(key=lambda p: p.kind == "confirm")
        return hits[-1] if hits else None

    @property
    def confirmation(self) -> Probe | None:
        """The sustained run that held at the capacity (None: none did, or none was run)."""
        at = self.at_capacity
        return at if at is not None and at.kind == "confirm" else None

    @property
    def first_failing(self) -> Probe | None:
        """The last failing probe at the failing rate (what broke there is the reason it is the limit)."""
        failing = self.failing_rate_rps
        hits = [p for p in self.probes if p.kind in ("rate", "confirm") and not p.passed
                and p.rate_rps == failing]
        return hits[-1] if hits else None

    @property
    def after_burst(self) -> Probe | None:
        """The short run at the answer right after the run past it: did the server come back?"""
        return next((p for p in reversed(self.probes) if p.kind == "after"), None)

    @property
    def host_busy(self) -> float | None:
        """Largest share of an answer's probe the client waited for a core; None under HOST_BUSY."""
        waits = [p.host_wait or 0.0 for p in self.probes if p.kind in ("rate", "confirm")]
        most = max(waits, default=0.0)
        return most if most >= HOST_BUSY else None

    @property
    def over_the_search(self) -> str | None:
        """The recheck's finding in words: its verdict, or why it has none (None: no recheck ran)."""
        if self.collapsed:
            return self.collapsed
        return self.degradation.text() if self.degradation is not None else (self.recheck_note or None)

    def users(self, think_time_s: float) -> float | None:
        """Users served by Little's law, N = X x (Z + R), at think time `think_time_s` (None: no capacity)."""
        probe = self.at_capacity
        if self.capacity_rps is None or probe is None:
            return None
        return self.capacity_rps * (think_time_s + (probe.mean_latency_s or 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity_rps": self.capacity_rps,
            "failing_rate_rps": self.failing_rate_rps,
            "tolerance": self.tolerance,
            "converged": self.converged,
            "confirmed": self.confirmed,
            "probes": [p.to_dict() for p in self.probes],
            "overload": self.overload.to_dict() if self.overload is not None else None,
            "degradation": self.degradation.to_dict() if self.degradation is not None else None,
            "burst_change": self.burst_change.to_dict() if self.burst_change is not None else None,
            "recheck_note": self.recheck_note,
            "collapsed": self.collapsed,
            "metastability": self.metastability.to_dict() if self.metastability is not None else None,
            "lowered_from_rps": self.lowered_from_rps,
            "now": self.now.to_dict() if self.now is not None else None,
            "restarts": list(self.restarts),
        }


def held_sentence(capacity: Capacity, off: str, fell: str = "") -> tuple[str, str]:
    """("held" or "NOT confirmed", how the sustained confirmation went, in words); `off`: why none ran;
    `fell`: the other points whose confirmation fell."""
    runs = [p for p in capacity.probes if p.kind == "confirm"]
    stepped = "".join(f"; failed at {p.rate_rps:.3g} req/s ({p.why})" for p in runs if not p.passed)
    rate, held = capacity.capacity_rps, capacity.confirmation
    if held is not None and rate is not None:
        steady = held.steadiness.evidence if held.steadiness is not None else ""
        passed = [p for p in runs if p.passed and p.rate_rps == rate]
        whole = (f"each of {len(passed)} {held.duration_s:g} s confirmations (different Poisson seeds)"
                 if len(passed) > 1 else f"the whole {held.duration_s:g} s confirmation")
        p95s = " / ".join(f"{p.p95_latency_s or 0:.3g}" for p in passed) if passed else "0"
        return ("held", f"for {whole} at {rate:.3g} req/s: p95 {p95s} s, {held.throughput_rps:.3g} ok/s"
                        + (f", steady ({steady})" if steady else "") + stepped + fell)
    if capacity.confirmed:
        return ("held", "passed a repeat probe")
    if runs and rate is not None:
        return ("NOT confirmed", f"no sustained run held{stepped}: {rate:.3g} req/s is the next step down")
    return ("NOT confirmed", off)


@dataclass
class CapacitySummary(ReadableOrNone):
    """A capacity search as a point result carries it (probes counted); `predicted`: a simulator's figure."""

    capacity_rps: float | None = None
    failing_rate_rps: float | None = None
    tolerance: float = 0.0
    converged: bool = False
    confirmed: bool = False
    probes: int = 0
    predicted: bool = False
    overload: Overload | None = None
    degradation: Degradation | None = None

    @classmethod
    def of(cls, capacity: Capacity) -> CapacitySummary:
        return cls(capacity.capacity_rps, capacity.failing_rate_rps, capacity.tolerance, capacity.converged,
                   capacity.confirmed, len(capacity.probes), overload=capacity.overload,
                   degradation=capacity.degradation)

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """An older file kept the probes: their count."""
        if isinstance(data.get("probes"), list):
            data["probes"] = len(data["probes"])
        return data

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overload": self.overload.to_dict() if self.overload is not None else None,
                "degradation": self.degradation.to_dict() if self.degradation is not None else None}


@dataclass
class ConfirmedPoint:
    """One point's capacity before and after its sustained confirmation (objective capacity)."""

    point_id: str
    searched_rps: float | None  # what its probes found (unconfirmed)
    capacity_rps: float | None  # after the confirmation (the highest rate that held, when a run failed)
    confirmed: bool  # a run held for the whole confirmation at capacity_rps
    runs: int  # sustained runs (a failure steps down, or bisects once a rate held)


@dataclass
class ConfirmationSummary(ReadableOrNone, tolerant=True):
    """What a capacity sweep confirmed, as recommendation.json keeps it (capacity.confirmation)."""

    duration_s: float = 0.0
    winner: str | None = None  # the point ranked first after the confirmations
    note: str = ""  # why the winner's capacity is not a confirmed one, when it is not
    points: list[ConfirmedPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CapacityRecord(ReadableOrNone, tolerant=True):
    """A sweep's answer (recommendation.json's `capacity`, written flat): the winner's search, its
    confirmation (0 s: none; None: an older file) and how it held, in words."""

    capacity: Capacity
    confirm_duration_s: float | None = None
    searched_rps: float | None = None
    confirmation: ConfirmationSummary | None = None
    held: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = self.capacity.to_dict()
        if self.confirm_duration_s is not None:
            out.update(confirm_duration_s=self.confirm_duration_s, searched_rps=self.searched_rps)
        if self.confirmation is not None:
            out["confirmation"] = self.confirmation.to_dict()
        out["held"] = self.held
        return out

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Written flat: the search's keys beside this record's own."""
        own = ("confirm_duration_s", "searched_rps", "confirmation", "held")
        return {**{k: data[k] for k in own if k in data}, "capacity": data}
