"""Bursts with a deterministic observable outcome, and what real Gradio 6.x shows for each.

A scenario is a list of jobs plus a `summarize(traces)` that keeps only what should not depend on
timing noise: message kinds, normalised message bodies, realised concurrency, dispatch sizes, join
statuses. `expected` is Gradio's behaviour (checked by the differential tests against a live Gradio,
and by the conformance tests against the reference server).

Sleep functions take 0.2 s and jobs join 10-30 ms apart, so a burst lands while its first job runs.
On a busy machine a join can be late; a scenario's `landed(traces)` says whether the burst arrived
as intended, and `run_scenario` repeats a burst that did not (a late burst tests something else).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .driver import Job, Trace, run_burst
from .gradio_apps import SUITE
from .observe import batch_sizes, dispatch_groups, max_overlap

SPACING_S = 0.03
TIMING_KEYS = frozenset({"duration", "average_duration", "eta", "rank_eta", "cache_duration", "avg_time"})


def normalise(value: Any) -> Any:
    """A message body with ids and measured times replaced by placeholders (types kept)."""
    if isinstance(value, dict):
        return {k: _placeholder(k, v) for k, v in value.items()}
    return value


def _placeholder(key: str, value: Any) -> Any:
    if key == "event_id":
        return "<id>" if value else value
    if key in TIMING_KEYS:
        return "<number>" if isinstance(value, int | float) and not isinstance(value, bool) else value
    return normalise(value)


def burst(fn: str, n: int, spacing_s: float = SPACING_S, session: str | None = None) -> list[Job]:
    return [Job(fn, [f"x{i}"], session=session, at_s=i * spacing_s) for i in range(n)]


def messages(traces: list[Trace]) -> list[list[Any]]:
    """Per job, its normalised messages (heartbeats dropped)."""
    return [[normalise(m.body) for m in t.messages if m.msg != "heartbeat"] for t in traces]


def estimations(traces: list[Trace]) -> list[list[tuple[int, int]]]:
    """Per job, the (rank, queue_size) of each estimation it received."""
    return [[(m.body["rank"], m.body["queue_size"]) for m in t.all("estimation")] for t in traces]


def kinds(traces: list[Trace]) -> list[list[str]]:
    return [t.kinds for t in traces]


def outputs(traces: list[Trace]) -> list[Any]:
    return [t.completed["output"].get("data") for t in traces]


def landed(traces: list[Trace]) -> bool:
    """Every join was answered before the first job of the burst completed, and every sleeping job was
    seen running (see `seen_running`)."""
    ends = [t.completed_at for t in traces if t.first("process_completed")]
    in_time = not ends or max(t.acked_at for t in traces) < min(ends)
    return in_time and seen_running(traces)


def seen_running(traces: list[Trace]) -> bool:
    """Each job of a sleeping function had its process_starts received at least half its sleep before its
    completion. Overlap and dispatches are read from when those messages arrive; on a busy machine a
    stream can deliver both at once (a busy box's Gradio showed limit_n_runs_n with 0 jobs started at
    once), and that burst measured the client, not the queue."""
    sleeps = {spec.api_name: spec.sleep_s for spec in SUITE if spec.kind == "sleep"}
    for trace in traces:
        start, end = trace.first("process_starts"), trace.first("process_completed")
        sleep_s = sleeps.get(trace.job.fn, 0.0)
        if start is not None and end is not None and end.at - start.at < sleep_s / 2:
            return False
    return True


@dataclass(frozen=True)
class Scenario:
    jobs: list[Job]
    summarize: Callable[[list[Trace]], dict[str, Any]]
    expected: dict[str, Any]
    tight: bool = False  # run against the app with max_threads=2, max_size=3
    landed: Callable[[list[Trace]], bool] = landed
    repeatable: bool = True  # False: the burst changes server state, so it cannot be re-run


def run_scenario(url: str, scenario: Scenario, attempts: int = 5, timeout_s: float = 30.0) -> dict[str, Any]:
    """Run the burst until it lands as intended (at most `attempts` times); its summary."""
    for _ in range(attempts if scenario.repeatable else 1):
        traces = run_burst(url, scenario.jobs, timeout_s)
        if scenario.landed(traces):
            return scenario.summarize(traces)
    late = [round(t.acked_at - t.joined_at, 3) for t in traces]
    raise AssertionError(
        f"the burst never landed in {attempts} attempts (join times {late}): machine too busy"
    )


def running_before(first: list[Trace], then: Trace) -> bool:
    """Every job of `first` had started (its process_starts received) before `then` joined: on a busy
    machine a dispatch can come late, and the jobs still waiting count towards max_size (a busy box's
    Gradio refused the fourth join of max_size_503 for it)."""
    starts = [t.first("process_starts") for t in first]
    return all(m is not None and m.at < then.joined_at for m in starts)


def queued_in_order(traces: list[Trace]) -> bool:
    """The server queued the jobs in the order the burst sent them, each behind the ones before it (their
    first estimations' ranks 0, 1, 2...), as the server's own messages say: a busy client's joins from
    separate sessions can arrive out of order (a busy box's Gradio queued limit_1_serialises' third job
    before its second, so re-estimated the second)."""
    return [seen[0][0] if seen else None for seen in estimations(traces)] == list(range(len(traces)))


def answered_in_order(traces: list[Trace]) -> bool:
    """The joins were answered in the order they were sent: a busy client can send two joins of separate
    sessions 40 ms apart out of order, and a full queue then refuses another job than the one the burst
    means (a busy box's Gradio refused max_size_503's fifth join and took its sixth)."""
    acks = [t.acked_at for t in traces]
    return acks == sorted(acks)


def started_before_first_completion(traces: list[Trace], slack_s: float = 0.05) -> int:
    """How many jobs started while the first-finishing job was still running."""
    first_end = min(t.completed_at for t in traces)
    return sum(t.started_at < first_end - slack_s for t in traces)


PLAIN = ["estimation", "process_starts", "process_completed"]
RE_ESTIMATED = ["estimation", *PLAIN]


def _batch_summary(traces: list[Trace]) -> dict[str, Any]:
    groups = dispatch_groups(traces)
    return {
        "dispatches": [len(g) for g in groups],
        "one_eta_per_batch": all(
            len({t.first("process_starts").body["eta"] for t in g}) == 1  # type: ignore[union-attr]
            for g in groups
        ),
        "outputs": outputs(traces),
        "is_generating": [t.completed["output"]["is_generating"] for t in traces],
        "kinds": kinds(traces),
    }


def _max_size_summary(traces: list[Trace]) -> dict[str, Any]:
    return {
        "statuses": [t.join_status for t in traces],
        "bodies": [t.join_body for t in traces if t.join_status != 200],
    }


SCENARIOS: dict[str, Scenario] = {
    "echo_messages": Scenario(
        [Job("echo", ["hello"])],
        lambda ts: {"messages": messages(ts)},
        {
            "messages": [
                [
                    {
                        "msg": "estimation",
                        "event_id": "<id>",
                        "rank": 0,
                        "queue_size": 1,
                        "rank_eta": "<any>",
                    },
                    {"msg": "process_starts", "event_id": "<id>", "eta": "<any>"},
                    {
                        "msg": "process_completed",
                        "event_id": "<id>",
                        "output": {
                            "data": ["hello"],
                            "is_generating": False,
                            "duration": "<number>",
                            "average_duration": "<number>",
                            "render_config": None,
                            "changed_state_ids": [],
                            "used_cache": None,
                        },
                        "success": True,
                        "title": None,
                        "used_cache": None,
                        "cache_duration": "<number>",
                        "avg_time": "<number>",
                    },
                ]
            ]
        },
    ),
    "limit_1_serialises": Scenario(
        burst("sleep_1", 3, spacing_s=0.05),
        lambda ts: {"max_overlap": max_overlap(ts), "dispatches": batch_sizes(ts), "kinds": kinds(ts)},
        # The third job is re-estimated when the second is dispatched (status_update_rate "auto"). The
        # first runs before the second joins, and the second is queued before the third (else the burst
        # runs again: a busy box's Gradio dispatched the first after the second's join, or queued the
        # third first, and so re-estimated the second instead).
        {"max_overlap": 1, "dispatches": [1, 1, 1], "kinds": [PLAIN, PLAIN, RE_ESTIMATED]},
        landed=lambda ts: landed(ts) and running_before(ts[:1], ts[1]) and queued_in_order(ts[1:]),
    ),
    "limit_n_runs_n": Scenario(
        burst("sleep_n_long", 5, spacing_s=0.01),
        lambda ts: {"max_overlap": max_overlap(ts), "started_at_once": started_before_first_completion(ts)},
        {"max_overlap": 3, "started_at_once": 3},
    ),
    "concurrency_id_lowest_limit": Scenario(
        # shared_b (limit 1) joins first, so Gradio's lazily lowered group limit is already 1.
        # Ranks and queue sizes count the whole group, whichever function an event belongs to.
        # x1 joins 0.1 s in, once x0 runs (it landed only if its first estimation says so: a busy box's
        # Gradio dispatched x0 more than 30 ms after its join, and x1 then waited behind it), x2 while
        # x1 waits
        [Job(fn, [f"x{i}"], at_s=i * 0.1) for i, fn in enumerate(["shared_b", "shared_a", "shared_a"])],
        lambda ts: {
            "max_overlap": max_overlap(ts),
            "dispatches": batch_sizes(ts),
            "estimations": estimations(ts),
        },
        {"max_overlap": 1, "dispatches": [1, 1, 1], "estimations": [[(0, 1)], [(0, 1)], [(1, 2), (0, 1)]]},
        landed=lambda ts: landed(ts) and estimations(ts[1:2])[0][:1] == [(0, 1)],
    ),
    "batch_skips_other_functions_in_its_group": Scenario(
        # One group, limit 1: a batch takes the later events of its own function and leaves the
        # other function's waiting event in place, which then runs last. One session, so the joins
        # reach the queue in this order (each awaited; from separate connections 10 ms apart, a busy
        # box's client sent p2 before b1), behind an event that holds the group until all have joined.
        [
            Job(fn, [f"{fn[6]}{i}"], session="m", at_s=i * 0.01)
            for i, fn in enumerate(
                ["mixed_hold", "mixed_batch", "mixed_plain", "mixed_batch", "mixed_batch"]
            )
        ],
        lambda ts: {
            "dispatch_members": [sorted(t.job.data[0] for t in g) for g in dispatch_groups(ts)],
            "outputs": outputs(ts),
        },
        {
            "dispatch_members": [["h0"], ["b1", "b3", "b4"], ["p2"]],
            "outputs": [["h0"], ["b1"], ["p2"], ["b3"], ["b4"]],
        },
    ),
    "batch_burst": Scenario(
        # x0 runs alone (0.5 s); x1-x5 join 0.1 s in, one session so in order, well before it ends (a
        # busy box's separate joins 10 ms apart, behind a 0.2 s batch, never landed in 3 attempts)
        [Job("batch", ["x0"], session="b"),
         *[Job("batch", [f"x{i}"], session="b", at_s=0.1 + 0.01 * i) for i in range(1, 6)]],
        _batch_summary,
        {
            "dispatches": [1, 4, 1],
            "one_eta_per_batch": True,
            "outputs": [[f"x{i}"] for i in range(6)],
            "is_generating": [None] * 6,
            "kinds": [PLAIN] * 5 + [RE_ESTIMATED],
        },
    ),
    "one_session_three_jobs": Scenario(
        burst("sleep_1", 3, session="s"),
        lambda ts: {
            "kinds": kinds(ts),
            "ranks": [[m.body["rank"] for m in t.all("estimation")] for t in ts],
            "queue_sizes": [[m.body["queue_size"] for m in t.all("estimation")] for t in ts],
        },
        {
            "kinds": [PLAIN, PLAIN, RE_ESTIMATED],
            "ranks": [[0], [0], [1, 0]],
            "queue_sizes": [[1], [1], [2, 1]],
        },
    ),
    "generator_diffs": Scenario(
        [Job("stream", ["x"])],
        lambda ts: {
            "kinds": kinds(ts),
            "data": [
                m.body["output"]["data"]
                for m in ts[0].messages
                if m.msg in ("process_generating", "process_completed")
            ],
            "generating": [normalise(m.body) for m in ts[0].all("process_generating")][:1],
        },
        {
            "kinds": [["estimation", "process_starts"] + ["process_generating"] * 4 + ["process_completed"]],
            "data": [
                ["x"],
                [[["append", [], " 1"]]],
                [[["append", [], " 2"]]],
                [[["append", [], " 3"]]],
                ["x 1 2 3"],
            ],
            "generating": [
                {
                    "msg": "process_generating",
                    "event_id": "<id>",
                    "output": {
                        "data": ["x"],
                        "is_generating": True,
                        "duration": "<number>",
                        "average_duration": "<number>",
                        "render_config": None,
                        "changed_state_ids": [],
                        "used_cache": None,
                    },
                    "success": True,
                    "time_limit": None,
                }
            ],
        },
    ),
    "error_hidden": Scenario(
        [Job("fail", ["x"])],
        lambda ts: {"kinds": kinds(ts), "completed": normalise(ts[0].completed)},
        {
            "kinds": [PLAIN],
            "completed": {
                "msg": "process_completed",
                "event_id": "<id>",
                "output": {"error": None},
                "success": False,
                "title": "Error",
                "used_cache": None,
                "cache_duration": None,
                "avg_time": None,
            },
        },
    ),
    "error_user_visible": Scenario(
        [Job("gr_error", ["x"])],
        # The payload's duration is gr.Error's display time, not a measurement: compared exactly.
        lambda ts: {"output": ts[0].completed["output"], "completed": normalise(ts[0].completed)},
        {
            "output": {"error": "synthetic failure", "duration": 5.0, "visible": True, "title": "Oops"},
            "completed": {
                "msg": "process_completed",
                "event_id": "<id>",
                "output": {
                    "error": "synthetic failure",
                    "duration": "<number>",
                    "visible": True,
                    "title": "Oops",
                },
                "success": False,
                "title": "Oops",
                "used_cache": None,
                "cache_duration": None,
                "avg_time": None,
            },
        },
    ),
    "batch_error_fails_the_whole_batch": Scenario(
        # Three joins 10 ms apart: the first runs alone and the other two wait for it together, or (a busy
        # client sends two at once) two run first; either way some dispatch holds two or more, and each of
        # its jobs fails with it. Which dispatch is the batch is the client's timing, not the queue's.
        burst("batch_fail", 3, spacing_s=0.01),
        lambda ts: {"dispatches": sum(batch_sizes(ts)), "batched": max(batch_sizes(ts)) >= 2,
                    "completed": [normalise(t.completed) for t in ts]},
        {
            "dispatches": 3,
            "batched": True,
            "completed": [
                {
                    "msg": "process_completed",
                    "event_id": "<id>",
                    "output": {"error": None},
                    "success": False,
                    "title": "Error",
                    "used_cache": None,
                    "cache_duration": None,
                    "avg_time": None,
                }
            ]
            * 3,
        },
    ),
    "max_threads_caps_total": Scenario(
        # three of sleep_n (limit 3) could run at once but for max_threads=2: landed once all three
        # joined before the first completed (a busy box's sleep_1 joined 0.19 s late, past that, which
        # did not matter: the cap was already tested by the three)
        burst("sleep_n", 3, spacing_s=0.01) + [Job("sleep_1", ["y"], at_s=0.03)],
        lambda ts: {"max_overlap": max_overlap(ts)},
        {"max_overlap": 2},
        tight=True,
        landed=lambda ts: landed(ts[:3]) and seen_running(ts),
    ),
    "concurrency_id_limit_is_lazy": Scenario(
        # Gradio sets a group's limit at push time: until shared_b (limit 1) has been pushed, the
        # group runs at shared_a's limit 2. Runs on the tight app, where `shared` is untouched.
        # The first two join back to back from one session, so they land well within their 0.5 s; b once
        # they are done, the last two while b runs.
        [Job("shared_a", ["a0"], session="lazy"), Job("shared_a", ["a1"], session="lazy")]
        + [Job("shared_b", ["b"], at_s=0.8)]
        + [Job("shared_a", [f"a{i}"], at_s=0.83 + 0.05 * i) for i in range(2, 4)],
        lambda ts: {"before_b": max_overlap(ts[:2]), "after_b": max_overlap(ts[2:])},
        {"before_b": 2, "after_b": 1},
        tight=True,
        landed=lambda ts: landed(ts[:2]),
        repeatable=False,
    ),
    "max_size_503": Scenario(
        # max_threads=2: long_a and long_b run (1 s each); then 3 events wait in two groups (= max_size
        # 3), so joins for sleep_n and echo, whose groups are idle, are refused too: the count is global
        # and covers waiting events only. The joins come 0.2-0.35 s in, well inside the 1 s window.
        [
            Job("long_a", ["r0"]),
            Job("long_b", ["h0"], at_s=0.01),
            *[Job(fn, [f"w{i}"], at_s=0.2 + 0.03 * i) for i, fn in enumerate(["long_a", "long_b", "long_b"])],
            Job("sleep_n", ["n"], at_s=0.3),
            Job("echo", ["e"], at_s=0.35),
        ],
        _max_size_summary,
        {
            "statuses": [200, 200, 200, 200, 200, 503, 503],
            "bodies": [{"detail": "Queue is full. Max size is 3 and size is 3."}] * 2,
        },
        tight=True,
        landed=lambda ts: landed(ts) and running_before(ts[:2], ts[2]) and answered_in_order(ts[2:]),
    ),
}


def matches(actual: Any, expected: Any) -> bool:
    """Equality where the expected value "<any>" matches anything (a value that varies by run)."""
    if expected == "<any>":
        return True
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(matches(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            matches(a, e) for a, e in zip(actual, expected, strict=True)
        )
    return bool(actual == expected)
