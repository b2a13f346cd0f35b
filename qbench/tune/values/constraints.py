"""The SLO and constraints a recommendation must satisfy (Constraints), read from a scenario and the command
line, and a point's actuals against them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from qbench.errors import ScenarioError
from qbench.run import Scenario, Slo, SloCheck, Summary, e2e_breaches, judge_bound, slo_actual
from qbench.tune.values.result import PointResult

Objective = Literal["latency", "capacity"]


def metric_value(point: PointResult, metric: str) -> float | None:
    """A point's actual for an SLO metric: its own field, else `extra` (min_goodput reads goodput_rps)."""
    attr = {"min_goodput": "goodput_rps", "min_throughput": "throughput_rps"}.get(metric, metric)
    value = getattr(point, attr, None) if attr in PointResult.__dataclass_fields__ else None
    return value if isinstance(value, int | float) else point.extra.get(metric)


def bounds_text(slo: dict[str, float]) -> str:
    """SLO bounds in words: `p95_latency_s <= 2, min_goodput >= 5` (a min_* bound is a floor)."""
    return ", ".join(f"{k} {'>=' if k.startswith('min_') else '<='} {v:g}" for k, v in slo.items())


@dataclass(frozen=True)
class Constraints:
    """What a recommendation must satisfy, and what it maximises (`objective`)."""

    slo: dict[str, float] = field(default_factory=dict)  # Slo field -> bound (min_* lower, others upper)
    max_error_rate: float = 0.01
    max_memory_mb: float | None = None  # ceiling on peak RSS and on peak GPU memory
    tie_tolerance: float = 0.02  # relative goodput difference treated as a tie with one repeat
    tolerated_wait_s: float | None = None  # for max_size advice; default from the SLO
    # latency: goodput at the scenario's own load under the SLO; capacity: highest rate meeting the SLO
    objective: Objective = "latency"

    def usable(self, point: PointResult) -> bool:
        """Rankable at all: it ran and has the objective's figure (under `capacity`, a runaway own-load run
        still counts); never with its knobs not applied."""
        if point.status == "knobs_not_applied":
            return False
        if self.objective == "capacity":
            return point.status != "failed" and point.capacity is not None
        return point.status == "ok"

    def value(self, point: PointResult) -> float:
        """The figure points are ranked by: goodput (latency) or capacity (capacity), req/s."""
        if self.objective == "capacity":
            return point.capacity_rps or 0.0
        return point.goodput_rps

    def excess(self, point: PointResult) -> float:
        """How far `point` is from feasible: the sum of relative overshoots (0 when feasible)."""
        total = 0.0
        if self.objective == "capacity":
            checks: list[SloCheck] = []
            total += 10.0 if point.capacity_rps is None else 0.0
        else:
            checks = [judge_bound(m, b, metric_value(point, m)) for m, b in self.slo.items()]
            checks.append(judge_bound("error_rate", self.max_error_rate, point.error_rate))
        if self.max_memory_mb is not None:
            checks += [judge_bound(m, self.max_memory_mb, getattr(point, m))
                       for m in ("peak_rss_mb", "peak_gpu_mem_mb")]
        return total + sum(check.excess for check in checks)

    def violations(self, point: PointResult) -> list[str]:
        """The constraints `point` breaks, in words (empty: feasible; capacity: no capacity, memory only)."""
        if self.objective == "capacity":
            broken = []
            if point.capacity_rps is None:
                failing = point.capacity.failing_rate_rps if point.capacity is not None else None
                at = f" {failing:.3g} req/s" if isinstance(failing, int | float) else " the lowest rate tried"
                broken.append(f"the SLO fails even at{at} (no capacity)")
            return broken + self.memory_violations(point)
        return self.slo_violations(point) + self.memory_violations(point)

    def slo_violations(self, point: PointResult) -> list[str]:
        """The SLO bounds and the error-rate ceiling `point` breaks at the load it was measured under."""
        return [check.why for check in self.slo_checks(point) if not check.passed]

    def slo_checks(self, point: PointResult) -> list[SloCheck]:
        """Each bound judged on the point's figures (the mean over its repeats), then the error-rate ceiling;
        where a figure passes but a run's own end-to-end check failed (its failed requests ranked
        slowest), that check."""
        return self._checks(lambda metric: metric_value(point, metric), point.error_rate, point.slo_breaches)

    def run_checks(self, summary: Summary) -> list[SloCheck]:
        """The same for one run (a capacity probe, one endpoint of a mix), from its summary."""
        return self._checks(lambda metric: slo_actual(summary, metric)[0], summary.error_rate,
                            e2e_breaches([summary]))

    def _checks(self, actual: Callable[[str], float | None], error_rate: float,
                breaches: Sequence[SloCheck]) -> list[SloCheck]:
        own = {check.name: check for check in breaches if check.name}
        unnamed = [check for check in breaches if not check.name]  # reasons kept by files of before
        checks = []
        for metric, bound in self.slo.items():
            check, breach = judge_bound(metric, bound, actual(metric)), own.pop(metric, None)
            checks.append(breach if check.passed and breach is not None else check)
        return [*checks, *own.values(), *unnamed, judge_bound("error_rate", self.max_error_rate, error_rate)]

    def memory_violations(self, point: PointResult) -> list[str]:
        broken = []
        if self.max_memory_mb is not None:
            for name in ("peak_rss_mb", "peak_gpu_mem_mb"):
                used = getattr(point, name)
                if used is not None and used > self.max_memory_mb:
                    broken.append(f"{name} {used:.0f} > {self.max_memory_mb:.0f}")
        return broken


def build_constraints(
    scenario: Scenario, slo_over: dict[str, float], source: str, *, max_error_rate: float | None = None
) -> Constraints:
    """The scenario's SLO with `slo_over` merged over it, validated (ScenarioError); its error_rate (default
    1%) is the ceiling unless `max_error_rate` is given."""
    slo = dict(scenario.slo.thresholds()) if scenario.slo else {}
    slo.update(slo_over)
    try:
        Slo(**slo)
    except ValidationError as exc:
        bad = "; ".join(_slo_problem(e) for e in exc.errors())
        raise ScenarioError(f"{source}: SLO {slo}: {bad}") from None
    max_error = max_error_rate or slo.pop("error_rate", None) or 0.01
    slo.pop("error_rate", None)
    return Constraints(slo=slo, max_error_rate=float(max_error))


def require_slo(constraints: Constraints, what: str) -> None:
    """Raise ScenarioError when the SLO has no upper bound: no capacity exists without one."""
    if not any(not metric.startswith("min_") for metric in constraints.slo):
        raise ScenarioError(
            f"{what} needs an SLO to hold, e.g. --slo p95_latency_s=2 (or slo: {{p95_latency_s: 2}} in the "
            "scenario): without a latency bound every rate the server keeps up with passes"
        )


def _slo_problem(error: ErrorDetails) -> str:
    key = ".".join(map(str, error["loc"]))
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown SLO key; expected one of {', '.join(Slo.model_fields)}"
    return f"{key}: {error['msg']}"


def parse_slo_options(items: list[str]) -> dict[str, float]:
    """`["p95_latency_s=2"]` -> {"p95_latency_s": 2.0}."""
    slo: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            slo[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ScenarioError(f"--slo {item!r}: expected metric=number (e.g. p95_latency_s=2)")
    return slo
