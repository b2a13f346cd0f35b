"""A capacity plan: how many replicas hold a stated peak of users under the SLO, what they cost, and the
load generator that measures them (pure arithmetic; qbench.tune.plan.command reads the capacity)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from qbench.errors import ScenarioError
from qbench.run import Figures
from qbench.tune.verdicts.overload import OVERLOAD_FACTOR

HOURS_PER_MONTH = 730.0  # 8,760 hours a year / 12
GENERATOR_BUSY = 0.7  # share of one core a generator process may use before its timing suffers
PLAN_SCHEMA_VERSION = 2  # 2: spare, survives_loss


@dataclass(frozen=True)
class Traffic:
    """The peak to plan for: closed-loop users with a think time, users with a message rate, or a rate."""

    users: int | None = None  # peak concurrent users
    think_time_s: float | None = None  # seconds between an answer and the user's next message
    messages_per_minute: float | None = None  # per user (instead of a think time)
    rate_rps: float | None = None  # a peak request rate, given directly (instead of users)
    requests_per_message: float = 1.0  # requests one message makes (a journey's requests per user)

    def rate(self, latency_s: float) -> float:
        """The offered request rate (req/s) at the peak, `latency_s` the mean latency of one request."""
        k = self.requests_per_message
        if self.rate_rps is not None:
            return self.rate_rps
        assert self.users is not None
        if self.messages_per_minute is not None:
            return self.users * k * self.messages_per_minute / 60
        assert self.think_time_s is not None
        return self.users * k / (self.think_time_s + k * latency_s)

    def cycle_s(self, latency_s: float) -> float | None:
        """One user's seconds per message (think + its requests' latency; 60 / m), None for a rate."""
        if self.rate_rps is not None:
            return None
        if self.messages_per_minute is not None:
            return 60 / self.messages_per_minute
        assert self.think_time_s is not None
        return self.think_time_s + self.requests_per_message * latency_s

    def rests_on(self, latency_s: float) -> str:
        k = self.requests_per_message
        per = f" x {k:g} requests per message" if k != 1 else ""
        if self.rate_rps is not None:
            return "the peak rate given (--rate)"
        if self.messages_per_minute is not None:
            return f"{self.users} users x {self.messages_per_minute:g} messages/min / 60{per}"
        journey = f"{k:g} x " if k != 1 else ""
        return (f"{self.users} closed-loop users{per} / ({self.think_time_s:g} s think + {journey}"
                f"{latency_s:.3g} s mean latency at capacity)")


def traffic(users: int | None, think_time_s: float | None, messages_per_minute: float | None,
            rate_rps: float | None, requests_per_message: float = 1.0) -> Traffic:
    """Validate the traffic options into a Traffic; a bad combination or value raises ScenarioError."""
    if rate_rps is not None:
        if users is not None or think_time_s is not None or messages_per_minute is not None:
            raise ScenarioError("--rate is the whole peak: drop --users, --think-time and "
                                "--messages-per-minute")
        _positive("--rate", rate_rps)
    elif users is None:
        raise ScenarioError("no traffic: pass --users N with --think-time S or --messages-per-minute M, "
                            "or --rate R (req/s)")
    else:
        _positive("--users", users)
        if (think_time_s is None) == (messages_per_minute is None):
            raise ScenarioError("--users needs exactly one of --think-time S (seconds between an answer and "
                                "the next message) and --messages-per-minute M (per user)")
        if think_time_s is not None and think_time_s < 0:
            raise ScenarioError(f"--think-time {think_time_s}: expected seconds >= 0")
        if messages_per_minute is not None:
            _positive("--messages-per-minute", messages_per_minute)
    _positive("--requests-per-message", requests_per_message)
    return Traffic(users, think_time_s, messages_per_minute, rate_rps, requests_per_message)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ScenarioError(f"{name} {value}: expected a positive number")


@dataclass
class Replica(Figures):
    """One replica as `qbench capacity` measured it: its confirmed capacity and the figures there."""

    capacity_rps: float  # the confirmed capacity of one replica (req/s)
    confirmed: bool = True  # a sustained run held at capacity_rps
    slo: str = ""  # the SLO in words ("p95_latency_s <= 0.5, error_rate <= 1.0%")
    source: str = ""  # the capacity.json it came from
    target: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # {knobs, code, gradio, from}
    generator_cpu_per_request_s: float | None = None  # the confirmation's generator CPU / requests sent
    generator_processes: int = 1
    arrival: str | None = None  # the scenario's arrival process (constant | poisson) during the search


@dataclass(frozen=True)
class Plan:
    """The replicas, users, cost and generator a peak needs, each figure with what it rests on (`lines`)."""

    measured: Replica
    traffic: Traffic
    headroom: float  # margin over the measured capacity at the peak (0.3: plan for 1.3 x the peak)
    rate_rps: float  # offered request rate at the peak
    replicas: int  # the replicas the peak needs with its headroom, plus `spare`
    utilization: float  # rate / (replicas x capacity) at the peak
    fleet_capacity_rps: float  # predicted: replicas x one replica's capacity
    users_per_replica: float | None  # Little's law, keeping the headroom free (None for a rate given)
    users_per_replica_at_capacity: float | None  # Little's law at capacity
    users_per_replica_at_peak: float | None  # the peak's users / replicas (None for a rate given)
    spare: int = 0  # replicas on top, so that losing this many still holds the peak with its headroom
    survives_loss: int = 0  # replicas that may be lost with the fleet still holding the PEAK (no headroom)
    price_per_hour: float | None = None  # per replica-hour
    cost_per_hour: float | None = None
    cost_per_month: float | None = None
    cost_per_1k_requests: float | None = None
    generator_rps: float | None = None  # what one generator process reaches (GENERATOR_BUSY of a core)
    fleet_probe_rps: float = 0.0  # the highest rate a capacity run of the fleet offers (x OVERLOAD_FACTOR)
    generator_processes: int = 1  # processes needed to offer fleet_probe_rps
    lines: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lines"] = [list(line) for line in self.lines]
        return {"schema_version": PLAN_SCHEMA_VERSION, "kind": "plan", **data}


def plan_lines(data: Any) -> list[tuple[str, str]]:
    """The printed lines of a plan.json (`Plan.to_dict`), [] for anything else: what a report shows."""
    lines = data.get("lines") if isinstance(data, dict) and data.get("kind") == "plan" else None
    if not isinstance(lines, list):
        return []
    return [(str(p[0]), str(p[1])) for p in lines if isinstance(p, list) and len(p) == 2]


def make_plan(measured: Replica, traffic: Traffic, headroom: float = 0.3,
              price_per_hour: float | None = None, spare: int = 0) -> Plan:
    """The plan for `traffic` on replicas like `measured`, `spare` on top; ScenarioError on bad input."""
    if measured.capacity_rps <= 0:
        raise ScenarioError(f"{measured.source}: capacity {measured.capacity_rps} req/s: nothing to plan "
                            "with")
    if headroom < 0:
        raise ScenarioError(f"--headroom {headroom}: expected a fraction >= 0 (30% or 0.3)")
    if price_per_hour is not None and price_per_hour < 0:
        raise ScenarioError(f"--price {price_per_hour}: expected a price per replica-hour >= 0")
    if spare < 0:
        raise ScenarioError(f"--spare {spare}: expected a number of replicas >= 0")
    cap, latency = measured.capacity_rps, measured.mean_latency_s or 0.0
    if traffic.think_time_s == 0 and traffic.messages_per_minute is None and traffic.rate_rps is None \
            and not latency > 0:
        raise ScenarioError(f"--think-time 0: {measured.source or 'the capacity'} records no mean latency at "
                            "capacity, so the rate of users who send again at once (users / latency) is "
                            "unknown: pass --think-time S > 0, --messages-per-minute M or --rate R")
    rate = traffic.rate(latency)
    needed = max(1, math.ceil(rate * (1 + headroom) / cap - 1e-9))  # 2.0000000001 replicas are 2
    replicas = needed + spare
    holds_peak = max(1, math.ceil(rate / cap - 1e-9))  # replicas that carry the peak with no margin
    cycle = traffic.cycle_s(latency)
    k = traffic.requests_per_message
    per_replica = None if cycle is None else cap / (1 + headroom) * cycle / k
    at_capacity = None if cycle is None else cap * cycle / k
    cost_hour = None if price_per_hour is None else replicas * price_per_hour
    fleet = replicas * cap * OVERLOAD_FACTOR
    gen = None
    processes = 1
    if measured.generator_cpu_per_request_s:
        gen = GENERATOR_BUSY / measured.generator_cpu_per_request_s
        processes = max(1, math.ceil(fleet / gen))
    plan = Plan(
        measured=measured, traffic=traffic, headroom=headroom, rate_rps=rate, replicas=replicas,
        utilization=rate / (replicas * cap), fleet_capacity_rps=replicas * cap, users_per_replica=per_replica,
        users_per_replica_at_capacity=at_capacity,
        users_per_replica_at_peak=None if traffic.users is None else traffic.users / replicas,
        spare=spare, survives_loss=replicas - holds_peak,
        price_per_hour=price_per_hour, cost_per_hour=cost_hour,
        cost_per_month=None if cost_hour is None else cost_hour * HOURS_PER_MONTH,
        cost_per_1k_requests=None if cost_hour is None else cost_hour / (rate * 3600) * 1000,
        generator_rps=gen, fleet_probe_rps=fleet, generator_processes=processes,
    )
    return replace(plan, lines=describe(plan))


def describe(plan: Plan) -> list[tuple[str, str]]:
    """The plan in words, as (label, text): each figure with what it rests on."""
    m, t = plan.measured, plan.traffic
    latency = m.mean_latency_s or 0.0
    held = (f"confirmed by a sustained run (p95 {m.p95_latency_s:.3g} s)" if m.confirmed and m.p95_latency_s
            else "confirmed by a sustained run" if m.confirmed else "NOT confirmed (no sustained run held)")
    lines = [("one replica", f"{m.capacity_rps:.3g} req/s under {m.slo or 'its SLO'}, {held}; mean latency "
                             f"{latency:.3g} s at capacity (from {m.source})")]
    lines.append(("peak", f"{plan.rate_rps:.3g} req/s = {t.rests_on(latency)}"))
    need = plan.rate_rps * (1 + plan.headroom) / m.capacity_rps
    spare = f" + {plan.spare} spare" if plan.spare else ""
    lines.append(("replicas", f"{plan.replicas} = ceil({plan.rate_rps:.3g} req/s x (1 + {plan.headroom:.0%} "
                              f"headroom) / {m.capacity_rps:.3g} req/s per replica) = ceil({need:.3g})"
                              f"{spare}; each runs at {plan.utilization:.0%} of its capacity at the peak"))
    lines.append(("replica loss", _loss_line(plan)))
    fleet = (f"{plan.replicas} x {m.capacity_rps:.3g} = {plan.fleet_capacity_rps:.3g} req/s under the same "
             "SLO, predicted (measure it behind your balancer: qbench capacity --target BALANCER)")
    if m.arrival == "constant":
        fleet += ("; one replica was measured with constant arrivals, but a balancer splits them at random, "
                  "so each replica sees Poisson-like arrivals and the fleet may hold less: measure one "
                  "replica with load.arrival: poisson")
    lines.append(("fleet", fleet))
    if plan.users_per_replica is not None and plan.users_per_replica_at_capacity is not None:
        cycle = t.cycle_s(latency) or 0.0
        per = f" / {t.requests_per_message:g} requests per message" if t.requests_per_message != 1 else ""
        lines.append(("users per replica", f"~{plan.users_per_replica_at_capacity:.0f} at capacity, "
                      f"~{plan.users_per_replica:.0f} keeping the headroom free (Little's law: N = X x "
                      f"{cycle:.3g} s per message{per}, X = {m.capacity_rps:.3g} and "
                      f"{m.capacity_rps / (1 + plan.headroom):.3g} req/s); "
                      f"~{plan.users_per_replica_at_peak:.0f} at this peak ({t.users} users / "
                      f"{plan.replicas} replicas)"))
    if m.settings.get("code"):
        lines.append(("settings", f"measured with ({m.settings.get('from', 'the server')}):\n"
                                  f"{m.settings['code']}"))
    if plan.price_per_hour is not None and plan.cost_per_month is not None:
        lines.append(("cost", f"{plan.replicas} x {plan.price_per_hour:g} per replica-hour = "
                              f"{plan.cost_per_hour:.4g}/h; {plan.cost_per_month:,.0f} per month "
                              f"({HOURS_PER_MONTH:g} h at this peak); {plan.cost_per_1k_requests:.3g} per "
                              f"1,000 requests at {plan.rate_rps:.3g} req/s"))
    lines.append(_generator_line(plan))
    return lines


def _loss_line(plan: Plan) -> str:
    cap, n = plan.measured.capacity_rps, plan.replicas
    if plan.spare:
        left = n - plan.spare
        plural = "s" if plan.spare > 1 else ""
        said = (f"{plan.spare} spare: losing {plan.spare} replica{plural} leaves {left} x {cap:.3g} = "
                f"{left * cap:.3g} req/s, which hold the {plan.rate_rps:.3g} req/s peak with its "
                f"{plan.headroom:.0%} headroom")
    else:
        said = ("no spare (--spare N adds N replicas so that losing N still holds the peak); the headroom "
                "is a margin over the measured capacity, not replica-loss protection")
    if plan.survives_loss <= 0:
        return f"{said}; losing any replica leaves less than the peak's {plan.rate_rps:.3g} req/s"
    lost = plan.survives_loss
    left = n - lost
    return (f"{said}; the peak itself ({plan.rate_rps:.3g} req/s, no headroom) holds with up to {lost} "
            f"replica{'s' if lost > 1 else ''} lost ({left} x {cap:.3g} = {left * cap:.3g} req/s)")


def _generator_line(plan: Plan) -> tuple[str, str]:
    fleet = f"a capacity run of {plan.replicas} replicas offers up to {plan.fleet_probe_rps:.3g} req/s " \
            f"({plan.replicas} x {plan.measured.capacity_rps:.3g} x {OVERLOAD_FACTOR:g}, the run past it)"
    if plan.generator_rps is None:
        return ("generator", f"{fleet}; the capacity run recorded no generator CPU, so one process's ceiling "
                             "is unknown")
    cpu = plan.measured.generator_cpu_per_request_s or 0.0
    base = (f"{fleet}; one generator process reaches ~{plan.generator_rps:.3g} req/s "
            f"({GENERATOR_BUSY:.0%} of a core / {cpu * 1e3:.3g} ms CPU per request in the capacity run)")
    if plan.generator_processes > 1:
        return ("generator", f"{base}: the generator caps before the replicas do; measure with --set "
                             f"load.processes={plan.generator_processes} (or the Ray executor, --ray)")
    return ("generator", f"{base}: one process is enough")
