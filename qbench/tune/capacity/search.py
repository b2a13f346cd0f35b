"""Capacity: the highest open-loop arrival rate at which the SLO still holds, found by bracketing and
bisection on the rate (pure search logic; the probes against a server are
`qbench.tune.capacity.prober`'s).

    first guess r0 (a closed-loop estimate of the completions/s, or a sweep point's throughput)
    bracket:  probe r0; while every probe passed, go up by `step`; while every probe failed, go down;
              the step grows (1.25, 1.56, 2.44, 5.96: squared after each move the same way), so a poor
              guess costs a few probes, a good one (the usual case) one or two
    bisect:   probe sqrt(lo x hi) until hi / lo <= 1 + tolerance (with `refine`: longer probes, long
              enough that an overload the size of the tolerance shows; see capacity.probe)
    confirm:  one sustained run at lo (`confirm`, e.g. 60 s); a pass makes lo the answer, a fail (SLO or
              steady state) makes lo the failing rate and steps down by the tolerance (or to just under
              the completions/s the failed run measured, when lower), and confirms again; once a rate
              held, a fail or a still-wide bracket bisects between the rate that held and the failing
              one, up to `confirm_tries` runs in all

A probe passes only when the SLO held *and* the server kept up (steady state: qbench.run.results.steady); one
stopped because its backlog grew counts as failing, whatever its partial figures say. A failed probe
during which the load generator itself stalled (`Probe.host_stall`: the machine, not only the server,
was slow) is kept as kind "stalled" and measured once more (`measure_past_stall`).
The answer is the bracket [last passing, first failing]: `capacity_rps` is the last passing rate, so the
true capacity lies in [capacity_rps, failing_rate_rps) up to measurement noise; `converged` says whether
that bracket is within the tolerance (the probe budget can run out first). A target that fails even at
`min_rate` has no capacity (None); one that passes `max_rate` has no failing rate (None).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from qbench.tune.values.capacity import Capacity, Probe

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
    """`measure(rate)`, a runaway counted as failing whatever its partial figures say; a failed probe
    whose load generator stalled (`host_stall`: the host, not only the server, was slow) is kept in
    `probes` as kind "stalled" and the rate measured once more, so one stall of a shared machine does
    not move the bracket. A second stall counts: it is the answer."""
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
            if self.probe(mid, self.refine):
                lo = mid
            else:
                hi = mid
        return lo, hi


def sustain(capacity: Capacity, confirm: Measure, plan: SearchPlan, repeats: int = 1,
            restart: Callable[[Probe], bool] | None = None) -> Capacity:
    """Confirm `capacity.capacity_rps` with `repeats` sustained runs in a row (`confirm(rate)`, each its
    own Poisson seed where the caller varies it: a metastable server must hold more than one draw of
    bursts), up to `plan.confirm_tries` rates in all. An answer that holds at once is the answer (never
    bisected above: a metastable answer is lowered on purpose). A fail (SLO or steady state) makes that
    rate the failing one; the next is the geometric middle of [last rate that held, failing rate] when
    one held, else a step down by the tolerance (or to just under the completions/s the failed run
    measured, when lower); a pass after a fail, the bracket still wider than the tolerance, bisects up.
    So one failed run (a shared machine's slow minute, a stopped run whose completions/s under-read the
    ceiling) costs a step of the bracket, not the whole step down. The answer is the highest rate that
    held (`confirmed`), else the next step down, unconfirmed. The runs are appended to
    `capacity.probes` (kind "confirm"); the answer, its failing rate and `confirmed` are updated in
    place. The one confirmation rule of `qbench capacity` (`search_capacity`) and of sweeps
    (qbench.tune.sweep.confirm). `restart(probe)`: a server qbench started, restarted after a confirmation
    that `collapsed` it (True when it was): the next step then runs on a fresh start, and a rate that
    collapsed a fresh server is that rate's own failure, not the runs' before it."""
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
    """A run that was not steady and served under COLLAPSED_SHARE of its arrival rate: stuck behind a
    backlog it does not drain (an overloaded server that keeps up serves about its capacity; an aged one
    most of it)."""
    return failed.steady is False and failed.throughput_rps < COLLAPSED_SHARE * failed.rate_rps


def _mark_collapse(capacity: Capacity, failed: Probe) -> bool:
    """A failed confirmation at a rate under one the server had kept up with (a step down), that
    `collapsed`: qbench's runs left the server collapsed (metastable), and every further step would
    measure that, so none runs. The answer becomes the highest rate under it that passed a probe,
    unconfirmed, and `capacity.collapsed` says why. (A first confirmation at the search's answer that
    fails so is an ordinary fail: a Gradio app whose throughput fell past its capacity drains and serves
    the next step.)"""
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
    """The server no longer kept up after `what` ran: at `failed.rate_rps` it served far less than it had
    at `before` (or, for the recheck, than at the same rate): collapsed, not aged by use. `check_at`: the
    rate to check on the restarted server (the recheck's: the capacity line's, which a metastable
    finding may lower after it)."""
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
    """Bracket, bisect and (with `plan.confirm`) confirm the highest rate whose probe passes; see the
    module docstring. `measure(rate)` runs one probe, `refine(rate)` one of the bisection (default:
    measure), `confirm(rate)` the sustained run (default: measure again); `estimate` (the probe that gave
    `first_rate`) is kept first in the list of probes."""
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
