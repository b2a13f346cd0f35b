"""One capacity probe judged: the scenario at an open-loop arrival rate passes when the SLO holds and
the server kept up (`judge`); `ProbeLength`: how long a bisection probe lasts. Rules:
docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from qbench.run import Scenario, Steadiness, Summary, generator_lag, probe_seconds
from qbench.tune.values.ceiling import Probe
from qbench.tune.values.constraints import Constraints

MIN_P95_REQUESTS = 100  # a p95 resting on fewer is mostly noise
SLO_WAITS = 5  # a probe lasts at least this many SLO latency bounds
STALL_SHARE = 0.5  # a generator lag this share of the SLO's latency bound marks a stalled host ...
STALL_FLOOR_S = 0.05  # ... and at least this long
STALL_NO_BOUND_S = 0.25  # the stall without a latency bound in the SLO


def rate_overrides(base: dict[str, Any], rate: float, duration_s: float) -> dict[str, Any]:
    """`base` overrides turned into an open-loop probe at `rate` for `duration_s` (no count limit)."""
    overrides = {k: v for k, v in base.items() if k not in ("load.users", "load.rate")}
    overrides.update({"load.rate": rate, "load.duration": duration_s, "load.requests": None,
                      "load.interval": None})
    return overrides


def seed_overrides(scenario: Scenario, offset: int) -> dict[str, Any]:
    """The overrides that move the seed of arrivals and payloads (`Scenario.seed`) by `offset`."""
    key = "mix.0.payload.seed" if scenario.mix else "journey.0.payload.seed" if scenario.journey else (
        "payload.seed")
    return {key: scenario.seed + offset}


def judge(kind: str, rate: float, summary: Summary, stopped: str | None,
          constraints: Constraints, steady: Steadiness | None = None,
          own: dict[str, dict[str, float]] | None = None) -> Probe:
    """A probe's figures and verdict from its summary and steady-state test; `own`: a mix entry's bounds."""
    violations = [c.why for c in constraints.run_checks(summary) if not c.passed]
    violations += endpoint_violations(summary, constraints, own)
    completed = summary.completed_ok
    if completed == 0 and not violations:
        violations.append("no request completed")
    if steady is not None and not steady.steady:
        violations.insert(0, steady.verdict)
    return Probe(
        host_stall=host_stall(summary, constraints),
        host_wait=summary.generator.loop_wait_share,
        rate_rps=rate,
        passed=not violations and not stopped,
        kind=kind,
        stopped=stopped or "",
        violations=violations,
        **summary.figures().figure_values(),
        completed_ok=completed,
        steady=None if steady is None else steady.steady,
        steadiness=steady,
    )


def host_stall(summary: Summary, constraints: Constraints) -> str:
    """Why the host stalled ('' unless the generator's p99 lag reached STALL_SHARE of the SLO bound)."""
    lag = generator_lag(summary)
    bound = latency_bound_s(constraints)
    limit = max(STALL_FLOOR_S, STALL_SHARE * bound) if bound else STALL_NO_BOUND_S
    if lag is None or lag < limit:
        return ""
    return (f"the load generator stalled (p99 lag {lag:.3g} s >= {limit:.3g} s): the host, not only the "
            "server, was slow")


def latency_bound_s(constraints: Constraints) -> float | None:
    """The SLO's tightest latency or queue-wait bound (s), None without one."""
    bounds = [v for k, v in constraints.slo.items() if k.endswith(("_latency_s", "_queue_wait_s"))]
    return min(bounds) if bounds else None


@dataclass(frozen=True)
class ProbeLength:
    """How long a bisection probe lasts at a rate (`seconds`), and why (`why`)."""

    tolerance: float
    floor_s: float  # the bracket's probes, and the shortest of the bisection's
    cap_s: float
    bound_s: float | None  # the SLO's latency bound

    def seconds(self, rate: float) -> float:
        return min(max(self.needs(rate).values(), default=self.floor_s), self.cap_s)

    def needs(self, rate: float) -> dict[str, float]:
        needs = {"floor": self.floor_s, "overload": probe_seconds(rate, self.tolerance),
                 "p95": MIN_P95_REQUESTS / rate}
        if self.bound_s is not None:
            needs["slo"] = SLO_WAITS * self.bound_s
        return needs

    def why(self, rate: float) -> str:
        needs, seconds = self.needs(rate), self.seconds(rate)
        overload = needs["overload"]
        growth = self.tolerance / (1 + self.tolerance) * rate * seconds
        text = (f"{seconds:.3g} s at {rate:.3g} req/s: an overload of {self.tolerance:.0%} grows the backlog "
                f"by {growth:.0f} requests in that time against arrival noise of "
                f"{(rate * seconds) ** 0.5:.0f} (certain after {overload:.3g} s)")
        if seconds >= self.cap_s and overload > self.cap_s:
            text += (f"; capped at --max-duration {self.cap_s:g} s, so a smaller overload may pass a probe: "
                     "the sustained confirmation catches it")
        if needs["p95"] >= seconds * 0.99:
            text += f"; {MIN_P95_REQUESTS} requests for a p95"
        if self.bound_s is not None and needs["slo"] >= seconds * 0.99:
            text += f"; {SLO_WAITS} x the SLO's {self.bound_s:g} s bound"
        return text

    def to_dict(self, rate: float) -> dict[str, Any]:
        return {"seconds": self.seconds(rate), "at_rps": rate, "why": self.why(rate),
                "tolerance": self.tolerance, "floor_s": self.floor_s, "cap_s": self.cap_s}


def endpoint_violations(summary: Summary, constraints: Constraints,
                        own: dict[str, dict[str, float]] | None = None) -> list[str]:
    """A mix: the bounds each endpoint breaks on its own (`endpoint: bound`); `own`: entries' slo."""
    shared = {k: v for k, v in constraints.slo.items() if not k.startswith("min_")}
    broken = []
    for label, sub in summary.endpoints.items():
        if sub.requests:
            bounds = replace(constraints, slo={**shared, **(own or {}).get(label, {})})
            broken += [f"{label}: {c.why}" for c in bounds.run_checks(sub) if not c.passed]
    return broken


def own_bounds(scenario: Scenario) -> dict[str, dict[str, float]]:
    """The bounds each mix entry's own slo sets, by endpoint label ({} without a mix)."""
    from qbench.run import endpoint_slos

    return {label: slo.thresholds() for label, slo in (endpoint_slos(scenario) or {}).items() if slo}
