"""The simulator against the real reference server: same queue rules, same arrivals, close figures.

qbench may not import the reference server's queue (tests/test_layout.py), so qbench.tune.search.simulate
mirrors its rules; this test checks the mirror on configurations where each rule decides the figures:
greedy batching on one worker, a concurrency group shared by two functions (the lowest limit wins),
the max_threads cap across groups, and queueing delay under open-loop Poisson arrivals.

What the box cannot move: the simulator replays the sends the run really made (on a busy box a
closed-loop user sends late, and the queue then holds fewer than the users), each request's time is
read on the server's own clock (its queue wait and its processing: a busy client reads a stream's
messages late and together, a 40 ms service as 1.2 s or as 5 ms), and the service time is the sleep
workload's own l(b) = base + per_item * b plus the overhead the server took per request in this run
(the median of its own processing time less the sleep). Figures are medians and p90s, and the load is
sized in requests, so a request the box stalls for a second moves none of them. What would move them
is a wrong rule: a batch that does not fill, a limit not shared or not capped, and the waits it makes.
A host that takes the server's own core away (its event loop waiting for one, which its /status
counts) can only make the server slower than its rules, never faster: the upper bounds are checked
where its loop waited for a core under 2% of the run (a busy box's 1.2 s stall at 70% load queues
the next 4 s of arrivals), the lower ones always.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench.run.control import read_status
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import parse_scenario
from qbench.tune.points.measure import run_measured
from qbench.tune.search.batch_model import BatchFit
from qbench.tune.search.simulate import (
    OpenArrivals,
    SimFunction,
    SimServer,
    simulate,
)
from qbench.tune.servers.server_process import start_reference_server


def sleep_fit(base_ms: float, per_item_ms: float = 0.0) -> BatchFit:
    return BatchFit(base_ms / 1e3, per_item_ms / 1e3, 0.0, 0.0, 1.0, 2, 2)


def fn(api: str, base_ms: float, **extra: Any) -> dict[str, Any]:
    per_item = extra.pop("per_item_ms", 0)
    return {"api_name": api, "workload": "sleep", "params": {"base_ms": base_ms, "per_item_ms": per_item},
            **extra}


CASES = [
    pytest.param(  # greedy batching: 8 users on one worker, batches of 4 -> 4 / l(4) = 44 req/s
        {"functions": [fn("predict", 50, per_item_ms=10, batch=True, max_batch_size=4, concurrency_limit=1)]},
        SimServer((SimFunction(sleep_fit(50, 10), limit=1, batch=True, max_batch_size=4),)),
        {"users": 8, "requests": 120},
        id="batching",
    ),
    pytest.param(  # a shared group, limits 3 and 1, only `predict` called: its limit 3 holds (Gradio
        # lowers a group's limit only for functions pushed to it) -> 3 / 40 ms = 75 req/s
        {"functions": [fn("predict", 40, concurrency_id="shared", concurrency_limit=3),
                       fn("other", 40, concurrency_id="shared", concurrency_limit=1)]},
        SimServer((SimFunction(sleep_fit(40), group="shared", limit=3),
                   SimFunction(sleep_fit(40), group="shared", limit=1, share=0.0))),
        {"users": 6, "requests": 120},
        id="shared-group",
    ),
    pytest.param(  # max_threads 2 caps a limit of 8 -> 2 / 50 ms = 40 req/s
        {"functions": [fn("predict", 50, concurrency_limit=8)], "launch": {"max_threads": 2}},
        SimServer((SimFunction(sleep_fit(50), limit=8),), max_threads=2),
        {"users": 8, "requests": 120},
        id="max-threads",
    ),
    pytest.param(  # open loop, Poisson 14 req/s on one 50 ms worker (rho 0.7): waiting dominates p95
        {"functions": [fn("predict", 50, concurrency_limit=1)]},
        SimServer((SimFunction(sleep_fit(50), limit=1),)),
        {"rate": 14, "arrival": "poisson", "requests": 100},
        id="poisson-queueing",
    ),
]


def with_overhead(server: SimServer, records: list[RequestRecord]) -> SimServer:
    """The called function's (the first's) base raised by the median of what each measured request's
    processing took on the server's clock beyond its sleep, base + per_item x its batch's size (never
    lowered)."""
    called = server.functions[0]
    fit = called.fit
    extra = [r.server_total_s - fit.t0_s - fit.alpha_s * (r.server_batch_size or 1) for r in records
             if r.ok and not r.warmup and r.server_total_s is not None]
    assert len(extra) >= 20, len(extra)
    overhead = max(float(np.median(extra)), 0.0)
    functions = (replace(called, fit=replace(fit, t0_s=fit.t0_s + overhead)), *server.functions[1:])
    return replace(server, functions=functions)


def per_batch_mean(records: list[RequestRecord]) -> float:
    """The mean batch size over batches, from each request's own: a batch of b has b requests."""
    sizes = [r.server_batch_size or 1 for r in records]
    return len(sizes) / sum(1 / b for b in sizes)


STARVED = 0.02  # of the run the server's event loop waited for a core (0.5% quiet or beside busy loops;
# 9% beside six test workers tripled an open loop's p90 at 70% load)


def loop_wait_s(url: str) -> float | None:
    """How long the server's event loop has waited for a core since it started (its /status)."""
    status = read_status(url)
    value = status.get("event_loop_wait_s") if status else None
    return float(value) if isinstance(value, (int, float)) else None


def on_server(record: RequestRecord) -> float:
    """The request's time in the server, on its own clock: its queue wait and its processing."""
    assert record.server_queue_wait_s is not None and record.server_total_s is not None, record
    return record.server_queue_wait_s + record.server_total_s


def replayed_sends(records: list[RequestRecord]) -> np.ndarray:
    """The sends, seconds from the first, sorted; those the server took in its first batch at 0 together.

    Near-simultaneous sends (a closed loop's opening burst, microseconds apart on the client's clock)
    reach an idle server in an order and grouping that the client's clock cannot tell: one server takes
    the first alone and the rest as the next batch, another takes four at once, and with a closed loop
    the phase it starts in holds all run (a batch of 1 first costs every later request ~60 ms). The
    replay starts as the server did: its first batch (the request it took first, on its own clock, and
    the batch that request was in) arrives at one instant, the rest as sent."""
    first = min(r.sent_at_s or 0.0 for r in records)
    opened = min(records, key=lambda r: (r.sent_at_s or 0.0) + (r.server_queue_wait_s or 0.0))
    size = opened.server_batch_size or 1
    sends = np.sort(np.array([(r.sent_at_s or 0.0) - first for r in records]))
    sends[:size] = 0.0
    sends[size:] = np.maximum(sends[size:], 1e-6)
    return sends


def digest(records: list[RequestRecord]) -> str:
    """The five slowest requests' phases (the client's, then the server's), for a failure's message."""
    slow = sorted(records, key=lambda r: -(r.latency_from_send_s or 0.0))[:5]
    return "; ".join(f"#{r.request_id} sent {r.sent_at_s:.3f} wait {r.queue_wait_s} service {r.service_s} "
                     f"(server {r.server_queue_wait_s} + {r.server_total_s}) {r.outcome}" for r in slow)


@pytest.mark.parametrize(("server_config", "sim_server", "load"), CASES)
def test_simulator_matches_the_reference_server(
    tmp_path: Path, server_config: dict[str, Any], sim_server: SimServer, load: dict[str, Any]
) -> None:
    def scenario(name: str, load: dict[str, Any]) -> Any:
        return parse_scenario({
            "name": name, "protocol": "gradio", "endpoint": {"api_name": "predict"},
            "payload": {"inputs": [{"text": {"words": [2, 3]}}]}, "load": {**load, "timeout": 30},
        })

    # the server in its own process, as in production: in this one it shared the GIL with the load
    # generator, and its service time stretched with it (a quiet box measured p50 0.225 s against the
    # simulated 0.092 at 70% load, where queueing amplifies any stretch)
    with start_reference_server(server_config) as url:
        run_measured(scenario("warm", {"users": 2, "requests": 8}), {}, url, tmp_path / "warm", {}, None)
        before, started = loop_wait_s(url), time.monotonic()
        run = run_measured(scenario("differential", load), {}, url, tmp_path / "run", {}, None)
        after, elapsed = loop_wait_s(url), time.monotonic() - started
    starved = None if before is None or after is None else (after - before) / elapsed
    records = sorted((r for r in run.records if r.ok and r.sent_at_s is not None), key=lambda r: r.request_id)
    assert len(records) == load["requests"], digest(run.records)
    sim_server = with_overhead(sim_server, records)
    sends = replayed_sends(records)
    runs = [simulate(sim_server, OpenArrivals(sends), seed=seed) for seed in range(3)]
    latencies = np.array([on_server(r) for r in records])
    sim_p50, sim_p90 = (float(np.median([r.percentile(q) or 0.0 for r in runs])) for q in (50, 90))
    measured_p50, measured_p90 = (float(np.percentile(latencies, q)) for q in (50, 90))
    detail = (f"simulated p50 {sim_p50:.3f} s p90 {sim_p90:.3f}, measured {measured_p50:.3f} s "
              f"{measured_p90:.3f}; server loop's core wait {starved}; slowest: {digest(records)}")
    # the sends' trip to the server is not in its clock; the tail (where an open loop's waiting shows)
    # a little looser: fewer requests decide it
    assert sim_p50 * 0.8 - 0.005 <= measured_p50 and sim_p90 * 0.7 - 0.01 <= measured_p90, detail
    own_core = starved is None or starved < STARVED
    if own_core:
        assert measured_p50 <= sim_p50 * 1.3 + 0.03 and measured_p90 <= sim_p90 * 1.5 + 0.05, detail
    if any(f.batch for f in sim_server.functions):  # the batches filled as the rule says they do (a slow
        sim_batch = float(np.median([r.mean_batch for r in runs]))  # server's fill more)
        assert per_batch_mean(records) >= 0.8 * sim_batch, detail
        if own_core:
            assert per_batch_mean(records) <= 1.2 * sim_batch, detail
