"""`qbench capacity`: estimate -> bracket -> bisect -> recheck -> confirm -> past it -> folder, against a live
server (`run_capacity`). The stages and the folder's layout: docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qbench.errors import QbenchError, ScenarioError, TargetError
from qbench.run import (
    Framework,
    Scenario,
    Writer,
    new_folder,
    read_framework,
    read_records,
    run_secrets,
    split_sessions,
)
from qbench.tune.capacity.answer import describe
from qbench.tune.capacity.bisect import SearchPlan, collapse_text, collapsed, search_capacity, sustain
from qbench.tune.capacity.probe import latency_bound_s
from qbench.tune.capacity.prober import DEFAULT_CONFIRM_S, DEFAULT_MAX_PROBE_S, ProbeObserver, Prober
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.values.ceiling import Capacity, RateNow
from qbench.tune.values.constraints import Constraints
from qbench.tune.verdicts.degradation import MIN_REQUESTS, Degradation, compare, unjudged
from qbench.tune.verdicts.metastable import Metastability, queue_slowdown

DEFAULT_THINK_TIME_S = 10.0
STREAM_LENGTHS = 3  # a probe of webcam or microphone streams lasts at least this many stream lengths
NEAR_EDGE = 0.9  # a recheck at this share of the first failing rate or more: its latency is not compared
METASTABLE_REPEATS = 2  # sustained runs in a row (different Poisson seeds) a metastable answer must hold
AGEING_RUNS = 2  # an ageing app's rate for now is sized for this many sustained runs of ageing more


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
    restart: Callable[[], str] | None = None  # the app qbench started (--app): start it again (its URL)
    own_cap_now: str = ""  # that app's own queue cap as the hook saw it run ("": none set, or not known)

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
    """CLI values -> CapacityConfig; ScenarioError for a bad value, before any request. `overrides`: dotted
    scenario keys (--set, and the credentials: auth.login, auth.headers.NAME, auth.bearer)."""
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
    """The scenario's longest webcam or microphone stream (chunks x interval), in s; 0 without one."""
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
    """Run every stage of the capacity search against `config.target` and write its folder."""
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
                f"{config.probe_duration_s:g} s, then up to {estimate.duration_s:g} s) completed no request "
                f"({', '.join(estimate.violations)}; "
                f"see {config.out_dir / estimate.run_dir}): nothing to search"
            ))
        first = estimate.rate_rps
    capacity = search_capacity(prober.rate, first, replace(config.plan, confirm=False), estimate,
                               refine=prober.refine)
    if config.recheck:
        recheck(prober, capacity)
    restart_collapsed(prober, capacity)
    repeats = METASTABLE_REPEATS if lower_if_metastable(capacity, prober) else 1
    # every run after a collapse would measure the collapsed server: none runs (an app qbench started is
    # restarted instead, and each confirmation that collapses it too)
    if config.plan.confirm and capacity.capacity_rps is not None and not capacity.collapsed:  # as left
        sustain(capacity, prober.confirm, config.plan, repeats,
                lambda failed: prober.fresh_start(failed, capacity.restarts, f"the {failed.kind} run"))
        unsustained_recheck(capacity)
    if config.overload and capacity.capacity_rps is not None and not capacity.collapsed:
        probe, overload = prober.overload(capacity.capacity_rps)
        capacity.probes.append(probe)
        capacity.overload = overload
        after_the_burst(prober, capacity)  # did it come back, and how much did the burst age it?
    if config.plan.confirm and capacity.capacity_rps is not None and not capacity.collapsed:
        rate_now(prober, capacity, config.plan)  # an app that ages: the rate it holds once all that is over
    return _finish(config, prober, capacity, first)


def _finish(config: CapacityConfig, prober: Prober, capacity: Capacity, first: float) -> CapacityRun:
    users = capacity.users(config.think_time_s)
    length = prober.length.to_dict(capacity.capacity_rps or first)
    streams = any(ep.chunks is not None for _, ep, _ in config.scenario.endpoints())
    lines = describe(capacity, config.constraints, config.think_time_s, length["why"], streams=streams)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    answer = _capacity_json(config, capacity, users, lines, length)
    config.writer.json(config.out_dir / "capacity.json", answer)  # names the target: masked
    return CapacityRun(config.out_dir, capacity, config.think_time_s, users, lines)


def recheck(prober: Prober, capacity: Capacity) -> None:
    """The earliest passing probe's rate measured again after the search (kind "recheck"), compared into
    `capacity.degradation` (or why not: `recheck_note`); a collapse seen twice sets `capacity.collapsed`."""
    passed = [p for p in capacity.probes if p.kind == "rate" and p.passed and p.run_dir]
    first = next((p for p in passed if p.completed_ok >= MIN_REQUESTS), passed[0] if passed else None)
    if first is None:
        return
    # the use between the two: the ok requests of the first probe and every run after it, to this one
    served = sum(p.completed_ok for p in capacity.probes[capacity.probes.index(first):])
    probe, records = prober.open_loop(first.rate_rps, first.duration_s or prober.duration_s, "recheck",
                                      stop=False)
    if collapsed(probe):  # a second look: a collapsed server stays so, a stall of a shared host passes
        probe.kind = "stalled"
        capacity.probes.append(probe)
        probe, records = prober.open_loop(first.rate_rps, first.duration_s or prober.duration_s, "recheck",
                                          stop=False)
    capacity.probes.append(probe)
    if collapsed(probe):
        capacity.collapsed = collapse_text(first, probe, capacity.capacity_rps, "the search's heavier probes",
                                           "at the capacity above")
        return
    before = read_records(prober.root / first.run_dir)
    failing = capacity.failing_rate_rps
    near_edge = failing is not None and first.rate_rps >= NEAR_EDGE * failing
    found = compare(first.rate_rps, before, records, latency_too=not near_edge)
    if found is None:
        capacity.recheck_note = unjudged(first.rate_rps, before, records)
        return
    note = ""
    if near_edge and failing and found.metric == "service time":
        note = (f"latency not compared: {first.rate_rps:.3g} req/s is within {1 - NEAR_EDGE:.0%} of the "
                f"first failing rate, {failing:.3g}, where the queue's own noise sets it")
    capacity.degradation = replace(found, start_probe=first.run_dir, end_probe=probe.run_dir,
                                   requests_between=served, note=note)


def restart_collapsed(prober: Prober, capacity: Capacity) -> None:
    """Restart an app qbench started that the recheck found collapsed (said in `capacity.restarts`)."""
    if not capacity.collapsed:
        return
    failed = next((p for p in reversed(capacity.probes) if p.kind == "recheck"), None)
    if failed is not None and prober.fresh_start(failed, capacity.restarts, "the search's heavier probes"):
        capacity.collapsed = ""


def unsustained_recheck(capacity: Capacity) -> None:
    """Drop the recheck's latency verdict when its rate is above the confirmed answer: the queue set it."""
    found, rate = capacity.degradation, capacity.capacity_rps
    if found is None or rate is None or not capacity.confirmed or found.rate_rps <= rate:
        return
    why = (f"{found.rate_rps:.3g} req/s is above {rate:.3g}, the rate that held a sustained run, so the "
           "queue set its latency")
    if found.metric != "service time":
        capacity.degradation, capacity.recheck_note = None, f"not judged: {why}"
    elif found.latency is not None:
        capacity.degradation = replace(found, latency=None, note=f"latency not compared: {why}")


def after_the_burst(prober: Prober, capacity: Capacity) -> None:
    """The answer once more after the run past it (kind "after"), compared with its confirmation."""
    rate, held = capacity.capacity_rps, capacity.confirmation
    if rate is None:
        return
    probe = prober.after_burst(rate)
    capacity.probes.append(probe)
    if held is None or not held.run_dir or not probe.run_dir:
        return
    found = compare(rate, read_records(prober.root / held.run_dir), read_records(prober.root / probe.run_dir))
    if found is not None:
        served = sum(p.completed_ok for p in capacity.probes[capacity.probes.index(held):-1])
        capacity.burst_change = replace(found, start_probe=held.run_dir, end_probe=probe.run_dir,
                                        requests_between=served)


def rate_now(prober: Prober, capacity: Capacity, plan: SearchPlan) -> None:
    """An ageing app's rate once qbench's runs are over (`capacity.now`): sustained runs (kind "now") from
    the answer scaled for its ageing, stepping down on a fail, up to `plan.confirm_tries`."""
    law, rate = ageing(capacity, repeats_change(prober, capacity)), capacity.capacity_rps
    if law is None or rate is None:
        return
    start_s, now_s, slope, metric, start_at = law
    served = sum(p.completed_ok for p in capacity.probes)
    guess = rate * start_s / now_s
    first = rate * start_s / (now_s + slope * AGEING_RUNS * prober.confirm_duration_s * guess)
    tried: float | None = first
    held = None
    for _ in range(plan.confirm_tries):
        if tried is None:
            break
        probe = prober.now(tried)
        capacity.probes.append(probe)
        if probe.passed:
            held = tried
            break
        served_rps = [0.95 * probe.throughput_rps] if probe.throughput_rps else []
        lower = min([tried * (1 - plan.tolerance), *served_rps])
        tried = max(lower, plan.min_rate) if tried > plan.min_rate else None
    capacity.now = RateNow(held, first, start_s, now_s, slope, served, metric, start_at)


def ageing(capacity: Capacity, repeated: Degradation | None = None
           ) -> tuple[float, float, float, str, str] | None:
    """How the app aged with use: (median s at the start, median s now, s added per request, metric, where
    the start was measured); None when no comparison found it ageing."""
    sources = ((capacity.burst_change, "the confirmation"), (repeated, "the first confirmation"),
               (capacity.degradation, "the recheck"))
    for found, at in sources:
        slope = found.slope_s() if found is not None else None
        if found is None or slope is None:
            continue
        ends = [i for i, p in enumerate(capacity.probes) if p.run_dir == found.end_probe]
        since = sum(p.completed_ok for p in capacity.probes[ends[-1] + 1:]) if ends else 0
        start_s = found.end_s if at == "the recheck" else found.start_s  # where the answer's rate held
        return start_s, found.end_s + slope * since, slope, found.metric, at
    return None


def repeats_change(prober: Prober, capacity: Capacity) -> Degradation | None:
    """The answer's first and last sustained confirmations compared; None with fewer than two held."""
    rate = capacity.capacity_rps
    held = [p for p in capacity.probes
            if p.kind == "confirm" and p.passed and p.rate_rps == rate and p.run_dir]
    if rate is None or len(held) < 2:
        return None
    first, last = held[0], held[-1]
    found = compare(rate, read_records(prober.root / first.run_dir), read_records(prober.root / last.run_dir))
    if found is None:
        return None
    between = capacity.probes[capacity.probes.index(first):capacity.probes.index(last)]
    served = sum(p.completed_ok for p in between)
    return replace(found, start_probe=first.run_dir, end_probe=last.run_dir, requests_between=served)


def lower_if_metastable(capacity: Capacity, prober: Prober) -> Metastability | None:
    """Service time against the queue over the search's probes, into `capacity.metastability`; when it rises,
    lowers an answer above the safe rate to it and returns the finding (else None)."""
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
        uncapped=uncapped_server(config), restart=config.restart, own_cap_now=config.own_cap_now,
    )


def uncapped_server(config: CapacityConfig) -> Framework | None:
    """The framework of a plain HTTP target without Gradio's queue cap (LitServe, BentoML), else None."""
    return read_framework(config.target) if config.scenario.protocol == "http" else None


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
