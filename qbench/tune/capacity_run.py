"""Capacity probes against a live server, and `qbench capacity`: estimate -> bracket -> bisect -> folder.

A probe is the scenario at an open-loop arrival rate (`load.rate`, for `duration` seconds after a short
warm-up; the scenario's arrival process, payload and timeout are kept), judged like a sweep point: it
passes when every SLO bound and the error-rate ceiling hold and at least one request completed; a probe
whose queue runs away (`RunawayDetector`) is stopped early and fails. The first guess is a closed-loop
probe with `estimate_users` users and no think time: the completions/s a saturated server gives
(users / mean latency), which the capacity under an SLO cannot exceed by much.

Layout of `reports/capacity-<name>-<stamp>/`:

    capacity.json        {schema_version, kind "capacity", created_at, scenario {path, content}, target,
                          slo, max_error_rate, plan {tolerance, max_probes, step, min_rate, max_rate,
                          confirm}, probe_duration_s, warmup_s, think_time_s, estimate_users,
                          result (Capacity.to_dict(): capacity_rps, failing_rate_rps, tolerance,
                          converged, confirmed, probes [...]), users (equivalent users), answer
                          [[label, text], ...] (the answer in words, as printed)}
    probes/00-estimate-u<n>/   the closed-loop estimate's run folder
    probes/<nn>-rate-<r>/      one run folder per open-loop probe, in the order they ran
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qbench.errors import QbenchError, ScenarioError
from qbench.run.credentials import redact, remember_url
from qbench.run.scenario import Scenario
from qbench.tune.capacity import Capacity, Probe, SearchPlan, search_capacity
from qbench.tune.grid import Point
from qbench.tune.point import RunawayDetector, point_result, run_once
from qbench.tune.recommend import Constraints

SCHEMA_VERSION = 1
DEFAULT_THINK_TIME_S = 10.0
ProbeObserver = Callable[[Probe], None]


# ---------------------------------------------------------------- one probe


def rate_overrides(base: dict[str, Any], rate: float, duration_s: float) -> dict[str, Any]:
    """`base` overrides turned into an open-loop probe at `rate` for `duration_s` (no count limit)."""
    overrides = {k: v for k, v in base.items() if k not in ("load.users", "load.rate")}
    overrides.update({"load.rate": rate, "load.duration": duration_s, "load.requests": None,
                      "load.interval": None})
    return overrides


def judge(kind: str, rate: float, summary: dict[str, Any], stopped: str | None,
          constraints: Constraints, own: dict[str, dict[str, float]] | None = None) -> Probe:
    """A probe's figures and verdict from its summary (the same bounds a sweep point is held to);
    `own`: a mix entry's own slo bounds, by endpoint label."""
    result = point_result(Point({}), [{"summary": summary}], constraints, "ok", "", {})
    violations = constraints.slo_violations(result) + endpoint_violations(summary, constraints, own)
    completed = int(summary.get("completed_ok", 0))
    if completed == 0 and not violations:
        violations.append("no request completed")
    return Probe(
        rate_rps=rate,
        passed=not violations and not stopped,
        kind=kind,
        stopped=stopped or "",
        violations=violations,
        throughput_rps=result.throughput_rps,
        goodput_rps=result.goodput_rps,
        p50_latency_s=result.p50_latency_s,
        p95_latency_s=result.p95_latency_s,
        p99_latency_s=result.p99_latency_s,
        mean_latency_s=result.mean_latency_s,
        error_rate=result.error_rate,
        completed_ok=completed,
    )


def endpoint_violations(summary: dict[str, Any], constraints: Constraints,
                        own: dict[str, dict[str, float]] | None = None) -> list[str]:
    """A mix: the bounds each endpoint breaks on its own, named `endpoint: bound`, so the verdict says
    which endpoint breaks first. The rate bounds (min_*) are the total's; an entry's own slo (`own`,
    by label) replaces the bounds it sets for its endpoint."""
    shared = {k: v for k, v in constraints.slo.items() if not k.startswith("min_")}
    broken = []
    for label, sub in (summary.get("endpoints") or {}).items():
        if isinstance(sub, dict) and sub.get("requests"):
            bounds = replace(constraints, slo={**shared, **(own or {}).get(label, {})})
            one = point_result(Point({}), [{"summary": sub}], bounds, "ok", "", {})
            broken += [f"{label}: {v}" for v in bounds.slo_violations(one)]
    return broken


def own_bounds(scenario: Scenario) -> dict[str, dict[str, float]]:
    """The bounds each mix entry's own slo sets, by endpoint label ({} without a mix)."""
    from qbench.run.mix import endpoint_slos

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
    duration_s: float = 5.0
    stop_runaway: bool = True
    observer: ProbeObserver | None = None
    count: int = 0

    def _run(self, name: str, overrides: dict[str, Any], detector: RunawayDetector | None
             ) -> tuple[dict[str, Any], str | None, Path, float]:
        run_dir = self.probes_dir / f"{self.count:02d}-{name}"
        self.count += 1
        started = time.monotonic()
        summary, stopped = run_once(self.scenario, self.constraints.slo, self.base_url, run_dir, overrides,
                                    detector)
        return summary, stopped, run_dir, time.monotonic() - started

    def _done(self, probe: Probe, run_dir: Path, elapsed_s: float) -> Probe:
        probe.run_dir = run_dir.relative_to(self.root).as_posix()
        probe.elapsed_s = elapsed_s
        if self.observer:
            self.observer(probe)
        return probe

    def rate(self, rate: float) -> Probe:
        """An open-loop probe at `rate` req/s."""
        overrides = rate_overrides(self.base_overrides, rate, self.duration_s)
        detector = RunawayDetector() if self.stop_runaway else None
        summary, stopped, run_dir, elapsed = self._run(f"rate-{rate:.4g}", overrides, detector)
        probe = judge("rate", rate, summary, stopped, self.constraints, own_bounds(self.scenario))
        return self._done(probe, run_dir, elapsed)

    def estimate(self, users: int) -> Probe:
        """A closed-loop probe with `users` users and no think time. Its rate is the first guess: by
        Little's law users / mean latency (the completions/s of a saturated server; steadier than the
        completions counted in a short window, which its edges deflate)."""
        overrides = {k: v for k, v in self.base_overrides.items() if k != "load.rate"}
        overrides.update({"load.users": users, "load.think_time": 0, "load.ramp_up": 0,
                          "load.duration": self.duration_s, "load.requests": None, "load.interval": None})
        summary, _, run_dir, elapsed = self._run(f"estimate-u{users}", overrides, None)
        probe = judge("estimate", 0.0, summary, None, self.constraints, own_bounds(self.scenario))
        probe.users = users
        probe.rate_rps = users / probe.mean_latency_s if probe.mean_latency_s else probe.throughput_rps
        return self._done(probe, run_dir, elapsed)


# ---------------------------------------------------------------- `qbench capacity`


@dataclass
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


def capacity_config(
    scenario_path: Path,
    *,
    target: str | None = None,
    slo: dict[str, float] | None = None,
    tolerance: float = 0.05,
    max_probes: int = 10,
    duration_s: float = 5.0,
    warmup_s: float = 0.5,
    think_time_s: float | None = None,
    estimate_users: int = 32,
    start_rate: float | None = None,
    confirm: bool = True,
    out_root: Path = Path("reports"),
    auth: dict[str, Any] | None = None,
) -> CapacityConfig:
    """Validate CLI values into a CapacityConfig; a bad value raises ScenarioError before any request.
    `auth`: credential overrides from the command line (auth.login, auth.headers.NAME, auth.bearer)."""
    from qbench.run.scenario import load_scenario
    from qbench.tune.config import build_constraints, require_slo

    scenario = load_scenario(scenario_path, auth or None)
    constraints = build_constraints(scenario, slo or {}, str(scenario_path))
    require_slo(constraints, "qbench capacity")
    url = target or scenario.target
    if not url:
        raise ScenarioError(f"{scenario_path}: no target: pass --target URL (or set target: in the scenario)")
    remember_url(url)  # masked in capacity.json and the probes' files
    for name, value in (("--duration", duration_s), ("--max-probes", max_probes),
                        ("--estimate-users", estimate_users)):
        if value <= 0:
            raise ScenarioError(f"{name} {value}: expected a positive number")
    if start_rate is not None and start_rate <= 0:
        raise ScenarioError(f"--start-rate {start_rate}: expected a positive rate (req/s)")
    think = think_time_s if think_time_s is not None else (scenario.load.think_time or DEFAULT_THINK_TIME_S)
    return CapacityConfig(
        scenario=scenario,
        scenario_path=str(scenario_path),
        target=url,
        constraints=constraints,
        out_dir=new_capacity_dir(out_root, scenario.name),
        plan=SearchPlan(tolerance=tolerance, max_probes=max_probes, confirm=confirm),
        probe_duration_s=duration_s,
        warmup_s=warmup_s,
        think_time_s=think,
        estimate_users=estimate_users,
        start_rate=start_rate,
    )


def new_capacity_dir(root: Path, scenario_name: str) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = root / f"capacity-{scenario_name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"capacity-{scenario_name}-{stamp}-{n}"
    return path


@dataclass
class CapacityRun:
    out_dir: Path
    capacity: Capacity
    think_time_s: float
    users: float | None
    lines: list[tuple[str, str]]  # the answer in words: (label, text)


def run_capacity(config: CapacityConfig, observer: ProbeObserver | None = None) -> CapacityRun:
    """Estimate, bracket and bisect the scenario's capacity on `config.target`; write the folder."""
    prober = Prober(
        config.scenario, config.target, config.constraints, config.out_dir / "probes", config.out_dir,
        base_overrides={f"slo.{k}": v for k, v in config.constraints.slo.items()} | {
            "load.warmup": config.warmup_s},
        duration_s=config.probe_duration_s, observer=observer,
    )
    estimate = None
    first = config.start_rate
    if first is None:
        estimate = prober.estimate(config.estimate_users)
        if estimate.completed_ok == 0:
            raise QbenchError(
                f"{config.target}: the closed-loop estimate ({config.estimate_users} users, "
                f"{config.probe_duration_s:g} s) completed no request ({', '.join(estimate.violations)}; "
                f"see {config.out_dir / estimate.run_dir}): nothing to search"
            )
        first = estimate.rate_rps
    capacity = search_capacity(prober.rate, first, config.plan, estimate)
    users = capacity.users(config.think_time_s)
    lines = describe(capacity, config.constraints, config.think_time_s)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(config.out_dir / "capacity.json", _capacity_json(config, capacity, users, lines))
    return CapacityRun(config.out_dir, capacity, config.think_time_s, users, lines)


def describe(capacity: Capacity, constraints: Constraints, think_time_s: float) -> list[tuple[str, str]]:
    """The answer in words, as (label, text): capacity, its bracket, where the SLO first fails, users."""
    slo = ", ".join(f"{k} <= {v:g}" for k, v in constraints.slo.items())
    slo += f"{', ' if slo else ''}error_rate <= {constraints.max_error_rate:.1%}"
    state = "converged" if capacity.converged else "NOT converged: probe budget spent"
    if capacity.confirmed:
        state += ", confirmed by a repeat"
    rate, failing = capacity.capacity_rps, capacity.failing_rate_rps
    if rate is None:
        return [("no capacity", f"the SLO ({slo}) fails even at {failing:.3g} req/s, the lowest rate tried")]
    lines = [("capacity", f"{rate:.3g} req/s of open-loop arrivals meeting {slo}")]
    if failing is None:
        lines.append(("bracket", f"the SLO held at every rate tried ({state}): the capacity is at least "
                                 f"{rate:.3g} req/s"))
    else:
        lines.append(("bracket", f"[{rate:.3g}, {failing:.3g}) req/s, last passing to first failing "
                                 f"(tolerance {capacity.tolerance:.0%}, {state})"))
        probe = capacity.first_failing
        why = "; ".join(probe.violations) if probe and probe.violations else "failed"
        why = probe.stopped if probe and probe.stopped else why
        lines.append(("SLO first fails", f"at {failing:.3g} req/s: {why}"))
    at = capacity.at_capacity
    users = capacity.users(think_time_s)
    if users is not None and at is not None:
        lines.append(("users", f"~{users:.0f} users clicking every {think_time_s:g} s (N = {rate:.3g} req/s "
                               f"x ({think_time_s:g} s think + {at.mean_latency_s or 0:.3g} s mean latency "
                               "at capacity))"))
    return lines


def _capacity_json(config: CapacityConfig, capacity: Capacity, users: float | None,
                   lines: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "capacity",
        "created_at": datetime.now(timezone.utc).isoformat(),
        "scenario": {"path": config.scenario_path, "content": config.scenario.model_dump(mode="json")},
        "target": config.target,
        "slo": config.constraints.slo,
        "max_error_rate": config.constraints.max_error_rate,
        "plan": asdict(config.plan),
        "probe_duration_s": config.probe_duration_s,
        "warmup_s": config.warmup_s,
        "think_time_s": config.think_time_s,
        "estimate_users": config.estimate_users,
        "result": capacity.to_dict(),
        "users": users,
        "answer": [list(line) for line in lines],
    }


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(redact(json.dumps(data, indent=2, default=str)), encoding="utf-8")
    tmp.replace(path)


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
