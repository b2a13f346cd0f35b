"""qbench.tune.capacity.probe: what a probe changes in the scenario."""

from __future__ import annotations

from qbench.run.scenario.schema import parse_scenario, with_overrides
from qbench.tune.capacity.probe import ProbeLength, seed_overrides


def test_a_repeated_confirmation_draws_other_poisson_arrivals() -> None:
    """seed_overrides moves Scenario.seed (the arrivals' and payloads' seed), wherever it lives."""
    plain = parse_scenario({"name": "s", "protocol": "http", "endpoint": {"path": "/x"},
                            "payload": {"seed": 3, "inputs": [{"text": {"words": [2, 3]}}]},
                            "load": {"rate": 5, "duration": 1}}, source="test")
    assert seed_overrides(plain, 2) == {"payload.seed": 5}
    assert with_overrides(plain, seed_overrides(plain, 2)).seed == 5


def test_a_bisection_probe_lasts_what_its_tightest_need_says_within_its_bounds() -> None:
    """At 1000 req/s an overload of 10% shows in well under a second and a p95 needs 0.1 s: the SLO's
    5 x 1 s wait sets 5 s. At 10 req/s the overload needs minutes: capped at --max-duration, and the
    answer says the confirmation catches what a capped probe may miss. Without a latency bound the
    floor is the bracket's length."""
    length = ProbeLength(tolerance=0.1, floor_s=2.0, cap_s=30.0, bound_s=1.0)
    assert length.seconds(1000) == 5.0 and "5 x the SLO's 1 s bound" in length.why(1000)
    assert "capped" not in length.why(1000)
    assert length.seconds(10) == 30.0
    assert "capped at --max-duration 30 s" in length.why(10) and length.to_dict(10)["seconds"] == 30.0
    assert ProbeLength(0.1, 2.0, 30.0, None).seconds(1000) == 2.0
