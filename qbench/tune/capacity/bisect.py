"""Capacity search, pure logic: the highest open-loop rate at which the SLO holds and the server keeps up, by
bracket, bisection and sustained confirmation (`sustain`). The rules: docs/design/sweeps-and-capacity.md."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from qbench.tune.values.ceiling import Capacity, Probe

COLLAPSED_SHARE = 0.5  # a run that was not steady and served under this share of its arrivals: collapsed


@dataclass(frozen=True)
class SearchPlan:
    """How hard to search: the stop rule and the probe budget."""

    tolerance: float = 0.05  # stop when failing / passing rate <= 1 + tolerance
    max_probes: int = 10  # open-loop probes at most (the estimate is not counted)
    step: float = 1.25  # first bracketing step (x or /), squared after each move the same way
    min_rate: float = 0.05
    max_rate: float = 10_000.0
    confirm: bool = False  # confirm the answer with a sustained run (or, without one, a repeat probe)
    confirm_tries: int = 4  # sustained rates at most (a fail steps down, or bisects once one held)


Measure = Callable[[float], Probe]


def measure_past_stall(measure: Measure, rate: float, probes: list[Probe]) -> Probe:
    """`measure(rate)`, a stopped (runaway) probe counted as failing; a failure on a stalled host is
    kept as kind "stalled" in `probes` and measured once more (a second stall counts)."""
    for attempt in range(2):
        result = measure(rate)
        result.passed = result.passed and not result.stopped
        if result.passed or not result.host_stall or attempt == 1:
            break
        result.kind = "stalled"
        probes.append(result)
    return result


@dataclass
class _Search:
    measure: Measure
    plan: SearchPlan
    probes: list[Probe] = field(default_factory=list)
    refine: Measure | None = None  # the bisection's probes (default: measure)

    def probe(self, rate: float, measure: Measure | None = None, kind: str = "rate") -> bool:
        result = measure_past_stall(measure or self.measure, rate, self.probes)
        result.kind = kind
        self.probes.append(result)
        return result.passed

    @property
    def budget_left(self) -> bool:
        return sum(p.kind == "rate" for p in self.probes) < self.plan.max_probes

    def bracket(self, rate: float) -> tuple[float | None, float | None]:
        """(passing, failing) neighbours found by stepping from `rate`; either is None at a limit."""
        return self.up(rate) if self.probe(rate) else self.down(rate)

    def up(self, rate: float) -> tuple[float | None, float | None]:
        step = self.plan.step
        while self.budget_left and rate < self.plan.max_rate:
            higher = min(rate * step, self.plan.max_rate)
            if not self.probe(higher):
                return rate, higher
            rate, step = higher, step * step
        return rate, None

    def down(self, rate: float) -> tuple[float | None, float | None]:
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
            if self.probe(mid, self.refine):
                lo = mid
            else:
                hi = mid
        return lo, hi


def sustain(capacity: Capacity, confirm: Measure, plan: SearchPlan, repeats: int = 1,
            restart: Callable[[Probe], bool] | None = None) -> Capacity:
    """Confirm `capacity.capacity_rps` by `repeats` sustained runs in a row (kind "confirm"), stepping down or
    bisecting on a fail, up to `plan.confirm_tries` rates; updates `capacity` in place. `restart(probe)`:
    restarts a server qbench started after a run that collapsed it (True when it did)."""
    rate, hi = capacity.capacity_rps, capacity.failing_rate_rps
    held: float | None = None
    failed = False  # a confirmation failed: only then is there a bracket of sustained runs to bisect
    for _ in range(plan.confirm_tries):
        if rate is None:
            break
        if _sustained(capacity, confirm, rate, repeats):
            held = rate
        else:
            hi, failed = rate, True
            last = capacity.probes[-1]
            if collapsed(last) and restart is not None and restart(last):
                pass  # the next step on a fresh start
            elif held is None and _mark_collapse(capacity, last):
                break  # the answer: the highest lower rate that passed a probe (or none)
        if held is not None and not failed:  # the answer held at once: never above it (a lowered one)
            break
        rate = _next_confirmation(capacity.probes[-1], held, hi, plan)
        if held is not None and rate is None:
            break
    if held is None and capacity.collapsed:  # the answer is the highest lower rate that passed a probe
        capacity.failing_rate_rps, capacity.confirmed = hi, False
        return capacity
    capacity.capacity_rps, capacity.failing_rate_rps = (held, hi) if held is not None else (rate, hi)
    capacity.confirmed = held is not None
    return capacity


def collapsed(failed: Probe) -> bool:
    """A run that was not steady and served under COLLAPSED_SHARE of its arrivals: a backlog, not drained."""
    return failed.steady is False and failed.throughput_rps < COLLAPSED_SHARE * failed.rate_rps


def _mark_collapse(capacity: Capacity, failed: Probe) -> bool:
    """True when a failed step-down confirmation collapsed the server (the answer: a lower rate)."""
    probes = [p for p in capacity.probes if p.kind == "rate" and p.passed]
    above = [p for p in probes if p.rate_rps > failed.rate_rps]
    below = [p for p in probes if p.rate_rps < failed.rate_rps]
    if not above or not collapsed(failed):
        return False
    served = max(above, key=lambda p: p.throughput_rps)
    answer = max(below, key=lambda p: p.rate_rps).rate_rps if below else None
    capacity.capacity_rps = answer
    capacity.collapsed = collapse_text(served, failed, answer, "its sustained confirmations")
    return True


def collapse_text(before: Probe, failed: Probe, answer: float | None, what: str,
                  check_at: str = "at that rate") -> str:
    """The collapse in words: at `failed` it served far less than at `before`, after `what` ran."""
    p95 = f", p95 {before.p95_latency_s:.3g} s" if before.p95_latency_s is not None else ""
    held = (f"{answer:.3g} req/s is the highest rate that held a probe before it collapsed; " if answer
            is not None else "")
    return (f"after {what} it no longer kept up: at {failed.rate_rps:.3g} req/s it served "
            f"{failed.throughput_rps:.3g} ok/s ({failed.why}), where at {before.rate_rps:.3g} req/s it had "
            f"served {before.throughput_rps:.3g} ok/s steadily{p95}: the server collapsed, a backlog it does "
            "not drain (a metastable server: one burst past its capacity and it does not come back), not "
            "one aged by use. Every later run would measure the collapsed server, so none was made: "
            f"{held}restart it, cap its queue (Gradio's max_size, or the server's own queue limit, so a "
            f"burst is turned away) and check with `qbench run` {check_at}, or run `qbench capacity` again "
            "on the restarted server")


def _sustained(capacity: Capacity, confirm: Measure, rate: float, repeats: int) -> bool:
    """`repeats` sustained runs in a row at `rate` (kind "confirm", appended), stopping at a fail."""
    for _ in range(max(repeats, 1)):
        probe = measure_past_stall(confirm, rate, capacity.probes)
        probe.kind = "confirm"
        capacity.probes.append(probe)
        if not probe.passed:
            return False
    return True


def _next_confirmation(last: Probe, held: float | None, hi: float | None, plan: SearchPlan
                       ) -> float | None:
    """The next rate to confirm: the middle of [held, hi] while wider than the tolerance (None: it is
    not, done), else (nothing held yet) the step down from the failing rate `hi`."""
    if held is not None:
        return math.sqrt(held * hi) if hi is not None and hi / held > 1 + plan.tolerance else None
    assert hi is not None
    rate = hi / (1 + plan.tolerance)
    # completions/s: what it sustained; not of a run that `collapsed` (a backlog, not the capacity)
    if last.steady is False and last.throughput_rps > 0 and not collapsed(last):
        rate = min(rate, last.throughput_rps * (1 - plan.tolerance / 4))
    return rate if rate >= plan.min_rate else None


def search_capacity(measure: Measure, first_rate: float, plan: SearchPlan | None = None,
                    estimate: Probe | None = None, *, refine: Measure | None = None,
                    confirm: Measure | None = None) -> Capacity:
    """Bracket, bisect and (with `plan.confirm`) confirm from `first_rate`: `measure` runs a probe,
    `refine` a bisection one, `confirm` a sustained run (default: `measure`); `estimate` is kept first."""
    plan = plan or SearchPlan()
    search = _Search(measure, plan, [estimate] if estimate else [], refine)
    lo, hi = search.bracket(min(max(first_rate, plan.min_rate), plan.max_rate))
    if lo is not None and hi is not None:
        lo, hi = search.bisect(lo, hi)
    capacity = Capacity(lo, hi, plan.tolerance, _converged(lo, hi, plan), False, search.probes)
    if plan.confirm and lo is not None:
        sustain(capacity, confirm or measure, plan)
    return capacity


def _converged(lo: float | None, hi: float | None, plan: SearchPlan) -> bool:
    """The bracket is within the tolerance, or the search ended at one of its limits."""
    if lo is not None and hi is not None:
        return hi / lo <= 1 + plan.tolerance
    if hi is None:
        return lo is not None and lo >= plan.max_rate
    return hi <= plan.min_rate
