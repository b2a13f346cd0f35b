"""Capacity probes against a live server, and `qbench capacity`: estimate -> bracket -> bisect -> folder.

A probe is the scenario at an open-loop arrival rate (`load.rate`, after a short warm-up; the scenario's
arrival process, payload and timeout are kept). It passes when every SLO bound and the error-rate ceiling
hold, at least one request completed, *and* the server kept up over the measured window (steady state,
`run.results.steady`: completions keep pace with arrivals, backlog and queue wait do not trend up; margin
a quarter of the tolerance). A probe whose backlog certainly grows is stopped early by the same test
(`RunawayDetector`) and fails. A failed probe whose load generator lagged (`host_stall`: STALL_SHARE of
the SLO's latency bound) is measured once more (qbench.tune.capacity.search.measure_past_stall). The first
guess is a closed-loop probe with `estimate_users` users and no think time: the completions/s a
saturated server gives (users / mean latency).

Probe length (`probe_length`): the bracket's probes last `duration` seconds (short: a probe that is not
steady cannot pass, and the confirmation below catches a short probe's lucky pass); the bisection's last
long enough that an overload the size of the tolerance would show at that rate (`probe_seconds`), that a
p95 rests on 100 requests and that a wait of 5 x the SLO's latency bound could build up, within
[`duration`, `max_duration`]; a scenario of webcam or microphone streams raises both to at least
STREAM_LENGTHS stream lengths, so streams end within a probe. The first passing probe's rate is then
measured again (`recheck`, qbench.tune.verdicts.degradation): a server that got slower during the search is
said so beside the answer (degraded, no degradation, or inconclusive). The search's probes also say
whether the service time rises with the queue (`lower_if_metastable`, qbench.tune.verdicts.metastable):
when it
does, an answer above the rate a burst cannot tip is lowered to that rate.
The answer is confirmed last, on the server as the search left it, by one sustained run of
`confirm_duration` seconds (60; METASTABLE_REPEATS in a row, with different Poisson seeds, for a
metastable server); a fail steps down. Then one run at 1.3 x the capacity
(`qbench.tune.verdicts.overload`) says whether throughput holds or falls as the queue grows (the max_size
advice) and how true the server's ETA is.

Layout of `reports/capacity-<name>-<stamp>/` (`qbench.run.results.files.new_folder`):

    capacity.json        {schema_version, kind "capacity", created_at, scenario {path, content}, target,
                          slo, max_error_rate, plan {tolerance, max_probes, step, min_rate, max_rate,
                          confirm, confirm_tries}, probe_duration_s, max_probe_duration_s,
                          confirm_duration_s, probe_length {seconds, why, at_rps}, warmup_s,
                          think_time_s, estimate_users, result (Capacity.to_dict(): capacity_rps,
                          failing_rate_rps, tolerance, converged, confirmed, probes [... steady,
                          steadiness {verdict, evidence, arrival_rps, completion_rps, backlog {slope,
                          se}, wait {slope, se}, ...}, host_stall], overload (Overload.to_dict()),
                          degradation (Degradation.to_dict()), metastability
                          (Metastability.to_dict()), lowered_from_rps), users
                          (equivalent users), answer [[label, text], ...] (the answer in words)}
    probes/00-estimate-u<n>/   the closed-loop estimate's run folder
    probes/<nn>-rate-<r>/      one run folder per open-loop probe, in the order they ran
    probes/<nn>-recheck-<r>/   the first passing rate, measured again after the search
    probes/<nn>-confirm-<r>/   the sustained confirmation(s)
    probes/<nn>-overload-<r>/  the run past the capacity
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qbench.errors import QbenchError, ScenarioError, TargetError
from qbench.run import (
    RequestRecord,
    Scenario,
    Steadiness,
    Summary,
    Writer,
    generator_lag,
    new_folder,
    probe_seconds,
    read_records,
    run_secrets,
    split_sessions,
    steadiness,
)
from qbench.tune.capacity.search import SearchPlan, search_capacity, sustain
from qbench.tune.knobs.grid import Point
from qbench.tune.points.point import PointRun, RunawayDetector, point_result, run_measured
from qbench.tune.values.capacity import Capacity, Probe, held_sentence
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.values.constraints import Constraints, bounds_text
from qbench.tune.verdicts.degradation import MIN_REQUESTS, compare, unjudged
from qbench.tune.verdicts.metastable import Metastability, queue_slowdown
from qbench.tune.verdicts.overload import OVERLOAD_FACTOR, Overload, analyse

DEFAULT_THINK_TIME_S = 10.0
DEFAULT_CONFIRM_S = 60.0
DEFAULT_MAX_PROBE_S = 30.0
MIN_P95_REQUESTS = 100  # a p95 resting on fewer is mostly noise
SLO_WAITS = 5  # a probe lasts at least this many SLO latency bounds
STALL_SHARE = 0.5  # a generator lag this share of the SLO's latency bound marks a stalled host ...
STALL_FLOOR_S = 0.05  # ... and at least this long
STALL_NO_BOUND_S = 0.25  # the stall without a latency bound in the SLO
STREAM_LENGTHS = 3  # a probe of webcam or microphone streams lasts at least this many stream lengths
METASTABLE_REPEATS = 2  # sustained runs in a row (different Poisson seeds) a metastable answer must hold
ProbeObserver = Callable[[Probe], None]


# ---------------------------------------------------------------- one probe


def rate_overrides(base: dict[str, Any], rate: float, duration_s: float) -> dict[str, Any]:
    """`base` overrides turned into an open-loop probe at `rate` for `duration_s` (no count limit)."""
    overrides = {k: v for k, v in base.items() if k not in ("load.users", "load.rate")}
    overrides.update({"load.rate": rate, "load.duration": duration_s, "load.requests": None,
                      "load.interval": None})
    return overrides


def judge(kind: str, rate: float, summary: Summary, stopped: str | None,
          constraints: Constraints, steady: Steadiness | None = None,
          own: dict[str, dict[str, float]] | None = None) -> Probe:
    """A probe's figures and verdict from its summary (the same bounds a sweep point is held to) and its
    steady-state test (a probe that did not keep up fails, whatever its latency); `own`: a mix entry's
    own slo bounds, by endpoint label."""
    result = point_result(Point({}), [summary], constraints, "ok", "", {})
    violations = constraints.slo_violations(result) + endpoint_violations(summary, constraints, own)
    completed = summary.completed_ok
    if completed == 0 and not violations:
        violations.append("no request completed")
    if steady is not None and not steady.steady:
        violations.insert(0, steady.verdict)
    return Probe(
        host_stall=host_stall(summary, constraints),
        rate_rps=rate,
        passed=not violations and not stopped,
        kind=kind,
        stopped=stopped or "",
        violations=violations,
        **result.figure_values(),
        completed_ok=completed,
        steady=None if steady is None else steady.steady,
        steadiness=steady,
    )


def host_stall(summary: Summary, constraints: Constraints) -> str:
    """'' unless the load generator itself lagged (its event loop's or its sends' p99) by at least
    STALL_SHARE of the SLO's latency bound (STALL_FLOOR_S at least, STALL_NO_BOUND_S without a bound):
    then the machine, not only the server, was slow during the probe, and a failure may be the host's."""
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
    """How long the bisection's probes are, and why (see the module docstring)."""

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
    """A mix: the bounds each endpoint breaks on its own, named `endpoint: bound`, so the verdict says
    which endpoint breaks first. The rate bounds (min_*) are the total's; an entry's own slo (`own`,
    by label) replaces the bounds it sets for its endpoint."""
    shared = {k: v for k, v in constraints.slo.items() if not k.startswith("min_")}
    broken = []
    for label, sub in summary.endpoints.items():
        if sub.requests:
            bounds = replace(constraints, slo={**shared, **(own or {}).get(label, {})})
            one = point_result(Point({}), [sub], bounds, "ok", "", {})
            broken += [f"{label}: {v}" for v in bounds.slo_violations(one)]
    return broken


def own_bounds(scenario: Scenario) -> dict[str, dict[str, float]]:
    """The bounds each mix entry's own slo sets, by endpoint label ({} without a mix)."""
    from qbench.run import endpoint_slos

    return {label: slo.thresholds() for label, slo in (endpoint_slos(scenario) or {}).items() if slo}


@dataclass
class Prober:
    """Runs probes of one scenario against one server, numbering their run folders under `probes_dir`."""

    scenario: Scenario
    base_url: str
    constraints: Constraints
    probes_dir: Path
    root: Path  # run folders are recorded relative to this folder
    base_overrides: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 5.0  # the bracket's probes (and the estimate)
    stop_runaway: bool = True
    observer: ProbeObserver | None = None
    count: int = 0
    tolerance: float = 0.1  # the search's: sets the bisection's probe length and the steadiness margin
    max_duration_s: float = DEFAULT_MAX_PROBE_S
    confirm_duration_s: float = DEFAULT_CONFIRM_S
    server: dict[str, Any] | None = None  # the last probe's run.json `server` (a balancer in front?)
    confirmed_at: dict[float, int] = field(default_factory=dict)  # sustained runs so far, by rate

    @property
    def margin(self) -> float:
        """Relative overload a steady-state test counts (a quarter of the tolerance)."""
        return self.tolerance / 4

    @property
    def length(self) -> ProbeLength:
        return ProbeLength(self.tolerance, self.duration_s, max(self.max_duration_s, self.duration_s),
                           latency_bound_s(self.constraints))

    def _run(self, name: str, overrides: dict[str, Any], detector: RunawayDetector | None
             ) -> tuple[PointRun, Path, float]:
        run_dir = self.probes_dir / f"{self.count:02d}-{name}"
        self.count += 1
        started = time.monotonic()
        measured = run_measured(self.scenario, self.constraints.slo, self.base_url, run_dir, overrides,
                                detector)
        self.server = measured.server
        return measured, run_dir, time.monotonic() - started

    def _done(self, probe: Probe, run_dir: Path, elapsed_s: float) -> Probe:
        probe.run_dir = run_dir.relative_to(self.root).as_posix()
        probe.elapsed_s = elapsed_s
        if self.observer:
            self.observer(probe)
        return probe

    def open_loop(self, rate: float, duration_s: float, kind: str = "rate", stop: bool = True,
                  seed_offset: int = 0) -> tuple[Probe, list[RequestRecord]]:
        """An open-loop probe at `rate` req/s for `duration_s`, judged with its steady-state test. The
        sustained confirmation is stopped early only by an overload beyond the tolerance: a smaller
        one, or a passing stall of the host, is judged on the whole run. `seed_offset`: another draw
        of Poisson arrivals (and payloads) than the scenario's seed gives."""
        overrides = rate_overrides(self.base_overrides, rate, duration_s)
        if seed_offset:
            overrides.update(seed_overrides(self.scenario, seed_offset))
        margin = self.tolerance if kind == "confirm" else self.margin
        detector = RunawayDetector(margin=margin) if self.stop_runaway and stop else None
        measured, run_dir, elapsed = self._run(f"{kind}-{rate:.4g}", overrides, detector)
        steady = steadiness(measured.records, self.margin, bound_s=latency_bound_s(self.constraints))
        probe = judge(kind, rate, measured.summary, measured.stopped, self.constraints, steady,
                      own_bounds(self.scenario))
        probe.duration_s = duration_s
        _split_sessions(probe, measured)
        return self._done(probe, run_dir, elapsed), measured.records

    def rate(self, rate: float) -> Probe:
        """A short open-loop probe (the bracket's)."""
        return self.open_loop(rate, self.duration_s)[0]

    def refine(self, rate: float) -> Probe:
        """A bisection probe: long enough for an overload of the tolerance to show (`ProbeLength`)."""
        return self.open_loop(rate, self.length.seconds(rate))[0]

    def confirm(self, rate: float) -> Probe:
        """The sustained run at the answer; a repeat at the same rate draws other Poisson arrivals."""
        runs = self.confirmed_at.get(rate, 0)
        self.confirmed_at[rate] = runs + 1
        return self.open_loop(rate, self.confirm_duration_s, "confirm", seed_offset=runs)[0]

    def overload(self, capacity: float) -> tuple[Probe, Overload | None]:
        """One run at OVERLOAD_FACTOR x the capacity, not stopped early, and what it showed."""
        rate = capacity * OVERLOAD_FACTOR
        seconds = max(min(2 * self.length.seconds(capacity), self.max_duration_s), 10.0)
        probe, records = self.open_loop(rate, seconds, "overload", stop=False)
        return probe, analyse(records, rate, capacity, latency_bound_s(self.constraints))

    def estimate(self, users: int) -> tuple[Probe, list[RequestRecord]]:
        """A closed-loop probe with `users` users and no think time. Its rate is the first guess: by
        Little's law users / mean latency (the completions/s of a saturated server; steadier than the
        completions counted in a short window, which its edges deflate)."""
        overrides = {k: v for k, v in self.base_overrides.items() if k != "load.rate"}
        overrides.update({"load.users": users, "load.think_time": 0, "load.ramp_up": 0,
                          "load.duration": self.duration_s, "load.requests": None, "load.interval": None})
        measured, run_dir, elapsed = self._run(f"estimate-u{users}", overrides, None)
        probe = judge("estimate", 0.0, measured.summary, None, self.constraints,
                      own=own_bounds(self.scenario))
        probe.users = users
        probe.duration_s = self.duration_s
        probe.rate_rps = users / probe.mean_latency_s if probe.mean_latency_s else probe.throughput_rps
        _split_sessions(probe, measured)
        return self._done(probe, run_dir, elapsed), measured.records


def seed_overrides(scenario: Scenario, offset: int) -> dict[str, Any]:
    """The overrides that move the seed of arrivals and payloads (`Scenario.seed`) by `offset`."""
    key = "mix.0.payload.seed" if scenario.mix else "journey.0.payload.seed" if scenario.journey else (
        "payload.seed")
    return {key: scenario.seed + offset}


def _split_sessions(probe: Probe, measured: PointRun) -> None:
    """A probe whose sessions reached two replicas of a balancer without affinity fails, saying so (with
    no balancer in front, a lost session is an app error: the error-rate SLO judges it)."""
    split = split_sessions(measured.records, measured.server, short=True)
    if split:
        probe.violations.append(split)
        probe.passed = False


# ---------------------------------------------------------------- `qbench capacity`


@dataclass(frozen=True)
class CapacityConfig:
    """Everything `run_capacity` needs, validated (`capacity_config` builds it from CLI values)."""

    scenario: Scenario
    scenario_path: str
    target: str
    constraints: Constraints
    out_dir: Path
    plan: SearchPlan = field(default_factory=SearchPlan)
    probe_duration_s: float = 5.0
    warmup_s: float = 0.5
    think_time_s: float = DEFAULT_THINK_TIME_S
    estimate_users: int = 32
    start_rate: float | None = None  # skip the estimate and start the bracket here
    max_probe_duration_s: float = DEFAULT_MAX_PROBE_S  # the bisection's probes at most
    confirm_duration_s: float = DEFAULT_CONFIRM_S  # the sustained confirmation
    overload: bool = True  # one run at 1.3 x the capacity: throughput past it, max_size, ETA
    recheck: bool = True  # the first passing rate again after the search: did the server degrade?

    @property
    def writer(self) -> Writer:
        """Writes capacity.json and masks what is printed: the scenario's and the target's credentials."""
        return Writer(run_secrets(self.scenario, self.target))


def capacity_config(
    scenario_path: Path,
    *,
    target: str | None = None,
    slo: dict[str, float] | None = None,
    tolerance: float = 0.1,
    max_probes: int = 10,
    duration_s: float = 5.0,
    max_duration_s: float = DEFAULT_MAX_PROBE_S,
    confirm_duration_s: float = DEFAULT_CONFIRM_S,
    overload: bool = True,
    recheck: bool = True,
    warmup_s: float = 0.5,
    think_time_s: float | None = None,
    estimate_users: int = 32,
    start_rate: float | None = None,
    confirm: bool = True,
    out_root: Path = Path("reports"),
    overrides: dict[str, Any] | None = None,
) -> CapacityConfig:
    """Validate CLI values into a CapacityConfig; a bad value raises ScenarioError before any request.
    `overrides`: dotted scenario keys from the command line (--set, and the credentials: auth.login,
    auth.headers.NAME, auth.bearer)."""
    from qbench.run import load_scenario
    from qbench.tune.values.constraints import build_constraints, require_slo

    scenario = load_scenario(scenario_path, overrides or None)
    constraints = build_constraints(scenario, slo or {}, str(scenario_path))
    require_slo(constraints, "qbench capacity")
    url = target or scenario.target
    if not url:
        raise ScenarioError(f"{scenario_path}: no target: pass --target URL (or set target: in the scenario)")
    for name, value in (("--duration", duration_s), ("--max-probes", max_probes),
                        ("--estimate-users", estimate_users), ("--max-duration", max_duration_s),
                        ("--confirm-duration", confirm_duration_s)):
        if value <= 0:
            raise ScenarioError(f"{name} {value}: expected a positive number")
    if start_rate is not None and start_rate <= 0:
        raise ScenarioError(f"--start-rate {start_rate}: expected a positive rate (req/s)")
    think = think_time_s if think_time_s is not None else (scenario.load.think_time or DEFAULT_THINK_TIME_S)
    duration_s = max(duration_s, STREAM_LENGTHS * stream_seconds(scenario))  # streams end within probes
    max_duration_s = max(max_duration_s, duration_s)
    return CapacityConfig(
        scenario=scenario,
        scenario_path=str(scenario_path),
        target=url,
        constraints=constraints,
        out_dir=new_folder("capacity", scenario.name, out_root),
        plan=SearchPlan(tolerance=tolerance, max_probes=max_probes, confirm=confirm),
        probe_duration_s=duration_s,
        warmup_s=warmup_s,
        think_time_s=think,
        estimate_users=estimate_users,
        start_rate=start_rate,
        max_probe_duration_s=max_duration_s,
        confirm_duration_s=confirm_duration_s,
        overload=overload,
        recheck=recheck,
    )


def stream_seconds(scenario: Scenario) -> float:
    """The longest stream of the scenario's webcam or microphone streams (`endpoint.chunks` x
    `stream_every`, Gradio's default interval where the scenario leaves it to the app); 0 without."""
    from qbench.run import DEFAULT_STREAM_EVERY_S

    return max((ep.chunks * (ep.stream_every or DEFAULT_STREAM_EVERY_S) for _, ep, _ in scenario.endpoints()
                if ep.chunks is not None), default=0.0)


@dataclass
class CapacityRun:
    out_dir: Path
    capacity: Capacity
    think_time_s: float
    users: float | None
    lines: list[tuple[str, str]]  # the answer in words: (label, text)


def run_capacity(config: CapacityConfig, observer: ProbeObserver | None = None) -> CapacityRun:
    """Estimate, bracket, bisect, confirm and overload the scenario's capacity on `config.target`; write
    the folder."""
    prober = capacity_prober(config, observer)
    estimate = None
    first = config.start_rate
    if first is None:
        estimate, records = prober.estimate(config.estimate_users)
        split = split_sessions(records, prober.server)
        if split:
            raise TargetError(config.writer.mask(f"{config.target}: {split} (the closed-loop estimate, see "
                                                 f"{config.out_dir / estimate.run_dir}): nothing to search"))
        if estimate.completed_ok == 0:
            raise QbenchError(config.writer.mask(
                f"{config.target}: the closed-loop estimate ({config.estimate_users} users, "
                f"{config.probe_duration_s:g} s) completed no request ({', '.join(estimate.violations)}; "
                f"see {config.out_dir / estimate.run_dir}): nothing to search"
            ))
        first = estimate.rate_rps
    capacity = search_capacity(prober.rate, first, replace(config.plan, confirm=False), estimate,
                               refine=prober.refine)
    if config.recheck:
        recheck(prober, capacity)
    repeats = METASTABLE_REPEATS if lower_if_metastable(capacity, prober) else 1
    if config.plan.confirm and capacity.capacity_rps is not None:  # last: on the server as the search left it
        sustain(capacity, prober.confirm, config.plan, repeats)
    if config.overload and capacity.capacity_rps is not None:
        probe, overload = prober.overload(capacity.capacity_rps)
        capacity.probes.append(probe)
        capacity.overload = overload
    users = capacity.users(config.think_time_s)
    length = prober.length.to_dict(capacity.capacity_rps or first)
    streams = any(ep.chunks is not None for _, ep, _ in config.scenario.endpoints())
    lines = describe(capacity, config.constraints, config.think_time_s, length["why"], streams=streams)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    answer = _capacity_json(config, capacity, users, lines, length)
    config.writer.json(config.out_dir / "capacity.json", answer)  # names the target: masked
    return CapacityRun(config.out_dir, capacity, config.think_time_s, users, lines)


def recheck(prober: Prober, capacity: Capacity) -> None:
    """The earliest passing probe's rate once more (same length), its records compared with the first's
    (qbench.tune.verdicts.degradation), into `capacity.degradation` (or, when the two runs are too small
    to judge, why: `capacity.recheck_note`); the run is appended to the probes as kind "recheck". The
    earliest passing probe with MIN_REQUESTS ok requests is measured again, the earliest passing one
    when none has that many."""
    passed = [p for p in capacity.probes if p.kind == "rate" and p.passed and p.run_dir]
    first = next((p for p in passed if p.completed_ok >= MIN_REQUESTS), passed[0] if passed else None)
    if first is None:
        return
    probe, records = prober.open_loop(first.rate_rps, first.duration_s or prober.duration_s, "recheck",
                                      stop=False)
    capacity.probes.append(probe)
    before = read_records(prober.root / first.run_dir)
    found = compare(first.rate_rps, before, records)
    if found is None:
        capacity.recheck_note = unjudged(first.rate_rps, before, records)
        return
    capacity.degradation = replace(found, start_probe=first.run_dir, end_probe=probe.run_dir)


def lower_if_metastable(capacity: Capacity, prober: Prober) -> Metastability | None:
    """Service time against the queue over the search's open-loop probes (qbench.tune.verdicts.metastable),
    kept in `capacity.metastability`; when it rises, an answer above the safe rate is lowered to it
    (`capacity.lowered_from_rps` keeps the search's). Returns the finding when it rises (the answer
    then needs METASTABLE_REPEATS sustained runs), else None."""
    bound, rate = latency_bound_s(prober.constraints), capacity.capacity_rps
    if rate is None or not bound:
        return None
    runs = [read_records(prober.root / p.run_dir) for p in capacity.probes
            if p.kind in ("rate", "recheck") and p.run_dir]
    found = queue_slowdown(runs, rate, bound)
    capacity.metastability = found
    safe = found.safe_rps if found is not None else None
    if found is None or safe is None:
        return None
    if safe < rate:
        capacity.lowered_from_rps, capacity.capacity_rps = rate, safe
    return found


def capacity_prober(config: CapacityConfig, observer: ProbeObserver | None = None) -> Prober:
    return Prober(
        config.scenario, config.target, config.constraints, config.out_dir / "probes", config.out_dir,
        base_overrides={f"slo.{k}": v for k, v in config.constraints.slo.items()} | {
            "load.warmup": config.warmup_s},
        duration_s=config.probe_duration_s, observer=observer, tolerance=config.plan.tolerance,
        max_duration_s=config.max_probe_duration_s, confirm_duration_s=config.confirm_duration_s,
    )


def describe(capacity: Capacity, constraints: Constraints, think_time_s: float, length_why: str = "",
             *, streams: bool = False) -> list[tuple[str, str]]:
    """The answer in words, as (label, text): capacity, how it held, its bracket, where the SLO first
    fails, users (and, for streamed inputs, concurrent streams), the probe length, what happens past it."""
    slo = bounds_text(constraints.slo)
    slo += f"{', ' if slo else ''}error_rate <= {constraints.max_error_rate:.1%}"
    state = "converged" if capacity.converged else "NOT converged: probe budget spent"
    rate, failing = capacity.capacity_rps, capacity.failing_rate_rps
    if rate is None:
        low = f"{failing:.3g} req/s" if failing is not None else "the lowest rate"
        return [("no capacity", f"the SLO ({slo}) or the steady state fails even at {low}, the lowest "
                                "rate tried")]
    meta, lowered = capacity.metastability, capacity.lowered_from_rps
    head = f"{rate:.3g} req/s of open-loop arrivals meeting {slo}, the server keeping up"
    overload = capacity.overload
    if meta is not None and meta.rising:
        cap = meta.max_size(rate)
        head += (f", lowered from the search's {lowered:.3g} req/s, where a burst tips it over"
                 if lowered is not None else "") + f"; keep max_size at {cap} or less (metastable, below)"
    elif overload is not None and overload.fell_at_waiting is not None and overload.max_size is not None:
        head += (f"; with max_size at {overload.max_size} or less: past about {overload.fell_at_waiting} "
                 "waiting its throughput falls (past it, below), so without a cap a burst tips it over")
    lines = [("capacity", head)]
    lines.append(held_sentence(capacity, "no sustained confirmation was run (--no-confirm)"))
    if meta is not None:
        lines.append(("metastable" if meta.rising else "with the queue", meta.text(rate)))
    over = capacity.over_the_search
    if over is not None:
        lines.append(("over the search", over))
    if failing is None:
        lines.append(("bracket", f"the SLO held at every rate tried ({state}): the capacity is at least "
                                 f"{rate:.3g} req/s"))
    else:
        lines.append(("bracket", f"[{rate:.3g}, {failing:.3g}) req/s, last passing to first failing "
                                 f"(tolerance {capacity.tolerance:.0%}, {state})"))
        probe = capacity.first_failing
        why = probe.why if probe and probe.why else "failed"
        lines.append(("SLO first fails", f"at {failing:.3g} req/s: {why}"))
    at = capacity.at_capacity
    users = capacity.users(think_time_s)
    if users is not None and at is not None:
        lines.append(("users", f"~{users:.0f} users clicking every {think_time_s:g} s (N = {rate:.3g} req/s "
                               f"x ({think_time_s:g} s think + {at.mean_latency_s or 0:.3g} s mean latency "
                               "at capacity))"))
    held = capacity.users(0.0)
    if streams and held is not None and at is not None:
        lines.append(("streams", f"~{held:.1f} concurrent streams (N = {rate:.3g} streams/s x "
                                 f"{at.mean_latency_s or 0:.3g} s mean stream length at capacity)"))
    if length_why:
        lines.append(("probe length", length_why))
    if overload is not None:
        lines.append((f"past it (x{overload.rate_rps / overload.capacity_rps:.2g})", overload.advice))
        if overload.eta_finding:
            lines.append(("server ETA", overload.eta_finding))
    return lines


def _capacity_json(config: CapacityConfig, capacity: Capacity, users: float | None,
                   lines: list[tuple[str, str]], length: dict[str, Any]) -> dict[str, Any]:
    return CapacityFile(
        result=capacity, target=config.target, created_at=datetime.now(timezone.utc).isoformat(),
        scenario={"path": config.scenario_path, "content": config.scenario.model_dump(mode="json")},
        slo=config.constraints.slo, max_error_rate=config.constraints.max_error_rate,
        plan=asdict(config.plan),
        probe_duration_s=config.probe_duration_s, max_probe_duration_s=config.max_probe_duration_s,
        confirm_duration_s=config.confirm_duration_s, probe_length=length, warmup_s=config.warmup_s,
        think_time_s=config.think_time_s, estimate_users=config.estimate_users, users=users, answer=lines,
    ).to_dict()




def parse_tolerance(text: str) -> float:
    """'5%' or '0.05' -> 0.05 (a relative width between 0.1 % and 100 %)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0.001 <= value <= 1.0:
        raise ScenarioError(f"--tolerance {text!r}: expected a relative width such as 5% or 0.05 (0.1%-100%)")
    return value
