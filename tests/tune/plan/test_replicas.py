"""`qbench plan` (qbench.tune.plan.replicas): the arithmetic on known numbers, the command's output and
plan.json, the
errors. Reading the capacity folder (qbench.tune.plan.command) is tested in test_plan_run.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.tune.plan.replicas import HOURS_PER_MONTH, Replica, make_plan, traffic
from qbench.tune.values.ceiling import Capacity

from .test_command import capacity_folder

ONE = Replica(capacity_rps=50.0, mean_latency_s=0.2, p95_latency_s=0.4, slo="p95_latency_s <= 0.5",
               source="capacity.json", generator_cpu_per_request_s=0.002)


@pytest.mark.parametrize(("peak", "rate", "replicas"), [
    # closed-loop users: X = users / (think + latency) = 2000 / 20.2
    (traffic(2000, 20.0, None, None), 2000 / 20.2, 3),  # 99.0 x 1.3 / 50 = 2.57 -> 3
    # a journey of 3 requests per message: X = 2000 x 3 / (20 + 3 x 0.2)
    (traffic(2000, 20.0, None, None, 3), 6000 / 20.6, 8),  # 291 x 1.3 / 50 = 7.57 -> 8
    # messages per minute: X = 600 x 2 / 60 = 20 req/s
    (traffic(600, None, 2.0, None), 20.0, 1),
    # a rate given: 100 x 1.3 / 50 = 2.6 -> 3; exactly 2 replicas' worth stays 2 (no float round-up)
    (traffic(None, None, None, 100.0), 100.0, 3),
    (traffic(None, None, None, 1000 / 13), 1000 / 13, 2),
])
def test_the_arithmetic_on_known_numbers(peak: object, rate: float, replicas: int) -> None:
    plan = make_plan(ONE, peak, 0.3)  # type: ignore[arg-type]
    assert plan.rate_rps == pytest.approx(rate)
    assert plan.replicas == replicas
    assert plan.utilization == pytest.approx(rate / (replicas * 50.0))
    assert plan.fleet_capacity_rps == replicas * 50.0


def test_users_per_replica_cost_and_generator() -> None:
    plan = make_plan(ONE, traffic(2000, 20.0, None, None), 0.3, price_per_hour=2.5)
    # Little's law keeping the headroom: 50 / 1.3 req/s x 20.2 s per message; at capacity 50 x 20.2
    assert plan.users_per_replica == pytest.approx(50 / 1.3 * 20.2)
    assert plan.users_per_replica_at_capacity == pytest.approx(1010.0)
    assert plan.users_per_replica_at_peak == pytest.approx(2000 / 3)
    assert plan.cost_per_hour == 7.5 and plan.cost_per_month == pytest.approx(7.5 * HOURS_PER_MONTH)
    assert plan.cost_per_1k_requests == pytest.approx(7.5 / (2000 / 20.2 * 3600) * 1000)
    # one process: 0.7 / 2 ms = 350 req/s against a fleet run of 3 x 50 x 1.3 = 195 req/s
    assert plan.generator_rps == pytest.approx(350.0) and plan.generator_processes == 1
    big = make_plan(ONE, traffic(None, None, None, 1000.0), 0.3)
    assert big.replicas == 26 and big.generator_processes == 5  # 26 x 50 x 1.3 = 1690 / 350 -> 5
    words = dict(big.lines)
    assert "load.processes=5" in words["generator"] and "ceil(" in words["replicas"]
    assert "Little's law" in dict(plan.lines)["users per replica"] and "per 1,000" in dict(plan.lines)["cost"]


@pytest.mark.parametrize(("args", "fragment"), [
    ((None, None, None, None), "no traffic"),
    ((10, 5.0, 2.0, None), "exactly one of"),
    ((10, None, None, None), "exactly one of"),
    ((10, 5.0, None, 3.0), "--rate is the whole peak"),
    ((0, 5.0, None, None), "--users 0"),
    ((10, -1.0, None, None), "--think-time -1.0"),
])
def test_bad_traffic_names_the_option(args: tuple[int | None, float | None, float | None, float | None],
                                      fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        traffic(*args)


def test_the_command_prints_the_plan_and_writes_plan_json(tmp_path: Path) -> None:
    folder = capacity_folder(tmp_path)
    out = CliRunner().invoke(app, ["plan", str(folder), "--users", "1000", "--think-time", "30",
                                   "--price", "2.5"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    # 1000 / 30.25 = 33.1 req/s x 1.3 / 40 = 1.07 -> 2 replicas
    assert "replicas: 2 = ceil(33.1 req/s x (1 + 30% headroom) / 40 req/s per replica)" in text
    assert "concurrency_limit=4" in text and "one process is enough" in text
    assert "fleet: 2 x 40 = 80 req/s" in text and "constant arrivals" in text  # the scenario says constant
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["kind"] == "plan" and plan["replicas"] == 2 and plan["cost_per_hour"] == 5.0
    assert plan["measured"]["capacity_rps"] == 40.0 and plan["lines"][0][0] == "one replica"
    report = CliRunner().invoke(app, ["report", str(folder)])  # the capacity report shows the plan
    assert report.exit_code == 0, report.output
    summary = (folder / "summary.md").read_text()
    assert "**plan: replicas**: 2 = ceil(" in summary and "with (the reference server's /status" in summary
    assert "plan: cost" in (folder / "report.html").read_text()


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda root: root, "no capacity.json"),
    (lambda root: capacity_folder(root, capacity=None), "found no rate meeting the SLO"),
])
def test_a_folder_without_a_capacity_exits_2_naming_it(tmp_path: Path, make: object, fragment: str) -> None:
    folder = make(tmp_path)  # type: ignore[operator]
    out = CliRunner().invoke(app, ["plan", str(folder), "--rate", "10"])
    assert out.exit_code == 2 and fragment in " ".join(out.output.split()), out.output


def test_a_scenario_is_measured_first_then_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`qbench plan scenario.yaml --target URL`: `qbench capacity` runs first (its search is stubbed here:
    tests/tune/e2e/test_capacity_e2e.py runs it), then the plan reads the folder it wrote."""
    from qbench.tune.capacity import command as capacity_command

    folder = capacity_folder(tmp_path)
    seen = []

    def measured(config: capacity_command.CapacityConfig,
                 observer: object = None) -> capacity_command.CapacityRun:
        seen.append(config)
        return capacity_command.CapacityRun(folder, Capacity(40.0, 44.0, 0.1, True), 10.0, None,
                                            [("capacity", "40")])

    monkeypatch.setattr(capacity_command, "run_capacity", measured)
    monkeypatch.chdir(tmp_path)
    scenario = Path(__file__).resolve().parents[3] / "examples" / "capacity" / "replica.yaml"
    out = CliRunner().invoke(app, ["plan", str(scenario), "--target", "http://127.0.0.1:1", "--slo",
                                   "p95_latency_s=2", "--users", "100", "--think-time", "10"])
    assert out.exit_code == 0, out.output
    assert seen[0].target == "http://127.0.0.1:1" and seen[0].constraints.slo["p95_latency_s"] == 2
    assert json.loads((folder / "plan.json").read_text())["replicas"] == 1


def test_spare_replicas_hold_the_peak_when_that_many_are_lost() -> None:
    """--spare N: N replicas on top of what the peak needs with its headroom, so losing N still holds it;
    without spares the plan says the headroom is not replica-loss protection, and how many replicas the
    peak itself survives losing (2 of 3 here: 99 req/s needs 2 x 50)."""
    peak = traffic(2000, 20.0, None, None)  # 99.0 req/s: ceil(99 x 1.3 / 50) = 3
    plain, spared = make_plan(ONE, peak, 0.3), make_plan(ONE, peak, 0.3, spare=2)
    assert (plain.replicas, plain.spare, plain.survives_loss) == (3, 0, 1)
    assert (spared.replicas, spared.spare, spared.survives_loss) == (5, 2, 3)
    assert spared.utilization == pytest.approx(99.0099 / 250, rel=1e-4)
    plain_words, spared_words = dict(plain.lines), dict(spared.lines)
    assert "not replica-loss protection" in plain_words["replica loss"]
    assert "--spare N" in plain_words["replica loss"]
    assert "= ceil(2.57) + 2 spare" in spared_words["replicas"]
    assert "losing 2 replicas leaves 3 x 50 = 150 req/s, which hold the 99 req/s peak with its 30% headroom" \
        in spared_words["replica loss"]
    assert make_plan(ONE, peak, 0.3, spare=2).to_dict()["spare"] == 2
    tight = make_plan(ONE, traffic(None, None, None, 95.0), 0.0)  # 95 / 50 -> 2, losing one leaves 50
    assert tight.survives_loss == 0
    assert "losing any replica leaves less than" in dict(tight.lines)["replica loss"]
    with pytest.raises(ScenarioError, match="--spare -1"):
        make_plan(ONE, peak, 0.3, spare=-1)


def test_think_time_zero_without_a_mean_latency_is_an_error_not_a_division_by_zero() -> None:
    unknown = Replica(capacity_rps=50.0, mean_latency_s=0.0, source="cap/capacity.json")
    with pytest.raises(ScenarioError, match=r"--think-time 0: cap/capacity.json records no mean latency"):
        make_plan(unknown, traffic(100, 0.0, None, None), 0.3)
    at_once = make_plan(ONE, traffic(100, 0.0, None, None), 0.3)  # with a latency: users / latency
    assert at_once.rate_rps == pytest.approx(100 / 0.2) and at_once.replicas == 13
    assert make_plan(unknown, traffic(100, 10.0, None, None), 0.3).rate_rps == pytest.approx(10.0)


def test_the_command_takes_spare_and_refuses_a_negative_one(tmp_path: Path) -> None:
    folder = capacity_folder(tmp_path)
    out = CliRunner().invoke(app, ["plan", str(folder), "--users", "1000", "--think-time", "30",
                                   "--spare", "1"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "ceil(1.07) + 1 spare" in text and "losing 1 replica leaves 2 x 40 = 80 req/s" in text
    assert json.loads((folder / "plan.json").read_text())["replicas"] == 3
    bad = CliRunner().invoke(app, ["plan", str(folder), "--rate", "10", "--spare", "-1"])
    assert bad.exit_code == 2 and "--spare" in bad.output
