"""Capacity search logic against fake servers whose capacity is known (no network): bracketing,
bisection to the tolerance, runaways counted as failing, the limits, confirmation, Little's law."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from qbench.tune.capacity.bisect import SearchPlan, search_capacity, sustain
from qbench.tune.values.ceiling import Capacity, Probe, held_sentence


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


def test_a_lucky_short_pass_is_caught_by_the_sustained_confirmation_which_steps_down() -> None:
    """Short probes pass by luck up to 36 (a slow overload does not show in them); the sustained run
    knows the truth, 30. The answer is a rate that held the sustained run, at most 30."""

    def short(rate: float) -> Probe:
        return Probe(rate, passed=rate <= 36)

    sustained: list[float] = []

    def confirm(rate: float) -> Probe:
        sustained.append(rate)
        steady = rate <= 30
        return Probe(rate, passed=steady, steady=steady, throughput_rps=min(rate, 30.0))

    found = search_capacity(short, 40.0, SearchPlan(tolerance=0.05, max_probes=30, confirm=True),
                            confirm=confirm)
    assert found.confirmed and found.converged
    assert found.capacity_rps is not None and 30 * 0.9 <= found.capacity_rps <= 30
    assert found.confirmation is not None and found.confirmation.rate_rps == found.capacity_rps
    # down to just under what the failed run completed (30), then bisecting up towards the failing rate
    assert sustained[1] == pytest.approx(30 * (1 - 0.05 / 4)) and len(sustained) == 4
    assert sustained[2] == pytest.approx((sustained[0] * sustained[1]) ** 0.5)
    assert found.failing_rate_rps == sustained[3] and found.capacity_rps == sustained[1]
    assert found.failing_rate_rps / found.capacity_rps <= 1.05
    assert [p.kind for p in found.probes].count("confirm") == 4
    assert found.first_failing is not None and found.first_failing.kind == "confirm"


def test_one_confirmation_that_under_reads_the_ceiling_costs_a_bisection_step_not_the_step_down() -> None:
    """A batched server whose ceiling is 61.5 req/s: the first confirmation at 60.1 fails on a slow
    minute and its completions/s under-read the ceiling (51.3); the next run, just under that, holds;
    the answer then bisects back up towards 60.1 instead of staying 15% low (a fresh clone's CI run)."""
    slow_minute = [True]

    def confirm(rate: float) -> Probe:
        if slow_minute.pop() if slow_minute else False:
            return Probe(rate, passed=False, steady=False, throughput_rps=51.3)
        held = rate <= 61.5 * 0.97
        return Probe(rate, passed=held, steady=held, throughput_rps=min(rate, 61.5))

    capacity = Capacity(60.1, 63.6, 0.05, True, False, [])
    sustain(capacity, confirm, SearchPlan(tolerance=0.05))
    rates = [p.rate_rps for p in capacity.probes]
    assert rates[1] == pytest.approx(51.3 * (1 - 0.05 / 4))
    assert capacity.confirmed and capacity.capacity_rps is not None and capacity.capacity_rps >= 57
    assert capacity.failing_rate_rps == 60.1 and len(rates) == 4
    assert [p.passed for p in capacity.probes] == [False, True, True, True]
    lines = held_sentence(capacity, "")
    assert lines[0] == "held" and "failed at 60.1 req/s" in lines[1]


def test_a_metastable_answer_must_hold_every_repeat_and_one_failed_repeat_steps_down() -> None:
    """Two sustained runs in a row per rate: at 24 the first draw holds and the second tips over (a
    metastable server); the answer steps down to 24 / 1.1 and holds both there."""
    draws: dict[float, int] = {}

    def confirm(rate: float) -> Probe:
        draws[rate] = draws.get(rate, 0) + 1
        held = rate < 23 or draws[rate] == 1
        return Probe(rate, passed=held, steady=held, throughput_rps=rate if held else 23.0)

    capacity = Capacity(24.0, 26.0, 0.1, True, False, [])
    sustain(capacity, confirm, SearchPlan(tolerance=0.1), repeats=2)
    assert capacity.confirmed and capacity.capacity_rps == pytest.approx(24 / 1.1)
    assert list(draws.values()) == [2, 2] and capacity.failing_rate_rps == 24.0
    assert [p.passed for p in capacity.probes] == [True, False, True, True]
    lines = held_sentence(capacity, "")
    assert lines[0] == "held" and "each of 2" in lines[1] and "failed at 24 req/s" in lines[1]


def test_a_confirmation_that_leaves_the_server_collapsed_stops_stepping_down() -> None:
    """The issue's metastable server: its 60 s confirmation at 15.2 req/s tipped it over (2.9 ok/s), the
    step down went to just under those 2.9 ok/s, and each step measured the collapsed server (0 ok/s at
    12, 10.9, 9.9) until '9.01 req/s is the next step down'. Now the step is the tolerance's (a collapsed
    run's completions are a backlog, not the capacity), and a step down under a rate that passed, served
    under half its arrivals, stops the steps: the answer is the highest rate under it that passed a
    probe, unconfirmed, and the collapse is said."""
    tried: list[float] = []

    def confirm(rate: float) -> Probe:
        tried.append(rate)
        return Probe(rate, passed=False, steady=False, throughput_rps=2.9 if len(tried) == 1 else 0.0,
                     violations=["not steady, backlog +2.3/s ± 0.7"])

    probes = [Probe(8.7, True, steady=True, throughput_rps=9.5, p95_latency_s=0.105),
              Probe(13.6, True, steady=True, throughput_rps=13.7, p95_latency_s=0.25),
              Probe(15.2, True, steady=True, throughput_rps=15.3, p95_latency_s=0.3),
              Probe(16.1, False, steady=False, throughput_rps=14.1)]
    capacity = Capacity(15.2, 16.1, 0.1, True, False, list(probes))
    sustain(capacity, confirm, SearchPlan(tolerance=0.1, confirm_tries=4))
    assert tried == [15.2, pytest.approx(15.2 / 1.1)] and not capacity.confirmed
    assert capacity.capacity_rps == 13.6 and capacity.failing_rate_rps == pytest.approx(15.2 / 1.1)
    assert capacity.collapsed.startswith("after its sustained confirmations it no longer kept up: at 13.8 "
                                         "req/s it served 0 ok/s (not steady, backlog +2.3/s")
    assert "where at 15.2 req/s it had served 15.3 ok/s steadily, p95 0.3 s" in capacity.collapsed
    # a Gradio app whose throughput falls past its capacity drains and serves the next step: no collapse
    gradio = Capacity(15.2, 16.1, 0.1, True, False, list(probes))
    sustain(gradio, lambda rate: Probe(rate, passed=rate < 14, steady=rate < 14,
                                       throughput_rps=rate if rate < 14 else 0.4 * rate),
            SearchPlan(tolerance=0.1, confirm_tries=3))
    assert not gradio.collapsed and gradio.confirmed and gradio.capacity_rps == pytest.approx(15.2 / 1.1)


def test_a_server_qbench_started_is_restarted_after_each_collapse_and_the_steps_go_on() -> None:
    """Ray Serve as measured (docs/rayserve.md): a fresh server holds 100 req/s for a minute, but 115 and
    more collapse it (13 ok/s) and it stays collapsed. Where qbench started the app it restarts it after
    each collapsed confirmation, so the next step measures a fresh start: the steps go on down to a rate
    that holds, confirmed, where without the restart they stop at the collapse, unconfirmed."""
    state = {"collapsed": False, "restarts": 0}

    def confirm(rate: float) -> Probe:
        if state["collapsed"] or rate > 105:
            state["collapsed"] = True
            return Probe(rate, passed=False, steady=False, throughput_rps=13.0,
                         violations=["not steady, backlog +90/s ± 9"])
        return Probe(rate, passed=True, steady=True, throughput_rps=rate, p95_latency_s=0.24)

    def restart(failed: Probe) -> bool:
        assert state["collapsed"] and failed.throughput_rps == 13.0
        state["collapsed"] = False
        state["restarts"] += 1
        return True

    probes = [Probe(82.0, True, steady=True, throughput_rps=82.0), Probe(115.0, True, steady=True,
                                                                         throughput_rps=112.0),
              Probe(136.0, True, steady=True, throughput_rps=132.0), Probe(144.0, False, steady=False,
                                                                           throughput_rps=120.0)]
    plan = SearchPlan(tolerance=0.1, confirm_tries=4)
    fresh = sustain(Capacity(136.0, 144.0, 0.1, True, False, list(probes)), confirm, plan, restart=restart)
    tried = [p.rate_rps for p in fresh.probes if p.kind == "confirm"]
    assert tried == pytest.approx([136.0, 136 / 1.1, 136 / 1.1 ** 2, 136 / 1.1 ** 3])  # 136, 124, 112, 102
    assert state["restarts"] == 3 and not fresh.collapsed  # after each of the three that collapsed it
    assert fresh.confirmed and fresh.capacity_rps == pytest.approx(136 / 1.1 ** 3)  # under 105: it holds
    assert fresh.failing_rate_rps == pytest.approx(136 / 1.1 ** 2)
    state.update(collapsed=False, restarts=0)
    kept = sustain(Capacity(136.0, 144.0, 0.1, True, False, list(probes)), confirm, plan)  # not qbench's
    assert state["restarts"] == 0 and not kept.confirmed and kept.collapsed
    assert kept.capacity_rps == 115.0  # the highest rate under the collapse that passed a probe


def test_an_answer_that_holds_at_once_is_never_bisected_above() -> None:
    """A metastable answer lowered on purpose (28.8 against a search's failing 65.4): its first sustained
    run holds, and that is the answer; a short run above it may pass, but a burst would tip it."""
    tried: list[float] = []

    def confirm(rate: float) -> Probe:
        tried.append(rate)
        return Probe(rate, passed=True, steady=True, throughput_rps=rate)

    capacity = Capacity(28.8, 65.4, 0.1, True, False, [])
    sustain(capacity, confirm, SearchPlan(tolerance=0.1), repeats=2)
    assert tried == [28.8, 28.8] and capacity.confirmed and capacity.capacity_rps == 28.8


def test_a_confirmation_that_never_holds_is_not_confirmed() -> None:
    found = search_capacity(server(40.0), 40.0, SearchPlan(tolerance=0.1, confirm=True, confirm_tries=3),
                            confirm=lambda rate: Probe(rate, passed=False, violations=["p95 too high"]))
    assert not found.confirmed and found.confirmation is None
    assert [p.kind for p in found.probes].count("confirm") == 3
    assert found.capacity_rps is not None and found.capacity_rps < 40 / 1.1**3 + 1e-9


def test_the_bisection_uses_the_refining_probes() -> None:
    kinds: list[str] = []

    def refine(rate: float) -> Probe:
        kinds.append("refine")
        return server(40.0)(rate)

    found = search_capacity(server(40.0), 10.0, SearchPlan(tolerance=0.05), refine=refine)
    assert kinds and found.converged and found.capacity_rps is not None and found.capacity_rps <= 40


def test_an_old_capacity_file_still_loads() -> None:
    old = {"capacity_rps": 46.8, "failing_rate_rps": 49.0, "tolerance": 0.05, "converged": True,
           "confirmed": True, "probes": [{"rate_rps": 46.8, "passed": True, "kind": "rate",
                                          "verdict": "pass", "p95_latency_s": 0.8}]}
    found = Capacity.from_dict(old)
    assert found.capacity_rps == 46.8 and found.overload is None
    assert found.probes[0].steady is None and found.at_capacity is found.probes[0]


def test_equivalent_users_by_littles_law_and_the_dict_round_trip() -> None:
    found = search_capacity(server(40.0, mean_latency_s=0.2), 40.0, SearchPlan(tolerance=0.05))
    assert found.capacity_rps is not None
    assert found.users(10.0) == pytest.approx(found.capacity_rps * 10.2)
    again = Capacity.from_dict(found.to_dict())
    assert again == found and found.to_dict()["probes"][0]["verdict"] in ("pass", "fail")


def stalling(capacity: float, stalls: set[float]) -> tuple[Callable[[float], Probe], list[float]]:
    """A fake server of `capacity` on a host that stalls the first time each rate in `stalls` is probed:
    that probe fails with its load generator lagging (`host_stall`), as on a shared machine."""
    seen: list[float] = []

    def measure(rate: float) -> Probe:
        first = rate not in seen
        seen.append(rate)
        if first and any(abs(rate - s) < 1e-9 for s in stalls):
            return Probe(rate, passed=False, violations=["p95_latency_s 2.1 > 0.3"],
                         host_stall="the load generator stalled (p99 lag 0.8 s >= 0.15 s)")
        return server(capacity)(rate)

    return measure, seen


def test_a_failure_while_the_host_stalled_is_measured_again_and_does_not_move_the_bracket() -> None:
    measure, seen = stalling(40.0, {30.0})
    found = search_capacity(measure, 30.0, SearchPlan(tolerance=0.05, max_probes=30))
    assert seen[:2] == [30.0, 30.0]  # measured again at once
    assert found.probes[0].kind == "stalled" and found.probes[0].verdict == "stalled"
    assert "stalled" in found.probes[0].why and "p95_latency_s" in found.probes[0].why
    assert found.capacity_rps is not None and 40 / 1.05 <= found.capacity_rps <= 40  # as with no stall
    assert sum(p.kind == "rate" for p in found.probes) == len(seen) - 1  # the stall is not in the budget


def test_a_second_stall_at_one_rate_counts_and_a_stalled_confirmation_is_run_again() -> None:
    found = search_capacity(lambda rate: Probe(rate, passed=False, host_stall="stalled"), 50.0,
                            SearchPlan(tolerance=0.1, max_probes=2))
    assert [p.kind for p in found.probes] == ["stalled", "rate", "stalled", "rate"]
    assert found.capacity_rps is None and found.probes[-1].verdict == "fail"
    measure, seen = stalling(40.0, {36.0})  # the confirmation at 36 stalls once, then holds
    found = search_capacity(server(40.0), 36.0, SearchPlan(tolerance=0.05, max_probes=1, confirm=True),
                            confirm=measure)
    assert seen == [36.0, 36.0] and found.confirmed and found.capacity_rps == 36.0
    assert [p.kind for p in found.probes][-2:] == ["stalled", "confirm"]


def test_a_probe_whose_generator_waited_for_a_core_makes_the_answer_say_the_host_was_busy() -> None:
    """The bracket's and the confirmation's waits count (the estimate's and the run past it do not):
    10% or more of a probe waiting for a core is a busy host, and the answer says what that means."""
    from qbench.tune.capacity.answer import describe
    from qbench.tune.values.ceiling import HOST_BUSY
    from qbench.tune.values.constraints import Constraints

    probes = [Probe(20.0, True, kind="estimate", host_wait=0.9), Probe(20.0, True, host_wait=0.02),
              Probe(25.0, False, host_wait=0.05), Probe(20.0, True, kind="confirm", host_wait=0.04),
              Probe(26.0, False, kind="overload", host_wait=0.8)]
    quiet = Capacity(20.0, 25.0, 0.1, True, True, probes)
    assert quiet.host_busy is None
    assert "host" not in dict(describe(quiet, Constraints(slo={"p95_latency_s": 1.0}), 10.0))
    probes[3].host_wait = HOST_BUSY + 0.2
    busy = Capacity(20.0, 25.0, 0.1, True, True, probes)
    assert busy.host_busy == pytest.approx(0.3)
    line = dict(describe(busy, Constraints(slo={"p95_latency_s": 1.0}), 10.0))["host"]
    assert line.startswith("busy: qbench's load generator waited for a core 30% of a probe"), line
    assert "measure on a quiet host" in line
    assert Probe.from_dict(probes[3].to_dict()).host_wait == pytest.approx(0.3)  # kept in capacity.json


def test_an_app_restarted_after_a_collapse_is_said_in_the_answer_and_kept() -> None:
    from qbench.tune.capacity.answer import describe
    from qbench.tune.values.constraints import Constraints

    probes = [Probe(102.0, True, kind="confirm", steady=True, throughput_rps=101.0, p95_latency_s=0.24)]
    capacity = Capacity(102.0, 112.0, 0.1, True, True, probes,
                        restarts=["after the confirm run (at 112 req/s it served 13 ok/s)"])
    said = dict(describe(capacity, Constraints(slo={"p95_latency_s": 0.5}), 10.0))
    assert said["capacity"].endswith("on a fresh start: a run past it left the app collapsed until qbench "
                                     "restarted it (restarted, below)")
    assert said["restarted"].startswith("qbench's runs left the app collapsed 1 time (a metastable server")
    assert said["restarted"].endswith(
        "on a fresh start: after the confirm run (at 112 req/s it served 13 ok/s)")
    assert Capacity.from_dict(capacity.to_dict()).restarts == capacity.restarts  # kept in capacity.json
