"""RunInfo: run.json as data; the runner writes it with the field names the readers load."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from qbench.run.load.executor import ExecutionInfo
from qbench.run.pipeline import with_execution
from qbench.run.results.run_info import GENERATOR_KEYS, RunInfo
from qbench.run.results.summary import GeneratorStats, WorkerStats

FULL: dict[str, Any] = {
    "scenario": {"name": "demo", "slo": {"p95_latency_s": 2}},
    "target": "http://127.0.0.1:7860",
    "qbench_version": "0.1.0",
    "host": {"hostname": "h", "platform": "Linux", "python": "3.12", "cpus": 2},
    "started_at": "2026-11-25T03:00:00+00:00",
    "server": {"fn_index": 0, "status": {"queue_size": 0}, "status_end": None},
    "auth": {"login": True, "accounts": 1, "logins": 2, "relogins": 1},
    "stop_kind": "deadline",
    "stop_reason": "queue runs away",
    "failed_opening": "all http_5xx",
    "lost_workers": ["node-2: died"],
    "max_in_flight": 7,
    "planned_requests": 40,
    "payload": {"files": 0},
    "clock": {"node-2": {"offset_s": 0.001}},
    "generator": dataclasses.asdict(GeneratorStats(cpu_s=1.5, processes=2, executor="ray",
                                                   workers=[WorkerStats(index=0, where="node-1")])),
    "records": 40,
    "from_a_newer_version": {"x": 1},
}


def test_a_full_run_json_round_trips() -> None:
    info = RunInfo.from_dict(FULL)
    assert info.to_dict() == FULL
    assert RunInfo.from_dict(info.to_dict()) == info
    assert info.generator is not None and info.generator.workers[0].where == "node-1"
    assert info.lost_workers == ("node-2: died",) and info.logged_in
    assert info.extra == {"from_a_newer_version": {"x": 1}}
    assert list(info.load_generator()) == list(GENERATOR_KEYS)


@pytest.mark.parametrize("data", [
    {},  # a folder whose run.json is missing or unreadable
    {"target": "http://x", "scenario": {"name": "old"}},  # an old run: no executor report, no generator
    {"stop_kind": None, "stop_reason": "", "failed_opening": None, "max_in_flight": None,
     "payload": None, "auth": None, "server": None},  # what the executors write when nothing happened
    {"scenario": "not a dict", "generator": {"workers": [{"unknown": 1}]}, "lost_workers": "w1",
     "max_in_flight": "7", "host": [1]},  # mistyped entries read as absent, never raise
])
def test_an_old_or_partial_run_json_loads_with_defaults(data: dict[str, Any]) -> None:
    info = RunInfo.from_dict(data)
    assert info.stop_kind is None and info.stop_reason is None and info.failed_opening is None
    assert info.lost_workers == () and info.generator is None and info.max_in_flight is None
    assert isinstance(info.scenario, dict) and isinstance(info.server, dict) and isinstance(info.auth, dict)
    assert not info.logged_in and RunInfo.from_dict(info.to_dict()) == info


def test_the_runner_starts_run_json_with_the_readers_field_names() -> None:
    start = RunInfo.start(scenario={"name": "s"}, target="http://t", qbench_version="1", host={"cpus": 2},
                          started_at="now")
    assert start.to_dict() == {"scenario": {"name": "s"}, "target": "http://t", "qbench_version": "1",
                               "host": {"cpus": 2}, "started_at": "now"}
    later = start.updated({"stop_kind": "interrupted", "lost_workers": ["w"]})
    assert later.stop_kind == "interrupted" and later.lost_workers == ("w",) and later.target == "http://t"


def test_the_executors_report_is_laid_over_run_json_typed() -> None:
    """runner.with_execution: the keys the dict-based runner wrote (None ones left out), same meaning."""
    start = RunInfo.start(scenario={"name": "s"}, target="http://t", qbench_version="1", host={"cpus": 2},
                          started_at="now")
    announced = dataclasses.replace(start, server={"fn_index": 0}, auth={"login": True, "logins": 1})
    clock = {"driver": "h", "nodes": [{"index": 0, "offset_s": 0.001}]}
    ray = ExecutionInfo(stop_kind="interrupted", stop_reason="Ctrl-C", max_in_flight=4, payload=None,
                        auth={"login": True, "logins": 2, "relogins": 1}, clock=clock,
                        lost_workers=("w1: died",))
    stored = with_execution(announced, ray).to_dict()
    assert stored == {**announced.to_dict(), "auth": {"login": True, "logins": 2, "relogins": 1},
                      "stop_kind": "interrupted", "stop_reason": "Ctrl-C", "max_in_flight": 4, "clock": clock,
                      "lost_workers": ["w1: died"]}
    assert RunInfo.from_dict(stored) == with_execution(announced, ray)
    local = with_execution(announced, ExecutionInfo(payload={"files": 0}))  # ran to its end, no login count
    assert local.auth == announced.auth and local.lost_workers == () and local.clock is None
    assert {k: v for k, v in local.to_dict().items() if k not in announced.to_dict()} == {
        "max_in_flight": 0, "payload": {"files": 0}}
