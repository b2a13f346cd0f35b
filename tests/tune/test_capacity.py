"""Capacity search logic against fake servers whose capacity is known (no network): bracketing,
bisection to the tolerance, runaways counted as failing, the limits, confirmation, Little's law."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from qbench.tune.capacity import Capacity, Probe, SearchPlan, search_capacity


def server(capacity: float, *, runaway_above: float | None = None, mean_latency_s: float = 0.1
           ) -> Callable[[float], Probe]:
    """A fake measure function: the SLO holds up to `capacity`; past `runaway_above` the probe is
    stopped as a runaway (its partial figures pass, as a stopped probe's may)."""

    def measure(rate: float) -> Probe:
        if runaway_above is not None and rate > runaway_above:
            return Probe(rate, passed=True, stopped="queue ran away")
        return Probe(rate, passed=rate <= capacity, throughput_rps=min(rate, capacity),
                     mean_latency_s=mean_latency_s)

    return measure


CASES = [
    # capacity, first guess, tolerance: a good guess, guesses far above and below, coarse and fine
    (40.0, 40.0, 0.05),
    (40.0, 43.0, 0.05),
    (40.0, 400.0, 0.05),
    (40.0, 1.0, 0.05),
    (7.3, 2.0, 0.02),
    (0.5, 4.0, 0.1),
    (123.0, 120.0, 0.01),
]


@pytest.mark.parametrize(("capacity", "first", "tolerance"), CASES)
def test_the_bracket_holds_the_true_capacity_within_the_tolerance(
    capacity: float, first: float, tolerance: float
) -> None:
    found = search_capacity(server(capacity), first, SearchPlan(tolerance=tolerance, max_probes=30))
    assert found.capacity_rps is not None and found.failing_rate_rps is not None
    assert found.capacity_rps <= capacity < found.failing_rate_rps
    assert found.failing_rate_rps / found.capacity_rps <= 1 + tolerance
    assert found.converged and found.tolerance == tolerance
    assert all(p.passed == (p.rate_rps <= capacity) for p in found.probes)


def test_a_good_first_guess_is_cheap() -> None:
    # The usual case: the estimate is the saturated throughput, a little above the SLO capacity.
    found = search_capacity(server(36.0), 40.0, SearchPlan(tolerance=0.05))
    assert len(found.probes) <= 5


def test_runaway_probes_count_as_failing() -> None:
    plan = SearchPlan(tolerance=0.05, max_probes=30)
    found = search_capacity(server(1000.0, runaway_above=50.0), 10.0, plan)
    assert found.capacity_rps is not None and found.failing_rate_rps is not None
    assert found.capacity_rps <= 50.0 < found.failing_rate_rps
    runaways = [p for p in found.probes if p.stopped]
    assert runaways and all(not p.passed and p.verdict == "runaway" for p in runaways)


def test_a_target_that_fails_even_the_lowest_rate_has_no_capacity() -> None:
    plan = SearchPlan(min_rate=0.1, max_probes=30)
    found = search_capacity(server(0.01), 20.0, plan)
    assert found.capacity_rps is None and found.failing_rate_rps == pytest.approx(0.1)
    assert found.converged  # it reached the floor: nothing lower to try
    assert found.users(10.0) is None


def test_a_target_that_passes_the_highest_rate_has_no_failing_rate() -> None:
    plan = SearchPlan(max_rate=200.0, max_probes=30)
    found = search_capacity(server(1e9), 5.0, plan)
    assert found.capacity_rps == pytest.approx(200.0) and found.failing_rate_rps is None
    assert found.converged


def test_the_probe_budget_can_run_out_before_convergence() -> None:
    found = search_capacity(server(1e9), 1.0, SearchPlan(max_probes=3))
    assert len(found.probes) == 3 and found.failing_rate_rps is None and not found.converged


def test_the_estimate_is_kept_first_and_not_counted_in_the_budget() -> None:
    estimate = Probe(42.0, passed=True, kind="estimate", users=32)
    found = search_capacity(server(40.0), 42.0, SearchPlan(max_probes=4), estimate)
    assert found.probes[0] is estimate and sum(p.kind == "rate" for p in found.probes) == 4
    assert estimate.verdict == "estimate"


def test_confirmation_repeats_the_answer_and_a_lucky_pass_moves_the_bracket_down() -> None:
    passes: dict[float, int] = {}

    def flaky(rate: float) -> Probe:
        """True capacity 30; passes once by luck between 30 and 36 (noise near the knee)."""
        passes[rate] = passes.get(rate, 0) + 1
        lucky = 30 < rate <= 36 and passes[rate] == 1
        return Probe(rate, passed=rate <= 30 or lucky)

    found = search_capacity(flaky, 40.0, SearchPlan(tolerance=0.05, max_probes=30, confirm=True))
    assert found.confirmed and found.converged
    assert found.capacity_rps is not None and found.capacity_rps <= 30 < (found.failing_rate_rps or 0)
    repeated = [p.rate_rps for p in found.probes if [q.rate_rps for q in found.probes].count(p.rate_rps) > 1]
    assert repeated  # the boundary was measured twice


def test_equivalent_users_by_littles_law_and_the_dict_round_trip() -> None:
    found = search_capacity(server(40.0, mean_latency_s=0.2), 40.0, SearchPlan(tolerance=0.05))
    assert found.capacity_rps is not None
    assert found.users(10.0) == pytest.approx(found.capacity_rps * 10.2)
    again = Capacity.from_dict(found.to_dict())
    assert again == found and found.to_dict()["probes"][0]["verdict"] in ("pass", "fail")
