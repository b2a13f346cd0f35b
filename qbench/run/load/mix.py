"""Several endpoints in one run (a scenario's `mix:`, or a trace naming several): each a `Branch`, the
scenario as if it were the only endpoint, and the `Routing` of each request to one (by seeded weight, trace
line, replayed record or user). A single-endpoint scenario is a mix of one branch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from qbench.errors import ScenarioError, TargetError
from qbench.run.records.schema import read_records
from qbench.run.scenario.schema import Endpoint, JourneyStep, MixEntry, Scenario, Slo, endpoint_label
from qbench.run.scenario.trace import read_trace, trace_schedule

if TYPE_CHECKING:
    import aiohttp

    from qbench.run.protocols.base import Clock, WireProtocol
    from qbench.run.scenario.payloads import PayloadGenerator

ROUTING_SEED = 0x6D6978  # mixed into the payload seed: endpoint draws do not repeat payload draws


@dataclass(frozen=True)
class Branch:
    """One endpoint of a run: its label, weight, and the scenario as if it were the only endpoint."""

    label: str
    weight: float
    scenario: Scenario  # endpoint and payload are this branch's; mix is None


def branches(scenario: Scenario) -> list[Branch]:
    """The scenario's endpoints: its one endpoint, each mix entry (unique labels) or each journey step."""
    if scenario.journey is not None:
        return [Branch(step.name or endpoint_label(scenario.protocol, step.endpoint), 1.0,
                       scenario.model_copy(update={"endpoint": step.endpoint, "payload": step.payload,
                                                   "journey": None}))
                for step in scenario.journey]
    if scenario.mix is None:
        return [Branch(endpoint_label(scenario.protocol, scenario.endpoint), 1.0, scenario)]
    out: list[Branch] = []
    for i, entry in enumerate(scenario.mix):
        label = entry.name or endpoint_label(scenario.protocol, entry.endpoint)
        if any(b.label == label for b in out):
            raise ScenarioError(
                f"scenario '{scenario.name}': key 'mix.{i}': value {label!r}: two entries would carry "
                f"the same endpoint label; give one a name: (e.g. name: {label}-large)"
            )
        one = scenario.model_copy(update={"endpoint": entry.endpoint, "payload": entry.payload, "mix": None})
        out.append(Branch(label, entry.weight, one))
    return out


def journey_length(scenario: Scenario) -> int | None:
    """The requests of one whole journey (None: the scenario has no journey)."""
    return None if scenario.journey is None else sum(step.repeat for step in scenario.journey)


def endpoint_slos(scenario: Scenario) -> dict[str, Slo | None] | None:
    """Per label of a mix, the entry's own SLO (None: the scenario's applies); None without a mix."""
    if scenario.mix is None:
        return None
    return {b.label: entry.slo for b, entry in zip(branches(scenario), scenario.mix, strict=True)}


def mix_starts(scenario: Scenario) -> dict[str, float] | None:
    """Label -> `start` of each mix entry, when one starts later than the run (None otherwise)."""
    if not scenario.mix or all(e.start <= 0 for e in scenario.mix):
        return None
    return {b.label: e.start for b, e in zip(branches(scenario), scenario.mix, strict=True)}


# ---------------------------------------------------------------- which branch per request


class Routing:
    """Which branch each request goes to."""

    def __init__(self, labels: list[str], weights: list[float], by_id: np.ndarray | None,
                 starts: list[float] | None = None, by_user: np.ndarray | None = None) -> None:
        self.labels = labels
        self.weights = np.asarray(weights, dtype=np.float64)
        self.cumulative = np.cumsum(self.weights / float(self.weights.sum()))
        self.by_id = by_id  # open loop: request id -> branch index (None: one branch, or closed loop)
        self.starts = np.asarray(starts if starts is not None else [0.0] * len(labels), dtype=np.float64)
        self.by_user = by_user  # closed loop, entries with their own users: user id -> branch index

    def label_for(self, request_id: int) -> str:
        """The label of an open-loop request's branch."""
        if self.by_id is None or not 0 <= request_id < self.by_id.size:
            return self.labels[0]
        return self.labels[int(self.by_id[request_id])]

    def draw(self, rng: np.random.Generator, at_s: float = float("inf")) -> str:
        """A closed-loop user's next endpoint, by weight among the entries started by `at_s`."""
        if len(self.labels) == 1:
            return self.labels[0]
        return self.labels[self.index(rng.random(), at_s)]

    def index(self, u: float, at_s: float) -> int:
        """The branch a uniform draw `u` picks among the entries started by `at_s` (`start:`)."""
        if at_s >= self.starts.max():
            cumulative = self.cumulative
        else:
            weights = np.where(self.starts <= at_s, self.weights, 0.0)
            cumulative = np.cumsum(weights / weights.sum())
        return min(int(np.searchsorted(cumulative, u, side="right")), len(self.labels) - 1)

    def for_user(self, user: int, rng: np.random.Generator, at_s: float) -> str:
        """A closed-loop user's next endpoint: its own entry's (entries with users), else a draw."""
        if self.by_user is not None and 0 <= user < self.by_user.size:
            return self.labels[int(self.by_user[user])]
        return self.draw(rng, at_s)


def routing(scenario: Scenario, request_ids: list[int] | None, offsets: np.ndarray | None = None) -> Routing:
    """The routing of a run; `request_ids`: the open-loop plan's ids (None: closed loop), `offsets` their
    planned send times (a request before an entry's `start` draws among the entries started by then)."""
    parts = branches(scenario)
    labels, weights = [b.label for b in parts], [b.weight for b in parts]
    starts = [e.start for e in scenario.mix] if scenario.mix else None
    if scenario.journey is not None or len(parts) == 1:
        return Routing(labels, weights, None)
    if not request_ids:
        return Routing(labels, weights, None, starts, user_branches(scenario))
    size = max(request_ids) + 1
    rng = np.random.default_rng([scenario.seed, ROUTING_SEED])
    draws = rng.random(size)
    plain = Routing(labels, weights, None, starts)
    by_id = np.minimum(np.searchsorted(plain.cumulative, draws, side="right"), len(parts) - 1)
    if offsets is not None and starts is not None and max(starts) > 0:
        for request_id, at in zip(request_ids, offsets.tolist(), strict=True):
            if at < max(starts):
                by_id[request_id] = plain.index(float(draws[request_id]), float(at))
    for request_id, index in _recorded(scenario, parts).items():
        if 0 <= request_id < size:
            by_id[request_id] = index
    return Routing(labels, weights, by_id, starts)


def user_branches(scenario: Scenario) -> np.ndarray | None:
    """User id -> branch index for a mix whose entries have their own users (in entry order: the
    first entry's users are ids 0..u0-1); None otherwise."""
    if not scenario.mix or scenario.mix[0].users is None:
        return None
    return np.repeat(np.arange(len(scenario.mix)), [e.users or 0 for e in scenario.mix])


def user_starts(scenario: Scenario, offsets: np.ndarray) -> np.ndarray:
    """Each user's start (closed loop): with users per entry, its entry's `start` plus that entry's ramp."""
    by_user = user_branches(scenario)
    if by_user is None or scenario.mix is None:
        return offsets
    out = np.empty(by_user.size, dtype=np.float64)
    first = 0
    for entry in scenario.mix:
        n = entry.users or 0
        out[first:first + n] = entry.start + np.arange(n) * (scenario.load.ramp_up / n)
        first += n
    return out


def _recorded(scenario: Scenario, parts: list[Branch]) -> dict[int, int]:
    """request id -> branch index, where the schedule says (a trace line, a replayed record)."""
    load = scenario.load
    if load.trace is not None:
        trace = read_trace(load.trace.file)
        schedule = trace_schedule(load.trace, load)
        assert schedule.source is not None
        fields = _fields(scenario)
        out: dict[int, int] = {}
        for request_id, line in zip(schedule.ids.tolist(), schedule.source.tolist(), strict=True):
            named = {k: v for k, v in trace.endpoints[line].items() if k in fields}
            if named:
                where = f"{trace.path}:{trace.line_numbers[line]}"
                out[request_id] = _branch_of(named, parts, scenario, where)
        return out
    if load.replay is not None:
        index = {b.label: i for i, b in enumerate(parts)}
        return {r.request_id: index[r.endpoint] for r in read_records(load.replay) if r.endpoint in index}
    return {}


def _fields(scenario: Scenario) -> tuple[str, ...]:
    """The trace fields that name an endpoint of this protocol (a Gradio app's `path` is a route, not one)."""
    return ("api_name", "fn_index") if scenario.protocol == "gradio" else ("path",)


def _branch_of(named: dict[str, str], parts: list[Branch], scenario: Scenario, where: str) -> int:
    for i, branch in enumerate(parts):
        endpoint = branch.scenario.endpoint
        if all(str(getattr(endpoint, k)) == v for k, v in named.items()):
            return i
    field, value = next(iter(named.items()))
    have = ", ".join(b.label for b in parts)
    raise ScenarioError(
        f"{where}: field '{field}': value {value!r}: no endpoint of scenario '{scenario.name}' has it "
        f"(its endpoints: {have}); add it to the mix"
    )


def with_trace_mix(scenario: Scenario) -> Scenario:
    """A single-endpoint scenario whose trace names other endpoints, as a mix of them (weighted by lines)."""
    if scenario.load.trace is None or scenario.mix is not None:
        return scenario
    trace = read_trace(scenario.load.trace.file)
    fields = _fields(scenario)
    own = scenario.endpoint
    counts: Counter[tuple[tuple[str, str], ...]] = Counter()
    for named in trace.endpoints:
        key = tuple(sorted((k, v) for k, v in named.items() if k in fields))
        if key and not all(str(getattr(own, k)) == v for k, v in key):
            counts[key] += 1
        else:
            counts[()] += 1
    if set(counts) <= {()}:
        return scenario
    entries = [MixEntry(weight=n, endpoint=own if not key else _endpoint(own, dict(key)),
                        payload=scenario.payload) for key, n in counts.items()]
    return scenario.model_copy(update={"mix": entries})


def _endpoint(own: Endpoint, named: dict[str, str]) -> Endpoint:
    update: dict[str, Any] = dict(named)
    if "fn_index" in named:
        update.update(fn_index=int(named["fn_index"]), api_name=None)
    elif "api_name" in named:
        update.update(fn_index=None)
    return own.model_copy(update=update)


# ---------------------------------------------------------------- at run time


@dataclass
class Route:
    """A branch at run time: its protocol object and payload generator."""

    branch: Branch
    protocol: WireProtocol
    payloads: PayloadGenerator


class Routes:
    """Every branch of a run, by label (in order: a journey's steps), and which one each request goes to."""

    def __init__(self, routes: list[Route], routing: Routing,
                 journey: list[JourneyStep] | None = None) -> None:
        self.routes = {r.branch.label: r for r in reversed(routes)}  # a label's first route
        self.steps = routes
        self.routing = routing
        self.journey = journey  # the steps' repeat and think time (None: not a journey)

    def __getitem__(self, label: str) -> Route:
        return self.routes[label]

    def __iter__(self) -> Iterator[Route]:
        return iter(self.steps)

    async def discover(self) -> dict[str, Any]:
        """Each branch's discovery; the first one's snapshot, plus every branch's under `mix`.
        An endpoint the target lacks names its mix entry."""
        snapshots: dict[str, dict[str, Any]] = {}
        for i, route in enumerate(self):
            try:
                snapshots[route.branch.label] = await route.protocol.discover()
            except TargetError as exc:
                if len(self.steps) == 1 and self.journey is None:
                    raise
                endpoint = route.branch.scenario.endpoint.model_dump(exclude_defaults=True,
                                                                     exclude={"headers"})
                key = "journey" if self.journey is not None else "mix"
                raise TargetError(f"scenario '{route.branch.scenario.name}': key '{key}.{i}.endpoint': "
                                  f"value {endpoint}: {exc}") from exc
        first = dict(next(iter(snapshots.values())))
        if len(snapshots) > 1:
            first["mix"] = {label: {k: v for k, v in snap.items() if k != "config"}
                            for label, snap in snapshots.items()}
        return first

    def payload_stats(self) -> dict[str, Any]:
        stats = [r.payloads.stats() for r in self]
        return {k: sum(s[k] for s in stats) for k in stats[0]}

    async def close(self) -> None:
        for route in self:
            await route.protocol.close()


def make_routes(scenario: Scenario, routing_: Routing, target: str, http: aiohttp.ClientSession,
                clock: Clock, fixed: Callable[[int], list[Any] | None] | None) -> Routes:
    """Protocol objects and prepared payload generators for every branch (`fixed`: a trace's inputs)."""
    from qbench.run.protocols.http import render
    from qbench.run.protocols.registry import make_protocol
    from qbench.run.scenario.payloads import PayloadGenerator

    routes: list[Route] = []
    for branch in branches(scenario):
        one = branch.scenario
        payloads = PayloadGenerator(one.payload, fixed=fixed)
        payloads.prepare(one.payload.variants)
        if one.protocol == "http":
            render(one.endpoint.body, payloads.inputs(0))  # template errors fail before any request
        routes.append(Route(branch, make_protocol(one, target, http, clock, payloads), payloads))
    return Routes(routes, routing_, scenario.journey)
