"""qbench.tune.points.knobcheck: running(t) from records, and the verdict on a point's knobs."""

from __future__ import annotations

from typing import Any

import pytest

from qbench.run.records.schema import RequestRecord
from qbench.tune.points.knobcheck import (
    BatchKnobError,
    check_batching,
    check_point,
    expected_limit,
    observed_parallelism,
)
from qbench.tune.servers.apphook import HookRecord


def rec(i: int, sent: float, started: float | None, done: float) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=i, session_id="s", endpoint="respond", warmup=False,
                         intended_at_s=sent, sent_at_s=sent, joined_at_s=sent + 0.001, started_at_s=started,
                         completed_at_s=done, outcome="ok")


def served(limit: int, n: int, service: float = 0.2) -> list[RequestRecord]:
    """`n` requests all sent at 0 to a queue that runs `limit` at a time, `service` s each."""
    out = []
    for i in range(n):
        start = (i // limit) * service + 0.002
        out.append(rec(i, 0.0, start, start + service))
    return out


@pytest.mark.parametrize("limit", [1, 2, 4, 8])
def test_peak_running_equals_the_queues_limit_under_saturation(limit: int) -> None:
    par = observed_parallelism(served(limit, 4 * limit))
    assert (par.peak_running, par.typical_while_waiting, par.saturated) == (limit, limit, True)


def test_an_overlap_of_two_streams_messages_is_not_a_peak() -> None:
    records = served(4, 16)
    for r in records[4:]:  # every process_starts seen 60 ms before the end of the job it replaced
        r.started_at_s -= 0.06  # type: ignore[operator]
    par = observed_parallelism(records)
    assert (par.peak_running, par.typical_while_waiting) == (4, 4)
    assert check_point({"concurrency_limit": 4}, records).verdict == "applied"


def test_a_client_that_reads_its_messages_late_does_not_make_a_peak() -> None:
    """A busy load generator reads each process_completed up to its loop lag late: under light load, two
    jobs seem to overlap for that long. Its p99 lag (the summary's) widens the hold, so the overlap is
    not taken for a job run beside another; a real overlap longer than that still is."""
    records = [rec(i, t, t + 0.01, t + 0.21) for i, t in enumerate([0.0, 0.25, 3.0, 3.25, 6.0, 6.25])]
    for r in records:
        r.completed_at_s += 0.4  # type: ignore[operator]  # read 400 ms late: seen overlapping the next
    assert observed_parallelism(records).peak_running == 2
    assert check_point({"concurrency_limit": 1}, records).verdict == "not_applied"
    assert observed_parallelism(records, lag_s=0.4).peak_running == 1
    assert check_point({"concurrency_limit": 1}, records, lag_s=0.4).verdict != "not_applied"
    real = [rec(0, 0.0, 0.01, 2.01), rec(1, 0.05, 0.06, 2.06)]
    assert observed_parallelism(real, lag_s=0.4).peak_running == 2


def test_a_real_overlap_under_light_load_is_a_peak() -> None:
    records = [rec(0, 0.0, 0.01, 0.21), rec(1, 0.05, 0.06, 0.26), rec(2, 2.0, 2.01, 2.21)]
    check = check_point({"concurrency_limit": 1}, records)
    assert check.verdict == "not_applied" and "2 requests ran at once" in check.summary


def test_light_load_is_not_saturation() -> None:
    records = [rec(i, i * 1.0, i * 1.0 + 0.01, i * 1.0 + 0.21) for i in range(5)]
    par = observed_parallelism(records)
    assert (par.peak_running, par.saturated) == (1, False)
    check = check_point({"concurrency_limit": 4}, records)
    assert check.verdict == "unverified"


def test_more_running_than_the_knob_is_knobs_not_applied() -> None:
    check = check_point({"concurrency_limit": 1}, served(4, 16))
    assert check.verdict == "not_applied"
    assert "while requests waited, 4 ran at once" in check.summary and "above the limit 1" in check.summary


def test_fewer_running_than_the_knob_while_requests_wait_is_knobs_not_applied() -> None:
    check = check_point({"concurrency_limit": 8}, served(2, 16))
    assert check.verdict == "not_applied"
    assert "at most 2 ran at once" in check.summary


def test_the_knob_confirmed_by_the_records_is_applied() -> None:
    check = check_point({"concurrency_limit": 4}, served(4, 16))
    assert check.verdict == "applied" and "4 ran at once while requests waited" in check.summary


def test_batches_may_run_limit_times_batch_requests() -> None:
    check = check_point({"concurrency_limit": 1, "max_batch_size": 4}, served(4, 16))
    assert check.verdict == "unverified"  # within 1 x 4; partial batches leave the lower bound open
    assert check_point({"concurrency_limit": 1, "max_batch_size": 2}, served(4, 16)).verdict == "not_applied"


def hook(**over: Any) -> HookRecord:
    data: dict[str, Any] = {
        "launched": True, "gradio_version": "4.44.1",
        "queue": {"app": {"default_concurrency_limit": 4}},
        "events": [{"fn_index": 0, "api_name": "respond", "chosen": True,
                    "app": {"concurrency_limit": "default", "batch": False},
                    "set": {"concurrency_limit": 2}, "effective": {"concurrency_limit": 2, "batch": False}}],
    }
    data.update(over)
    return HookRecord.from_dict(data)


def test_the_hooks_record_must_show_the_knob_on_the_driven_event() -> None:
    good = check_point({"concurrency_limit": 2}, served(2, 8), hook=hook(), launched_by_hook=True)
    assert good.verdict == "applied"
    bad = check_point({"concurrency_limit": 8}, served(2, 8), hook=hook(), launched_by_hook=True)
    assert bad.verdict == "not_applied"
    assert "`respond` runs with concurrency limit 2, not 8" in bad.summary
    assert "default_concurrency_limit=4" in bad.summary


def test_no_launch_seen_by_the_hook_needs_the_records_to_confirm() -> None:
    missing = HookRecord(launched=False)
    assert check_point({"concurrency_limit": 2}, served(2, 8), hook=missing,
                       launched_by_hook=True).verdict == "applied"
    light = [rec(i, i * 1.0, i + 0.01, i + 0.2) for i in range(3)]
    check = check_point({"concurrency_limit": 2}, light, hook=missing, launched_by_hook=True)
    assert check.verdict == "not_applied" and "no Blocks.launch()" in check.summary


def test_expected_limit_reads_the_knob_that_sets_it() -> None:
    assert expected_limit({"concurrency_count": 3}) == 3
    assert expected_limit({"concurrency_limit": "none"}) is None
    assert expected_limit({"max_threads": 8}) is None


def test_batching_a_plain_function_is_refused_with_how_to_declare_one() -> None:
    check_batching({"max_batch_size": 1}, hook())
    with pytest.raises(BatchKnobError, match=r"takes lists.*batch=True, max_batch_size=4"):
        check_batching({"max_batch_size": 4}, hook())


def test_run_warns_when_the_server_disagrees_with_the_scenarios_expect() -> None:
    from qbench.run.scenario.schema import parse_scenario
    from qbench.tune.points.knobcheck import expectation_warnings

    raw = {"name": "x", "endpoint": {"api_name": "respond"}, "payload": {"inputs": [{"value": "hi"}]},
           "load": {"users": 8, "duration": 1}, "expect": {"concurrency_limit": 4}}
    scenario = parse_scenario(raw, source="x.yaml")
    assert expectation_warnings(scenario, served(4, 16)) == []
    (warning,) = expectation_warnings(scenario, served(1, 8))
    assert warning.startswith("the scenario expects concurrency_limit=4, but requests waited")
    assert expectation_warnings(parse_scenario({**raw, "expect": None}, source="x.yaml"), served(1, 8)) == []


def test_max_threads_caps_the_limit_the_records_must_show() -> None:
    check = check_point({"concurrency_limit": 8, "max_threads": 2}, served(2, 16))
    assert check.verdict == "applied" and check.expected_limit == 2


def test_the_first_point_refuses_a_grid_that_batches_a_plain_function() -> None:
    with pytest.raises(BatchKnobError, match="max_batch_size=8"):
        check_batching({"max_batch_size": 1}, hook(), [1, 8])
    reads_it = hook(app_reads=["QBENCH_MAX_BATCH_SIZE"])  # the app may declare batch=True from it
    check_batching({"max_batch_size": 1}, reads_it, [1, 8])


def test_knob_scope_all_batches_the_batch_functions_only() -> None:
    events = [{"fn_index": 0, "api_name": "respond", "chosen": True, "effective": {"batch": False}},
              {"fn_index": 1, "api_name": "shout", "chosen": True, "effective": {"batch": True}}]
    check_batching({"max_batch_size": 4}, hook(scope="all", events=events))
    with pytest.raises(BatchKnobError):
        check_batching({"max_batch_size": 4}, hook(scope="all", events=events[:1]))


def test_event_knobs_on_an_event_the_app_does_not_have_are_refused() -> None:
    from qbench.tune.points.knobcheck import AppKnobError, check_events

    missing = hook(driven=["chat"], events=[{"fn_index": 0, "api_name": "respond", "chosen": False}])
    with pytest.raises(AppKnobError, match="drives `chat`.*queued events: `respond`"):
        check_events({"concurrency_limit": 2}, missing)
    check_events({"max_threads": 8}, missing)  # a launch() knob needs no event
    check_events({"concurrency_limit": 2}, hook())


def test_an_instant_function_waiting_only_for_the_dispatcher_is_not_a_lower_limit() -> None:
    """Echo under 2 closed-loop users and limit 2: each request waits ~5 ms for the dispatcher with a
    slot free and runs 1 ms, so one runs at a time. That is not a limit below 2 (it failed a real
    launch-mode sweep this way); a wait past DISPATCH_S still counts."""
    records = [rec(i, i * 0.007, i * 0.007 + 0.006, i * 0.007 + 0.007) for i in range(150)]
    par = observed_parallelism(records)
    assert par.saturated is False and par.waiting_s == 0
    assert check_point({"concurrency_limit": 2}, records).verdict != "not_applied"


def launched(effective: dict[str, Any], problems: tuple[str, ...] = ()) -> HookRecord:
    """A hook record of an app launched with the launch() knobs, and what Gradio started for them."""
    return hook(launch={"app": {"max_threads": 40}, "set": {}, "effective": effective},
                problems=list(problems))


def test_num_workers_is_applied_when_its_static_workers_answered() -> None:
    ssr = {"static_workers": 2, "static_workers_healthy": 2, "ssr": True, "ssr_proxy_port": 7860}
    check = check_point({"num_workers": 2}, served(4, 8), hook=launched(ssr), launched_by_hook=True)
    assert check.verdict == "applied"
    assert check.evidence == ["2 static-file workers answered /health behind SSR's Node proxy"]
    idle = check_point({"num_workers": 2}, served(4, 8), hook=launched({**ssr, "ssr": False}),
                       launched_by_hook=True)
    assert idle.verdict == "applied" and "without SSR's Node proxy nothing is routed to them" in idle.summary
    none = check_point({"num_workers": 0}, [], hook=launched({}), launched_by_hook=True)
    assert none.verdict == "applied" and none.evidence == ["num_workers 0: no static-file workers"]


def test_num_workers_gradio_did_not_start_is_not_applied() -> None:
    check = check_point({"num_workers": 2}, served(4, 8), hook=launched({"static_workers": 0}),
                        launched_by_hook=True)
    assert check.verdict == "not_applied"
    assert "num_workers 2, but Gradio started 0 static-file workers (0 answered /health) (Gradio starts " \
           "none for an app behind a login)" in check.summary
    old = launched({}, ("launch() of Gradio 6.9.0 has no num_workers (6.15 and later have it)",))
    assert "has no num_workers" in check_point({"num_workers": 2}, [], hook=old,
                                               launched_by_hook=True).summary


def test_ssr_mode_is_checked_against_the_node_proxy_that_started() -> None:
    on = launched({"ssr": True, "ssr_proxy_port": 7860})
    assert check_point({"ssr_mode": True}, [], hook=on, launched_by_hook=True).evidence == [
        "SSR on: Gradio's Node proxy serves port 7860"]
    failed = check_point({"ssr_mode": True}, [], hook=launched({"ssr": False}), launched_by_hook=True)
    assert failed.verdict == "not_applied" and "served without its Node proxy" in failed.summary
    off = check_point({"ssr_mode": False}, [], hook=launched({}), launched_by_hook=True)
    assert off.evidence == ["SSR off"]
    assert check_point({"ssr_mode": False}, [], hook=on, launched_by_hook=True).verdict == "not_applied"
    limited = check_point({"concurrency_limit": 2, "ssr_mode": True}, served(2, 8), hook=on,
                          launched_by_hook=True)
    assert limited.verdict == "applied" and limited.evidence[-1].startswith("SSR on")


def stalled_echo(stalls: int) -> list[RequestRecord]:
    """Echo under 2 closed-loop users and limit 2 on a busy machine (a CI run's records, made
    regular): requests take 1 ms, but `stalls` times the server pauses 140 ms; the request caught
    running across the pause ends with it, and the other one, joined meanwhile, waits the pause out and
    then starts and ends at the same instant."""
    records: list[RequestRecord] = []
    t = 0.0
    for k in range(80):
        if k % 20 == 10 and stalls > 0:
            stalls -= 1
            records.append(rec(len(records), t, t + 0.003, t + 0.143))  # caught running
            records.append(rec(len(records), t + 0.002, t + 0.143, t + 0.143))  # waited the pause out
            t += 0.15
            continue
        for _ in range(2):
            records.append(rec(len(records), t, t + 0.004, t + 0.005))
        t += 0.01
    return records


def test_a_server_that_stalls_now_and_then_is_not_a_lower_limit() -> None:
    """Three 140 ms stalls put 0.4 s of "one ran while another waited" into a 1 s echo point (a real CI
    failure: "at most 1 ran at once (over 0.3 s): the server's limit is below 2"). Three waits among
    160 requests are an incident, not a queue held by its limit."""
    records = stalled_echo(3)
    par = observed_parallelism(records)
    assert par.waiting_s > 0.3 and par.waiters == 3 and not par.saturated
    assert check_point({"concurrency_limit": 2}, records).verdict != "not_applied"


def test_a_closed_loop_pair_on_a_limit_of_one_is_a_lower_limit() -> None:
    """The same 2 closed-loop users on a server that runs 1 at a time (0.1 s each): every other request
    waits a whole service time, a pattern; a knob of 2 did not reach the server."""
    records = []
    for k in range(30):  # user 0 runs at 0.2k, user 1 waits behind it and runs at 0.2k + 0.1
        records.append(rec(2 * k, 0.2 * k, 0.2 * k + 0.002, 0.2 * k + 0.1))
        records.append(rec(2 * k + 1, 0.2 * k, 0.2 * k + 0.1, 0.2 * k + 0.2))
    par = observed_parallelism(records)
    assert par.saturated and par.waiters == 30
    check = check_point({"concurrency_limit": 2}, records)
    assert check.verdict == "not_applied" and "at most 1 ran at once" in check.summary


@pytest.mark.parametrize("seed", range(6))
def test_running_from_columns_is_the_golden_count(seed: int) -> None:
    """observed_parallelism over columns gives the golden figures (written when the columns replaced the
    record-by-record loop, and equal to its): saturated queues of several limits, light load, stalls,
    late reads, requests never started."""
    import random

    from qbench.run.records.columns import Columns
    from tests import golden

    rng = random.Random(seed)
    records = served(rng.choice([1, 2, 4, 8]), rng.randint(5, 60), service=rng.uniform(0.01, 0.3))
    records += stalled_echo(rng.randint(0, 3))
    for r in records:
        r.started_at_s = None if rng.random() < 0.05 else r.started_at_s
        r.joined_at_s = None if rng.random() < 0.2 else r.joined_at_s
        if r.completed_at_s is not None:
            r.completed_at_s += rng.choice([0.0, 0.0, rng.uniform(0, 0.05)])
    lag = rng.choice([0.0, 0.01, 0.2])
    golden.check("knobcheck", f"seed {seed}", observed_parallelism(Columns.of(records), lag).to_dict())
