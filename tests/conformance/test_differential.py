"""Differential: the same functions on real Gradio 6.x and on the reference server, driven alike.

Both servers get the same scenarios in the same order (so their histories, e.g. which functions
already have an average job time, agree) and must show the same observable behaviour: message
sequences and bodies (ids and measured times normalised), realised concurrency, batch sizes, 503 at
max_size, ETA shapes and formula. Deliberate differences are tests of their own, named `test_differs_*`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .driver import Job, Trace, new_http, run_burst
from .flows import (
    cancel_flow,
    cancel_running_flow,
    cancel_then_ranks_flow,
    direct_run,
    disconnect_flow,
    disconnect_generator_flow,
    disconnect_running_flow,
    eta_bursts,
    raw_post,
    repeat_until_landed,
    same_session_cancel_flow,
    simple_api_call,
)
from .scenarios import SCENARIOS, Scenario, landed, matches, run_scenario, running_before

SERVERS = ("gradio", "reference")
URLs = dict[str, tuple[str, str]]


def on_both(urls: URLs, run: Any, tight: bool = False) -> dict[str, Any]:
    """Run `run(url)` on Gradio, then on the reference server."""
    return {name: run(urls[name][1 if tight else 0]) for name in SERVERS}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_agrees(name: str, both_urls: URLs) -> None:
    scenario = SCENARIOS[name]
    seen = on_both(both_urls, lambda url: run_scenario(url, scenario), scenario.tight)
    assert seen["reference"] == seen["gradio"], (
        f"{name}: reference {seen['reference']}\n gradio {seen['gradio']}"
    )
    assert matches(seen["gradio"], scenario.expected), f"{name}: Gradio itself changed: {seen['gradio']}"


EtaView = list[list[tuple[Any, ...]]]  # per event: (rank, queue_size, rank_eta) of each estimation


def eta_view(traces: list[Trace]) -> EtaView:
    return [
        [(m.body["rank"], m.body["queue_size"], m.body["rank_eta"]) for m in t.all("estimation")]
        for t in traces
    ]


def shape(view: EtaView) -> list[list[tuple[Any, ...]]]:
    """(rank, queue_size, rank_eta is null) per estimation: must match exactly."""
    return [[(rank, size, eta is None) for rank, size, eta in event] for event in view]


def starts_eta(trace: Trace) -> float:
    """process_starts.eta: the function's mean job time at that moment."""
    message = trace.first("process_starts")
    assert message is not None and isinstance(message.body["eta"], float), trace.kinds
    return float(message.body["eta"])


# Numeric ETAs depend on each server's measured mean job time, which includes event-loop stalls on
# a busy machine (Gradio's more than the reference server's). So the numbers are checked against
# Gradio's formula with each server's own mean (process_starts.eta), not against each other.


def test_eta_values_follow_gradios_formula_on_both(both_urls: URLs) -> None:
    seen = on_both(both_urls, lambda url: asyncio.run(eta_bursts(url)))
    views = {name: [eta_view(s.stream.traces) for s in seen[name]] for name in SERVERS}
    assert [shape(v) for v in views["reference"]] == [shape(v) for v in views["gradio"]]
    for name in SERVERS:
        first, second = (s.stream.traces for s in seen[name])
        (first_view, second_view) = views[name]
        mean = starts_eta(first[1])  # sent at the dispatch that re-estimated job 2
        rebroadcast = first_view[2][-1][2]  # own mean + (0..1) x the running job's remaining time
        assert mean - 0.02 <= rebroadcast <= 2 * mean + 0.05, (name, views[name])
        idle = second_view[0][0][2]  # an idle group: exactly the mean
        assert abs(idle - starts_eta(second[0])) < 0.02, (name, views[name])
        behind = second_view[1][0][2]
        assert idle - 0.02 <= behind <= 2 * idle + 0.05, (name, views[name])


def test_eta_when_max_threads_is_the_bottleneck_agrees(both_urls: URLs) -> None:
    """Four sleep_n_long jobs (limit 3) on max_threads=2: two wait for a thread, not for their group.

    Gradio's ETA looks at the group only (free capacity: no time to a free worker), so a waiting
    event at rank r gets mean + r x mean / limit, however busy the threads are.
    """
    # 250 ms apart: each job taken from the queue before the next joins, and the fourth (at 750 ms) joins
    # while the first two still sleep their 1 s. It lands only so: a box with six test workers beside
    # four busy loops joined the second before a thread took the first at 10 and at 50 ms apart, and
    # answered joins 0.27 s late, past 200 ms jobs (sleep_n)
    burst = Scenario(
        [Job("sleep_n_long", [f"t{i}"], at_s=0.25 * i) for i in range(4)], lambda ts: {"traces": ts}, {},
        landed=lambda ts: running_before(ts[:1], ts[1]) and running_before(ts[:2], ts[2]) and landed(ts),
    )

    def observe(url: str) -> list[Trace]:
        run_burst(url, [Job("sleep_n_long", ["warm"])])  # a mean job time exists from now on
        traces: list[Trace] = run_scenario(url, burst)["traces"]
        return traces

    expected_shape = [[(0, 1, False)], [(0, 1, False)], [(0, 1, False)], [(1, 2, False), (0, 1, False)]]
    seen = on_both(both_urls, observe, tight=True)
    views = {name: eta_view(seen[name]) for name in SERVERS}
    assert shape(views["gradio"]) == shape(views["reference"]) == expected_shape
    for name in SERVERS:
        mean = views[name][2][0][2]
        assert abs(views[name][3][0][2] - mean * (1 + 1 / 3)) < 0.02, (name, views[name])
        assert abs(views[name][3][1][2] - starts_eta(seen[name][2])) < 0.02, (name, views[name])


def test_disconnect_agrees(both_urls: URLs) -> None:
    seen = on_both(both_urls, lambda url: asyncio.run(repeat_until_landed(disconnect_flow, url)))
    assert seen["reference"] == seen["gradio"]


def test_cancel_of_another_sessions_waiting_job_agrees(both_urls: URLs) -> None:
    def observe(url: str) -> dict[str, Any]:
        result = asyncio.run(repeat_until_landed(cancel_flow, url))
        return {
            "reply": result["reply"],
            "unknown": result["unknown"],
            "waiter": [m.msg for m in result["waiter"].trace.messages],
            "holder": result["holder"].trace.kinds,
        }

    seen = on_both(both_urls, observe)
    assert seen["reference"] == seen["gradio"]


def test_cancel_of_a_running_job_agrees(both_urls: URLs) -> None:
    seen = on_both(both_urls, lambda url: asyncio.run(repeat_until_landed(cancel_running_flow, url)))
    assert seen["reference"] == seen["gradio"]


@pytest.mark.parametrize(
    "flow",
    [disconnect_running_flow, disconnect_generator_flow, cancel_then_ranks_flow],
    ids=lambda f: f.__name__,
)
def test_flow_agrees(flow: Any, both_urls: URLs) -> None:
    seen = on_both(both_urls, lambda url: asyncio.run(repeat_until_landed(flow, url)))
    assert seen["reference"] == seen["gradio"]


@pytest.mark.parametrize("api_name", ["echo", "stream", "fail", "gr_error", "batch"])
def test_simple_call_api_agrees(api_name: str, both_urls: URLs) -> None:
    """/call/<api>: named SSE events (generating, complete, error) carrying full values."""
    seen = on_both(both_urls, lambda url: asyncio.run(simple_api_call(url, api_name, ["x"])))
    assert seen["reference"] == seen["gradio"]


@pytest.mark.parametrize("api_name", ["echo", "fail", "gr_error", "batch"])
def test_direct_run_api_agrees(api_name: str, both_urls: URLs) -> None:
    """/run/<api>: the function called outside the queue; 200 with the output, 500 with the error."""
    seen = on_both(both_urls, lambda url: asyncio.run(direct_run(url, api_name, ["x"])))
    assert seen["reference"] == seen["gradio"]


DEPENDENCY_KEYS = (
    "id",
    "queue",
    "batch",
    "max_batch_size",
    "types",
    "api_visibility",
    "backend_fn",
    "connection",
)
PARAMETER_KEYS = (
    "parameter_name",
    "parameter_has_default",
    "parameter_default",
    "type",
    "python_type",
    "component",
)


async def discovery(url: str) -> dict[str, Any]:
    """What a client reads before calling: /config (protocol, dependencies) and /info (signatures)."""
    async with new_http() as http:
        async with http.get(f"{url}/config") as resp:
            config = await resp.json()
        async with http.get(f"{url}/gradio_api/info") as resp:
            info = await resp.json()
    top = {
        k: config.get(k)
        for k in ("protocol", "api_prefix", "enable_queue", "connect_heartbeat", "show_error")
    }
    deps = {
        d["api_name"]: {k: d.get(k) for k in DEPENDENCY_KEYS} for d in config["dependencies"] if d["api_name"]
    }
    endpoints = {
        name: {
            "parameters": [{k: p.get(k) for k in PARAMETER_KEYS} for p in ep["parameters"]],
            "returns": [{k: r.get(k) for k in ("type", "python_type", "component")} for r in ep["returns"]],
            "api_visibility": ep["api_visibility"],
        }
        for name, ep in info["named_endpoints"].items()
    }
    return {"config": top, "dependencies": deps, "info": endpoints, "unnamed": info["unnamed_endpoints"]}


def test_discovery_agrees(both_urls: URLs) -> None:
    """/config and /info describe the same functions the same way (labels and code snippets aside)."""
    seen = on_both(both_urls, lambda url: asyncio.run(discovery(url)))
    assert seen["reference"] == seen["gradio"]


# ---------------------------------------------------------------- deliberate differences


def test_differs_unknown_fn_index_is_4xx_not_500(both_urls: URLs) -> None:
    """Gradio answers a join for a fn_index it does not have with a bare 500 (a KeyError escapes);
    the reference server answers 4xx with a message instead."""
    body = {"data": ["x"], "fn_index": 999, "session_hash": "s-unknown-fn"}
    seen = on_both(both_urls, lambda url: asyncio.run(raw_post(url, "/queue/join", body)))
    assert seen["gradio"] == (500, "Internal Server Error")
    status, detail = seen["reference"]
    assert 400 <= status < 500 and "999" in str(detail)


def test_differs_cancel_hits_one_event_not_the_sessions_running_job(both_urls: URLs) -> None:
    """/cancel in Gradio cancels every running task of (session, fn_index): cancelling a waiting job
    also kills the same session's running job, which then never completes. The reference server
    cancels only the named event."""
    seen = on_both(both_urls, lambda url: asyncio.run(same_session_cancel_flow(url)))
    assert seen["gradio"]["first"] == ["estimation", "process_starts"]
    assert seen["reference"]["first"] == ["estimation", "process_starts", "process_completed"]
    assert seen["gradio"]["second_completed"] and seen["reference"]["second_completed"]


def test_differs_wrong_input_count_is_rejected_at_join(both_urls: URLs) -> None:
    """Gradio accepts a join whose `data` has the wrong number of inputs and fails the job
    ({"error": null}, like any preprocessing error); the reference server refuses the join (422)."""
    seen = on_both(both_urls, lambda url: run_burst(url, [Job("echo", [])])[0])
    gradio, reference = seen["gradio"], seen["reference"]
    assert gradio.join_status == 200 and gradio.kinds == ["estimation", "process_starts", "process_completed"]
    assert gradio.completed["output"] == {"error": None} and gradio.completed["success"] is False
    assert reference.join_status == 422 and "input" in str(reference.join_body["detail"])


def test_differs_run_on_a_generator_returns_the_final_value(both_urls: URLs) -> None:
    """/run on a generator: Gradio keeps no iterator there, so it answers the FIRST value with
    is_generating true; the reference server runs the generator out and answers the final value."""
    seen = on_both(both_urls, lambda url: asyncio.run(direct_run(url, "stream", ["x"])))
    status, body = seen["gradio"]
    assert (status, body["data"], body["is_generating"]) == (200, ["x"], True)
    status, body = seen["reference"]
    assert (status, body["data"], body["is_generating"]) == (200, ["x 1 2 3"], False)
