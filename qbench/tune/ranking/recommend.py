"""Point results + constraints -> Recommendation: `rank` (the winner, every point with its reason),
the max_size advice and the code to paste. The rule and the advice: docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, Literal

from qbench.run import OWN_CAPS, Figures, Readable, json_number, own_cap_lead
from qbench.tune.knobs.frameworks import framework_name
from qbench.tune.knobs.grid import Value, flag
from qbench.tune.knobs.versions import BATCH_NOTE, gradio3_code
from qbench.tune.values.ceiling import CapacityRecord
from qbench.tune.values.constraints import Constraints, Objective, bounds_text
from qbench.tune.values.result import MaxSizeAdvice, PointResult


@dataclass
class RankedPoint(Figures):
    rank: int
    point_id: str
    knobs: dict[str, Value]
    verdict: Literal["winner", "tied", "feasible", "infeasible", "failed", "knobs_not_applied"]
    reason: str
    capacity_rps: float | None = None


@dataclass
class Recommendation(Readable, tolerant=True):
    winner: PointResult | None = None
    ranked: list[RankedPoint] = field(default_factory=list)
    why: str = ""
    gradio_code: str = ""
    max_size_advice: MaxSizeAdvice | None = None
    capacity: CapacityRecord | None = None  # the winner's search and how it held, if measured
    notes: list[str] = field(default_factory=list)  # e.g. the winner sits on the grid's edge
    objective: Objective = "latency"  # what ranked the points (Constraints.objective)
    objective_why: str = ""  # why that objective (the sweep's default rule or --objective)
    gradio_major: int | None = None  # the target's Gradio release the code is for (None: 4.x and later)
    # a plain HTTP / OpenAI target's advice instead of Gradio code: the reference server's settings
    # (relaunch, live) or the user's launch command, filled in with the winner's knobs (the sweep sets it)
    server_code: str = ""
    server_code_label: str = ""
    # the change to the app's own settings (from the startup hook's record of the winner's launch):
    # "your app: default_concurrency_limit=4 -> recommended concurrency_limit=8 on `respond`"
    app_change: list[str] = field(default_factory=list)
    framework: str | None = None  # a launched app's framework other than Gradio ("litserve")
    own_cap_now: str = ""  # that app's own queue cap as it ran ("max_queued_requests=57"; "": none set)

    @property
    def gradio_version(self) -> str:
        """The release the Gradio code is for, as recommendation.json writes it ('3.x'; '' for 4.x+)."""
        return f"{self.gradio_major}.x" if self.gradio_major else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner.to_dict() if self.winner else None,
            "gradio_version": self.gradio_version,
            "objective": self.objective,
            "objective_why": self.objective_why,
            "why": self.why,
            "ranked": [asdict(r) for r in self.ranked],
            "gradio_code": self.gradio_code,
            "server_code": self.server_code,
            "server_code_label": self.server_code_label,
            "app_change": self.app_change,
            "framework": self.framework,
            "max_size_advice": self.max_size_advice.to_dict() if self.max_size_advice else {},
            "capacity": self.capacity.to_dict() if self.capacity is not None else {},
            "notes": self.notes,
        }

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The Gradio release is written as gradio_version ('3.x'; '' for 4.x and later)."""
        head = str(data.pop("gradio_version", None) or "").split(".")[0]
        data["gradio_major"] = int(head) if head.isdigit() else None
        return data


# ---------------------------------------------------------------- the rule


def resource_score(point: PointResult) -> float:
    """Fewer is better: thread pool + concurrent work slots + peak memory (as a small tie-breaker)."""
    k = point.knobs
    limit = json_number(k.get("concurrency_limit", k.get("concurrency_count", 1))) or 0.0
    slots = limit * (json_number(k.get("max_batch_size", 1)) or 0.0)
    return (json_number(k.get("max_threads", 0)) or 0.0) + slots + (point.peak_rss_mb or 0.0) / 1e4


LATENCY_TIE: Final = (0.05, 0.002)  # p95s within 5 % + 2 ms of the lowest are tied (relative, seconds)


def goodput_tied(a: PointResult, b: PointResult, tolerance: float) -> bool:
    """Goodput tie: overlapping 95 % intervals when repeated, else within `tolerance` (relative)."""
    if len(a.goodput_repeats) >= 2 and len(b.goodput_repeats) >= 2:
        (alo, ahi), (blo, bhi) = a.goodput_ci(), b.goodput_ci()
        return alo <= bhi and blo <= ahi
    top = max(a.goodput_rps, b.goodput_rps)
    return top == 0 or abs(a.goodput_rps - b.goodput_rps) <= tolerance * top


@dataclass(frozen=True)
class Ranking:
    """The rule's result: the winner (None: no feasible point), every point with its reason, and why."""

    winner: PointResult | None
    ranked: list[RankedPoint]
    why: str


@dataclass(frozen=True)
class Advice:
    """What a recommendation says beside the ranking, known to the caller (a sweep), not from the points."""

    defaults: Mapping[str, Value] = field(default_factory=dict)  # unswept knobs (for the Gradio code)
    gradio_major: int | None = None  # the target's release (None: 4.x and later)
    objective_why: str = ""
    gradio: bool = True  # a Gradio front: Gradio code; else `server_code` (settings or launch command)
    server_code: str = ""
    server_code_label: str = ""
    app_change: list[str] = field(default_factory=list)  # the winner as a change to the app's settings
    capacity: CapacityRecord | None = None  # the winner's capacity search, if measured
    server_api: str | None = None  # a gradio.Server app's endpoint: the code is its @server.api(...)
    notes: list[str] = field(default_factory=list)
    framework: str | None = None  # a launched app's framework other than Gradio ("litserve")
    own_cap_now: str = ""  # that app's own queue cap as it ran ("max_queued_requests=57"; "": none set)


def rank(points: Sequence[PointResult], constraints: Constraints) -> Ranking:
    """The winner, every point ranked with its reason, and why: unusable, infeasible, feasible by figure."""
    failed = [p for p in points if not constraints.usable(p)]
    usable = [p for p in points if constraints.usable(p)]
    infeasible = [(p, constraints.violations(p)) for p in usable]
    feasible = [p for p, broken in infeasible if not broken]
    infeasible = [(p, broken) for p, broken in infeasible if broken]

    ranked: list[RankedPoint] = []
    winner: PointResult | None = None
    if feasible:
        by_value = sorted(feasible, key=lambda p: -constraints.value(p))
        best = by_value[0]
        ties = order_tied([p for p in by_value if tied(p, best, constraints)], constraints)
        winner = ties[0]
        rest = [p for p in by_value if p not in ties]
        for p in ties:
            verdict = "winner" if p is winner else "tied"
            ranked.append(_ranked(len(ranked) + 1, p, verdict, _tie_reason(p, winner, constraints, ties)))
        for p in rest:
            ranked.append(_ranked(len(ranked) + 1, p, "feasible", _below_reason(p, winner, constraints)))
    for p, broken in sorted(infeasible, key=lambda pb: -constraints.value(pb[0])):
        ranked.append(_ranked(len(ranked) + 1, p, "infeasible", "broke " + "; ".join(broken)))
    for p in failed:
        label = "stopped early" if p.status == "stopped" else "failed"
        if p.status in ("ok", "stopped") and constraints.objective == "capacity":
            label = "capacity not measured"
        if p.status == "knobs_not_applied":
            label = "knobs not applied"
        verdict = "knobs_not_applied" if p.status == "knobs_not_applied" else "failed"
        ranked.append(_ranked(len(ranked) + 1, p, verdict, f"{label}: {p.reason or 'no reason recorded'}"))

    top = max((constraints.value(p) for p in feasible), default=0.0)
    return Ranking(winner, ranked, _why(winner, constraints, len(feasible), len(points), top))


def recommend(points: Sequence[PointResult], constraints: Constraints, advice: Advice | None = None
              ) -> Recommendation:
    """The finished recommendation: the ranking (`rank`), the winner's max_size advice and its code
    (Gradio code in the target's release, or `advice.server_code` for another front), and `advice`."""
    advice = advice or Advice()
    ranking = rank(points, constraints)
    winner = ranking.winner
    size_advice = max_size_advice(winner, constraints) if winner is not None else None
    if size_advice is not None and advice.framework in ("litserve", "bentoml", "rayserve", "torchserve"):
        size_advice = uncapped_advice(size_advice, framework_name(advice.framework),
                                      OWN_CAPS.get(advice.framework, ""), advice.own_cap_now)
    code = ""
    size = size_advice.max_size if size_advice is not None else None
    if winner is not None and advice.gradio and advice.server_api is not None:
        code = server_api_code({**advice.defaults, **winner.knobs}, size,
                               advice.server_api)
    elif winner is not None and advice.gradio:
        code = gradio_code({**advice.defaults, **winner.knobs}, size,
                           advice.gradio_major)
    return Recommendation(
        winner, ranking.ranked, ranking.why, gradio_code=code, max_size_advice=size_advice,
        capacity=advice.capacity, notes=list(advice.notes), objective=constraints.objective,
        objective_why=advice.objective_why, gradio_major=advice.gradio_major,
        server_code=advice.server_code if winner is not None else "",
        server_code_label=advice.server_code_label if winner is not None else "",
        app_change=list(advice.app_change), framework=advice.framework,
    )


def _ranked(rank: int, p: PointResult, verdict: Any, reason: str) -> RankedPoint:
    return RankedPoint(rank, p.point_id, dict(p.knobs), verdict, reason, p.capacity_rps, **p.figure_values())


def tied(a: PointResult, b: PointResult, constraints: Constraints) -> bool:
    """Equal on the objective's figure: a goodput tie, or capacities within the searches' tolerance."""
    if constraints.objective != "capacity":
        return goodput_tied(a, b, constraints.tie_tolerance)
    searched = [p.capacity.tolerance if p.capacity is not None else 0.0 for p in (a, b)]
    tolerance = max(constraints.tie_tolerance, *searched)
    top = max(constraints.value(a), constraints.value(b))
    return top == 0 or abs(constraints.value(a) - constraints.value(b)) <= tolerance * top


def order_tied(tied: list[PointResult], constraints: Constraints) -> list[PointResult]:
    """Tied points: lower p95 (within LATENCY_TIE: one band), then fewer resources, then the higher figure."""
    band = _band(tied)

    def key(p: PointResult) -> tuple[float, float, float]:
        lat = _lat(p)
        return (lat if lat > band else 0.0, resource_score(p), -constraints.value(p))

    return sorted(tied, key=key)


def _band(tied: Sequence[PointResult]) -> float:
    """The p95 below which tied points count as equally fast."""
    return min((_lat(p) for p in tied), default=math.inf) * (1 + LATENCY_TIE[0]) + LATENCY_TIE[1]


def _lat(p: PointResult) -> float:
    return p.p95_latency_s if p.p95_latency_s is not None else math.inf


def _figure(p: PointResult, constraints: Constraints) -> str:
    if constraints.objective == "capacity":
        return f"capacity {constraints.value(p):.3g} req/s"
    return f"goodput {p.goodput_rps:.3g} rps"


def _tie_reason(p: PointResult, winner: PointResult, constraints: Constraints,
                tied: Sequence[PointResult] = ()) -> str:
    figure = _figure(p, constraints)
    if p is winner:
        p95 = _fmt_s(p.p95_latency_s)
        top = max((constraints.value(q) for q in tied), default=constraints.value(p))
        highest = "highest" if constraints.value(p) >= top else f"tied with the highest ({top:.3g})"
        if constraints.objective == "capacity":
            return f"{highest} {figure} meeting the SLO (p95 {p95} at the scenario's load)"
        return f"{highest} {figure} meeting all constraints (p95 {p95})"
    name = figure.split(" ")[0]
    if _lat(p) > _band(tied or [winner]):
        return f"tied on {name} ({figure}) but higher p95 latency {_fmt_s(p.p95_latency_s)}"
    if resource_score(p) > resource_score(winner):
        return f"tied on {name} ({figure}) and latency, but more resources (score {resource_score(p):.0f})"
    return f"tied on {name} ({figure}), latency and resources; the winner's {name} is higher"


def _below_reason(p: PointResult, winner: PointResult, constraints: Constraints) -> str:
    best = constraints.value(winner)
    gap = 1 - constraints.value(p) / best if best else 0.0
    return f"meets constraints; {_figure(p, constraints)}, {gap:.0%} below the winner"


def _why(winner: PointResult | None, constraints: Constraints, n_feasible: int, n_points: int,
         top: float = 0.0) -> str:
    slo = bounds_text(constraints.slo) or "no latency SLO"
    if winner is None:
        return f"no point met the constraints ({slo}, error_rate <= {constraints.max_error_rate:.1%})"
    knobs = ", ".join(f"{k}={v}" for k, v in winner.knobs.items())
    if constraints.objective == "capacity":
        value = constraints.value(winner)
        tie = "" if value >= top else f" within the measurement tolerance (the highest measured: {top:.3g})"
        return (
            f"{knobs}: highest capacity{tie} ({value:.3g} req/s of open-loop arrivals "
            f"meeting {slo} and error_rate <= {constraints.max_error_rate:.1%}) among {n_feasible} of "
            f"{n_points} points"
        )
    return (
        f"{knobs}: highest goodput ({winner.goodput_rps:.3g} rps) among {n_feasible} of {n_points} points "
        f"meeting {slo} and error_rate <= {constraints.max_error_rate:.1%}"
    )


def _fmt_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g} s"


# ---------------------------------------------------------------- advice


def max_size_advice(point: PointResult, constraints: Constraints) -> MaxSizeAdvice:
    """max_size = floor(X x W): X the point's capacity (else its throughput), W the tolerated wait
    less the median service time."""
    latency_bounds = [v for k, v in constraints.slo.items() if "latency" in k]
    tolerated = constraints.tolerated_wait_s or (max(latency_bounds) if latency_bounds else None)
    served = point.capacity_rps or point.throughput_rps
    if tolerated is None or served <= 0:
        return MaxSizeAdvice("no latency SLO or tolerated wait given: leave max_size=None")
    service = point.p50_service_s or 0.0
    budget = max(tolerated - service, 0.0)
    size = max(1, math.floor(served * budget))
    why = (f"served at {served:.3g} req/s, the user at queue position q waits ~q/"
           f"{served:.3g} s; with {tolerated:g} s tolerated and {service:.3g} s of service, "
           f"the queue-wait budget is {budget:.3g} s, so max_size = floor({served:.3g} x "
           f"{budget:.3g}) = {size}: later arrivals get an immediate 'queue full' instead of a wait past "
           f"{tolerated:g} s")
    return MaxSizeAdvice(why, size, served, tolerated, service, budget)


def uncapped_advice(advice: MaxSizeAdvice, server: str, own_cap: str = "", now: str = "") -> MaxSizeAdvice:
    """The advice for a server without Gradio's queue cap: its own cap (`own_cap`), else one in front."""
    if advice.max_size is None or advice.tolerated_wait_s is None:
        return replace(advice, max_size=None, why=f"{server} has no queue cap (Gradio's max_size): requests "
                       "past its capacity wait without bound")
    if own_cap:
        why = (f"{own_cap_lead(server, now)}. Served at {advice.throughput_rps:.3g} "
               f"req/s with {advice.tolerated_wait_s:g} s tolerated, {advice.max_size} waiting requests fill "
               f"the queue-wait budget of {advice.queue_wait_budget_s or 0:.3g} s: "
               f"{own_cap.format(waiting=advice.max_size)}")
        return replace(advice, max_size=None, why=why)
    why = (f"{server} has no queue cap (Gradio's max_size): past its capacity a request waits without bound. "
           f"Served at {advice.throughput_rps:.3g} req/s with {advice.tolerated_wait_s:g} s tolerated, "
           f"{advice.max_size} waiting requests fill the queue-wait budget of "
           f"{advice.queue_wait_budget_s or 0:.3g} s: a proxy in front that queues at most that many (or a "
           f"client timeout of {advice.tolerated_wait_s:g} s) turns a later wait into a quick refusal")
    return replace(advice, max_size=None, why=why)


def gradio_code(knobs: Mapping[str, Value], max_size: int | None, gradio_major: int | None = None) -> str:
    """Ready-to-paste Gradio settings for the winner's knobs (unswept knobs keep Gradio's defaults), in
    the target's release: 3.x (qbench.tune.knobs.versions.gradio3_code), else 4.x and later."""
    if gradio_major == 3:
        return gradio3_code(knobs, max_size)
    limit = knobs.get("concurrency_limit", knobs.get("default_concurrency_limit", 1))
    default_limit = knobs.get("default_concurrency_limit", limit)
    lines = [
        f"demo.queue(default_concurrency_limit={default_limit}, max_size={max_size})",
        f"btn.click(fn, inputs, outputs, {event_args(knobs)})",
        f"demo.launch({launch_args(knobs)})",
    ]
    if (json_number(knobs.get("max_batch_size", 1)) or 0.0) > 1:
        lines.insert(0, BATCH_NOTE)
    events = event_lines(knobs)
    if events:  # a mix's events, each with its own settings, in place of one event's line
        at = next(i for i, line in enumerate(lines) if line.startswith("btn.click("))
        lines[at:at + 1] = events
    return "\n".join(lines)


def server_api_code(knobs: Mapping[str, Value], max_size: int | None, api_name: str) -> str:
    """The winner's settings as a gradio.Server app's code; an advised max_size only in a comment."""
    name = f"name={api_name!r}, " if api_name else ""
    lines = [f"@server.api({name}{event_args(knobs)})", f"server.launch({launch_args(knobs)})"]
    if (json_number(knobs.get("max_batch_size", 1)) or 0.0) > 1:
        lines.insert(0, BATCH_NOTE)
    if max_size is not None:
        lines.append(f"# max_size={max_size} was advised: gradio.Server has no queue(max_size=...), "
                     "its queue is unbounded; shed load in front of it")
    return "\n".join(lines)


def launch_args(knobs: Mapping[str, Value]) -> str:
    """launch()'s settings as keyword arguments: max_threads, and num_workers / ssr_mode where swept."""
    args = [f"max_threads={knobs.get('max_threads', 40)}"]
    if "num_workers" in knobs:
        args.append(f"num_workers={knobs['num_workers']}")
    if "ssr_mode" in knobs:
        args.append(f"ssr_mode={flag(knobs['ssr_mode'])}")
    return ", ".join(args)


def event_args(knobs: Mapping[str, Value]) -> str:
    """An event's own settings as keyword arguments: concurrency_limit, batching, concurrency_id."""
    limit = knobs.get("concurrency_limit", knobs.get("default_concurrency_limit", 1))
    args = [f"concurrency_limit={limit}"]
    if (json_number(knobs.get("max_batch_size", 1)) or 0.0) > 1:
        args.append(f"batch=True, max_batch_size={knobs['max_batch_size']}")
    if "concurrency_id" in knobs:
        args.append(f"concurrency_id={str(knobs['concurrency_id'])!r}")
    return ", ".join(args)


def event_lines(knobs: Mapping[str, Value]) -> list[str]:
    """One `.click(...)` line per event a sweep scoped knobs to (`concurrency_limit@a`)."""
    events: dict[str, list[str]] = {}
    for name, value in knobs.items():
        base, _, event = name.partition("@")
        if not event:
            continue
        if base == "concurrency_id":
            own = str(value).lower() in ("own", "none", "null")
            text = "concurrency_id=None" if own else f"concurrency_id={str(value)!r}"  # None: its own group
        elif base == "max_batch_size" and (json_number(value) or 0.0) > 1:
            text = f"batch=True, max_batch_size={value}"
        else:
            text = f"{base}={value}"
        events.setdefault(event, []).append(text)
    return [f"btn_{event}.click(fn_{event}, inputs, outputs, api_name={event!r}, {', '.join(parts)})"
            for event, parts in events.items()]
