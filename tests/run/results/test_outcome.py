"""RunOutcome: how a run ended, read once from the run info; `verdict` / `exit_code`: the one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.errors import ExecutorError, RunInterrupted, SloViolation, TargetError
from qbench.run.options import RunOptions, workers_value
from qbench.run.results.outcome import RunOutcome, exit_code, verdict
from qbench.run.results.summary import SloCheck, Summary

SLOW = SloCheck("p95_latency_s", 1.0, 1.23456, False, "max")
AMONG_FAILURES = SloCheck("p99_latency_s", 2.0, None, False, "max", note="30.0% of sent requests failed")
PASSED = SloCheck("error_rate", 0.01, 0.0, True, "max")


@pytest.mark.parametrize(
    ("outcome", "code", "kind", "message"),
    [
        (RunOutcome(), 0, None, None),
        (RunOutcome(stop_kind="deadline", stop_reason="backlog grows"), 0, None, None),
        (RunOutcome(failed_checks=(SLOW,)), 3, SloViolation,
         "SLO violated: p95_latency_s (actual 1.235, limit 1)"),
        (RunOutcome(failed_checks=(AMONG_FAILURES,)), 3, SloViolation,
         "SLO violated: p99_latency_s (30.0% of sent requests failed, limit 2)"),
        (RunOutcome(stop_kind="interrupted", failed_checks=(SLOW,)), 130, RunInterrupted, "run interrupted"),
        (RunOutcome(stop_kind="interrupted", stop_reason="stopped early: all http_5xx",
                    failed_opening="all http_5xx"), 2, TargetError, "run stopped early: all http_5xx"),
        (RunOutcome(failed_opening="all connect"), 2, TargetError, "run failed: all connect"),
        (RunOutcome(stop_kind="interrupted", failed_opening="x", lost_workers=("node-2: died",)), 2,
         ExecutorError, "1 generator worker(s) lost mid-run; their unreported requests are recorded as "
         "generator_lost: node-2: died"),
    ],
    ids=["ok", "stopped-early-by-hook", "slo", "slo-among-failures", "interrupted", "failfast",
         "failed-opening", "lost-worker"],
)
def test_one_rule_maps_an_outcome_to_its_exit_code(outcome: RunOutcome, code: int, kind: type | None,
                                                   message: str | None) -> None:
    error = verdict(outcome)
    assert exit_code(outcome) == code
    if kind is None:
        assert error is None
    else:
        assert isinstance(error, kind) and message is not None and str(error).startswith(message)


def test_outcome_reads_the_run_info_and_the_summary_once() -> None:
    summary = Summary(slo=[PASSED, SLOW], endpoints={"b": Summary(slo=[SLOW])})
    info = {"stop_kind": "deadline", "stop_reason": "queue runs away", "failed_opening": None,
            "lost_workers": ["w1: gone"], "auth": {"login": True, "logins": 2, "relogins": 1}}
    outcome = RunOutcome.of(info, summary)
    assert outcome.stopped_early == "queue runs away" and not outcome.interrupted
    assert outcome.lost_workers == ("w1: gone",)
    assert [c.name for c in outcome.failed_checks] == ["p95_latency_s", "b: p95_latency_s"]
    assert (outcome.logins, outcome.relogins) == (2, 1) and not outcome.slo_passed
    bare = RunOutcome.of({"auth": {"login": False, "logins": 0}}, Summary())
    assert bare == RunOutcome() and bare.slo_passed and bare.stopped_early is None


def test_run_options_become_override_values(tmp_path: Path) -> None:
    options = RunOptions(sets={"load.rate": 4, "load.processes": 9}, credentials={"auth.bearer": "t"},
                         processes=2, replay=tmp_path, ray="auto", workers="3")
    assert options.overrides() == {
        "load.rate": 4, "load.processes": 2, "auth.bearer": "t", "load.replay": str(tmp_path.resolve()),
        "load.executor": "ray", "load.ray_address": "auto", "load.workers": 3,
    }
    assert RunOptions().overrides() == {}
    assert [workers_value(w) for w in ("auto", "12", "x")] == ["auto", 12, "x"]
