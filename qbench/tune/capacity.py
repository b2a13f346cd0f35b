"""Capacity: the highest open-loop arrival rate at which the SLO still holds, found by bracketing and
bisection on the rate (pure search logic; the probes against a server are in `qbench.tune.capacity_run`).

    first guess r0 (a closed-loop estimate of the completions/s, or a sweep point's throughput)
    bracket:  probe r0; while every probe passed, go up by `step`; while every probe failed, go down;
              the step grows (1.25, 1.56, 2.44, 5.96: squared after each move the same way), so a poor
              guess costs a few probes, a good one (the usual case) one or two
    bisect:   probe sqrt(lo x hi) until hi / lo <= 1 + tolerance
    confirm:  probe lo once more (optional); a pass makes the answer stable, a fail is noise at the
              boundary: lo becomes the new failing rate, the bracket moves down, and the search goes on

A probe that was stopped because its queue ran away counts as failing, whatever its partial figures say.
The answer is the bracket [last passing, first failing]: `capacity_rps` is the last passing rate, so the
true capacity lies in [capacity_rps, failing_rate_rps) up to measurement noise; `converged` says whether
that bracket is within the tolerance (the probe budget can run out first). A target that fails even at
`min_rate` has no capacity (None); one that passes `max_rate` has no failing rate (None).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Probe:
    """One measurement at one offered rate (or the closed-loop estimate, `kind` "estimate")."""

    rate_rps: float  # offered arrival rate (req/s); for the estimate, the completions/s it measured
    passed: bool  # the SLO held (and the queue did not run away)
    kind: str = "rate"  # "rate" (open loop) | "estimate" (closed loop, not part of the bracket)
    stopped: str = ""  # why the probe was stopped early (queue ran away), "" when it ran to the end
    violations: list[str] = field(default_factory=list)  # broken bounds, as in a sweep's reasons
    throughput_rps: float = 0.0  # ok completions per second
    goodput_rps: float = 0.0
    p50_latency_s: float | None = None
    p95_latency_s: float | None = None
    p99_latency_s: float | None = None
    mean_latency_s: float | None = None
    error_rate: float = 0.0
    completed_ok: int = 0
    users: int | None = None  # closed-loop users of the estimate probe
    run_dir: str = ""  # the probe's run folder, relative to the capacity folder
    elapsed_s: float = 0.0  # wall time of the probe

    @property
    def verdict(self) -> str:
        if self.kind == "estimate":
            return "estimate"
        if self.stopped:
            return "runaway"
        return "pass" if self.passed else "fail"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Probe:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class SearchPlan:
    """How hard to search: the stop rule and the probe budget."""

    tolerance: float = 0.05  # stop when failing / passing rate <= 1 + tolerance
    max_probes: int = 10  # open-loop probes at most (the estimate is not counted)
    step: float = 1.25  # first bracketing step (x or /), squared after each move the same way
    min_rate: float = 0.05
    max_rate: float = 10_000.0
    confirm: bool = False  # probe the answer once more before calling it stable


@dataclass
class Capacity:
    """What the search found (see the module docstring)."""

    capacity_rps: float | None  # highest rate that met the SLO (None: even the lowest tried failed)
    failing_rate_rps: float | None  # lowest rate above it that broke the SLO (None: none did)
    tolerance: float
    converged: bool  # failing / passing <= 1 + tolerance (or the search hit min_rate / max_rate)
    confirmed: bool = False  # the capacity passed twice (with SearchPlan.confirm)
    probes: list[Probe] = field(default_factory=list)  # every probe, in order (the estimate first)

    @property
    def at_capacity(self) -> Probe | None:
        """The last passing probe at the capacity rate (its latency is the latency at capacity)."""
        hits = [p for p in self.probes if p.kind == "rate" and p.passed and p.rate_rps == self.capacity_rps]
        return hits[-1] if hits else None

    @property
    def first_failing(self) -> Probe | None:
        """The last failing probe at the failing rate (what broke there is the reason it is the limit)."""
        failing = self.failing_rate_rps
        hits = [p for p in self.probes if p.kind == "rate" and not p.passed and p.rate_rps == failing]
        return hits[-1] if hits else None

    def users(self, think_time_s: float) -> float | None:
        """Little's law: N = X x (Z + R), with X the capacity, Z the think time and R the mean latency
        at capacity: the number of users, each clicking every Z s after their last answer, it serves."""
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
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Capacity:
        return cls(
            capacity_rps=data.get("capacity_rps"),
            failing_rate_rps=data.get("failing_rate_rps"),
            tolerance=float(data.get("tolerance", 0.0)),
            converged=bool(data.get("converged", False)),
            confirmed=bool(data.get("confirmed", False)),
            probes=[Probe.from_dict(p) for p in data.get("probes", [])],
        )


Measure = Callable[[float], Probe]


@dataclass
class _Search:
    measure: Measure
    plan: SearchPlan
    probes: list[Probe] = field(default_factory=list)

    def probe(self, rate: float) -> bool:
        result = self.measure(rate)
        result.passed = result.passed and not result.stopped  # a runaway is over capacity
        self.probes.append(result)
        return result.passed

    @property
    def budget_left(self) -> bool:
        return sum(p.kind == "rate" for p in self.probes) < self.plan.max_probes

    def highest_pass_below(self, rate: float) -> float | None:
        passing = [p.rate_rps for p in self.probes if p.kind == "rate" and p.passed and p.rate_rps < rate]
        return max(passing) if passing else None

    def bracket(self, rate: float) -> tuple[float | None, float | None]:
        """(passing, failing) neighbours found by stepping from `rate`; either is None at a limit."""
        return self.up(rate) if self.probe(rate) else self.down(rate)

    def up(self, rate: float) -> tuple[float | None, float | None]:
        """From a passing `rate`, step up until a probe fails."""
        step = self.plan.step
        while self.budget_left and rate < self.plan.max_rate:
            higher = min(rate * step, self.plan.max_rate)
            if not self.probe(higher):
                return rate, higher
            rate, step = higher, step * step
        return rate, None

    def down(self, rate: float) -> tuple[float | None, float | None]:
        """From a failing `rate`, step down until a probe passes."""
        step = self.plan.step
        while self.budget_left and rate > self.plan.min_rate:
            lower = max(rate / step, self.plan.min_rate)
            if self.probe(lower):
                return lower, rate
            rate, step = lower, step * step
        return None, rate

    def bisect(self, lo: float, hi: float) -> tuple[float, float]:
        while hi / lo > 1 + self.plan.tolerance and self.budget_left:
            mid = math.sqrt(lo * hi)
            if self.probe(mid):
                lo = mid
            else:
                hi = mid
        return lo, hi


def search_capacity(measure: Measure, first_rate: float, plan: SearchPlan | None = None,
                    estimate: Probe | None = None) -> Capacity:
    """Bracket, bisect and (optionally) confirm the highest rate whose probe passes; see the module
    docstring. `measure(rate)` runs one probe; `estimate` (the probe that gave `first_rate`) is kept
    first in the list of probes."""
    plan = plan or SearchPlan()
    search = _Search(measure, plan, [estimate] if estimate else [])
    lo, hi = search.bracket(min(max(first_rate, plan.min_rate), plan.max_rate))
    confirmed = False
    while lo is not None and hi is not None:
        lo, hi = search.bisect(lo, hi)
        if not plan.confirm or hi / lo > 1 + plan.tolerance or not search.budget_left:
            break
        if search.probe(lo):
            confirmed = True
            break
        hi, lo = lo, search.highest_pass_below(lo)  # the pass at lo was luck: move the bracket down
        if lo is None:
            lo, hi = search.down(hi)
    return Capacity(lo, hi, plan.tolerance, _converged(lo, hi, plan), confirmed, search.probes)


def _converged(lo: float | None, hi: float | None, plan: SearchPlan) -> bool:
    """The bracket is within the tolerance, or the search ended at one of its limits."""
    if lo is not None and hi is not None:
        return hi / lo <= 1 + plan.tolerance
    if hi is None:
        return lo is not None and lo >= plan.max_rate
    return hi <= plan.min_rate
