"""The executor interface's shared pieces: splitting, merging, lost workers (tables, no I/O), and the
registry that picks an executor."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.load.executor import (
    ExecutionInfo,
    LocalExecutor,
    PartInfo,
    PartResult,
    in_loop,
    lost_records,
    merge,
    merge_info,
    split_plan,
    worker_stats,
)
from qbench.run.pipeline import make_executor
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import GeneratorStats
from qbench.run.scenario.schedule import OpenPlan, UserPlan, plan
from qbench.run.scenario.schema import Scenario
from tests.run.conftest import scenario


def spec(**load: object) -> Scenario:
    return scenario(endpoint={"api_name": "work"}, load=load)


def test_open_loop_split_every_nth_request_and_a_shared_session_pool() -> None:
    s = spec(rate=10, requests=7, sessions=4)
    parts = split_plan(s, plan(s.load), "http://x", 3)
    assert [p.index for p in parts] == [0, 1, 2]
    ids = [p.plan.request_ids() for p in parts if isinstance(p.plan, OpenPlan)]
    assert ids == [[0, 3, 6], [1, 4], [2, 5]]
    assert all(p.scenario.load.sessions == 1 for p in parts)  # 4 // 3
    (whole,) = split_plan(s, plan(s.load), "http://x", 1)
    assert whole.scenario is s and isinstance(whole.plan, OpenPlan) and len(whole.plan) == 7


def test_closed_loop_split_every_nth_user_and_the_request_budget() -> None:
    s = spec(users=5, requests=11)
    parts = split_plan(s, plan(s.load), "http://x", 2)
    plans = [p.plan for p in parts]
    assert all(isinstance(p, UserPlan) for p in plans)
    assert [(p.users, p.requests) for p in plans if isinstance(p, UserPlan)] == [(3, 6), (2, 5)]


def rec(i: int, t: float, user: int = 0, lag: float = 0.01) -> RequestRecord:
    r = RequestRecord(i, user, "", "e", False, t)
    r.sent_at_s, r.completed_at_s, r.outcome = t + lag, t + 0.1, "ok"
    return r


def part_result(index: int, records: list[RequestRecord], cpu: float) -> PartResult:
    stats = GeneratorStats(cpu_s=cpu, cpu_percent=cpu * 10, max_loop_lag_s=0.001, max_in_flight=2)
    lags = [r.send_lag_s for r in records if r.send_lag_s is not None]
    worker = worker_stats(index, f"w{index}", len(records), lags, stats)
    return PartResult(index, records, stats, PartInfo(max_in_flight=2), worker)


def test_merge_orders_records_and_keeps_each_workers_health() -> None:
    a = part_result(0, [rec(0, 0.0), rec(2, 0.2)], 1.0)
    b = part_result(1, [rec(1, 0.1, lag=0.05), rec(3, 0.3, lag=0.07)], 2.0)
    run = merge([b, a], open_loop=True, executor="processes")
    assert [r.request_id for r in run.records] == [0, 1, 2, 3]
    g = run.stats
    assert g.cpu_s == 3.0 and g.processes == 2 and g.max_in_flight == 4 and g.executor == "processes"
    assert [w.index for w in g.workers] == [0, 1] and [w.requests for w in g.workers] == [2, 2]
    assert g.workers[1].max_send_lag_s == pytest.approx(0.07)
    assert g.workers[1].p99_send_lag_s == pytest.approx(np.percentile([0.05, 0.07], 99))


def test_merge_renumbers_closed_loop_requests_in_send_order() -> None:
    a = part_result(0, [rec(0, 0.0, user=0), rec(1, 0.3, user=0)], 1.0)
    b = part_result(1, [rec(0, 0.1, user=1), rec(1, 0.2, user=1)], 1.0)
    run = merge([a, b], open_loop=False, executor="ray")
    assert [(r.request_id, r.user_id) for r in run.records] == [(0, 0), (1, 1), (2, 1), (3, 0)]


def test_a_single_part_is_returned_as_it_ran() -> None:
    run = merge([part_result(0, [rec(1, 0.1), rec(0, 0.0)], 1.0)], open_loop=True, executor="local")
    assert [r.request_id for r in run.records] == [1, 0] and run.stats.workers == []


def test_merge_info_keeps_the_first_stop_and_adds_up_logins() -> None:
    auth = {"login": True, "accounts": 2, "per": "run"}
    parts = [
        PartInfo(max_in_flight=3, payload={"files": 1}, auth={**auth, "logins": 1, "relogins": 0}),
        PartInfo(stop_kind="deadline", stop_reason="queue runs away", max_in_flight=2,
                 failed_opening="all http_5xx", payload={"files": 2},
                 auth={**auth, "logins": 1, "relogins": 1}),
        PartInfo(stop_kind="interrupted", stop_reason="later", auth=None),  # a lost Ray worker: nothing known
    ]
    info = merge_info(parts)
    assert (info.stop_kind, info.stop_reason) == ("deadline", "queue runs away")
    assert info.failed_opening == "all http_5xx"
    assert info.max_in_flight == 5 and info.payload is None  # several parts: no one payload count
    assert info.auth == {**auth, "logins": 2, "relogins": 1}
    assert info.clock is None and info.lost_workers is None  # the Ray executor's to fill in
    alone = merge_info(parts[:1])
    assert alone == ExecutionInfo(max_in_flight=3, payload={"files": 1},
                                  auth={**auth, "logins": 1, "relogins": 0})
    assert merge_info([PartInfo()]) == ExecutionInfo()


def test_merge_hands_back_the_merged_info() -> None:
    run = merge([part_result(0, [rec(0, 0.0)], 1.0), part_result(1, [rec(1, 0.1)], 1.0)], True, "processes")
    assert run.info == ExecutionInfo(max_in_flight=4) and run.info.max_in_flight == run.stats.max_in_flight


def test_lost_open_loop_part_accounts_for_every_unreported_request() -> None:
    s = spec(rate=10, requests=10, warmup=0.35, sessions=4)
    (_, part) = split_plan(s, plan(s.load), "http://x", 2)
    lost = lost_records(part, received={3}, label=lambda _: "work", at_s=0.5, reason="node died")
    assert [r.request_id for r in lost] == [1, 5, 7, 9]  # its part is 1, 3, 5, 7, 9; 3 was reported
    assert {r.error_kind for r in lost} == {"generator_lost"} and all(r.sent_at_s is None for r in lost)
    assert [r.intended_at_s for r in lost] == pytest.approx([0.1, 0.5, 0.7, 0.9])
    assert [r.warmup for r in lost] == [True, False, False, False]
    assert "node died" in (lost[0].error_message or "")
    assert [r.user_id for r in lost] == [0, 0, 1, 0]  # the part's own session slots (2 of the 4)


def test_lost_closed_loop_part_records_its_remaining_budget_or_one_per_user() -> None:
    s = spec(users=4, requests=10)
    (_, part) = split_plan(s, plan(s.load), "http://x", 2)
    lost = lost_records(part, received=set(), label=lambda _: "work", at_s=2.0, reason="x", user_records=3)
    assert len(lost) == 2 and {r.user_id for r in lost} == {1, 3} and lost[0].intended_at_s == 2.0
    s = spec(users=4, duration=5)
    (part, _) = split_plan(s, plan(s.load), "http://x", 2)
    assert len(lost_records(part, set(), lambda _: "work", 1.0, "x", user_records=9)) == 2


def test_the_registry_picks_the_executor_the_load_section_asks_for() -> None:
    from qbench.run.load.processes import ProcessExecutor

    assert isinstance(make_executor(spec(burst=2)), LocalExecutor)
    assert isinstance(make_executor(spec(burst=2, processes=2)), ProcessExecutor)
    ray = make_executor(spec(burst=2, executor="ray", workers=3, ray_address="ray://h:10001"))
    assert (type(ray).__name__, vars(ray)) == ("RayExecutor", {"address": "ray://h:10001", "workers": 3})


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"executor": "ray", "processes": 2}, "with executor: ray use workers"),
        ({"workers": 2}, "apply to executor: ray"),
        ({"ray_address": "auto"}, "apply to executor: ray"),
        ({"executor": "ray", "workers": 0}, "'auto' or 1..1024"),
        ({"executor": "ray", "workers": "many"}, "workers"),
    ],
)
def test_bad_executor_options_are_named(load: dict[str, object], message: str) -> None:
    from qbench.errors import ScenarioError

    with pytest.raises(ScenarioError, match=message):
        spec(burst=1, **load)


def test_open_plan_type() -> None:
    s = spec(burst=3)
    assert isinstance(plan(s.load), OpenPlan)


@pytest.mark.parametrize(("name", "kind"), [("asyncio", "asyncio"), ("uvloop", "uvloop")])
def test_a_loop_asked_for_by_name_is_that_one_whatever_policy_the_process_installed(
        name: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray worker installs uvloop's policy before an actor runs: the loop the driver names wins."""
    import asyncio

    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setenv("QBENCH_LOOP", "asyncio")

    async def loop_type() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]  # the package that made it

    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        assert in_loop(loop_type(), name) == kind
        assert in_loop(loop_type()) == "uvloop"  # unnamed: the policy's (the driver installs none)
    finally:
        asyncio.set_event_loop_policy(before)
