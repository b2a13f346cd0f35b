"""The simulator against the real reference server: same queue rules, same load, close figures.

qbench may not import the reference server's queue (tests/test_layout.py), so qbench.tune.search.simulate
mirrors its rules; this test checks the mirror on configurations where each rule decides the figures:
greedy batching on one worker, a concurrency group shared by two functions (the lowest limit wins),
the max_threads cap across groups, and queueing delay under open-loop Poisson arrivals. The service time
is the sleep workload's own l(b) = base + per_item * b plus the overhead the server took per request in
this run (the median of its measured service less the sleep): a few ms on a quiet box, tens on a busy
one, where the sleep alone made the simulated figures the box's speed and not the queue's rules.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench.run.records import RequestRecord
from qbench.run.scenario.scenario import parse_scenario
from qbench.run.scenario.schedule import OpenPlan, plan
from qbench.tune.knobs.grid import Point
from qbench.tune.points.point import point_result, run_measured
from qbench.tune.search.batch_model import BatchFit
from qbench.tune.search.simulate import (
    ClosedArrivals,
    OpenArrivals,
    SimFunction,
    SimServer,
    simulate,
)
from qbench.tune.servers.server_process import start_reference_server
from qbench.tune.values.constraints import Constraints


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
        {"users": 8, "duration": 3},
        id="batching",
    ),
    pytest.param(  # a shared group, limits 3 and 1, only `predict` called: its limit 3 holds (Gradio
        # lowers a group's limit only for functions pushed to it) -> 3 / 40 ms = 75 req/s
        {"functions": [fn("predict", 40, concurrency_id="shared", concurrency_limit=3),
                       fn("other", 40, concurrency_id="shared", concurrency_limit=1)]},
        SimServer((SimFunction(sleep_fit(40), group="shared", limit=3),
                   SimFunction(sleep_fit(40), group="shared", limit=1, share=0.0))),
        {"users": 6, "duration": 3},
        id="shared-group",
    ),
    pytest.param(  # max_threads 2 caps a limit of 8 -> 2 / 50 ms = 40 req/s
        {"functions": [fn("predict", 50, concurrency_limit=8)], "launch": {"max_threads": 2}},
        SimServer((SimFunction(sleep_fit(50), limit=8),), max_threads=2),
        {"users": 8, "duration": 3},
        id="max-threads",
    ),
    pytest.param(  # open loop, Poisson 14 req/s on one 50 ms worker (rho 0.7): waiting dominates p95
        {"functions": [fn("predict", 50, concurrency_limit=1)]},
        SimServer((SimFunction(sleep_fit(50), limit=1),)),
        {"rate": 14, "arrival": "poisson", "duration": 6},
        id="poisson-queueing",
    ),
]


def with_overhead(server: SimServer, records: list[RequestRecord]) -> SimServer:
    """The called function's (the first's) base raised by the median of what each measured request's
    service took beyond its sleep, base + per_item x its batch's size (never lowered)."""
    called = server.functions[0]
    fit = called.fit
    extra = [r.service_s - fit.t0_s - fit.alpha_s * (r.server_batch_size or 1) for r in records
             if r.ok and not r.warmup and r.service_s is not None]
    assert len(extra) >= 20, len(extra)
    overhead = max(float(np.median(extra)), 0.0)
    functions = (replace(called, fit=replace(fit, t0_s=fit.t0_s + overhead)), *server.functions[1:])
    return replace(server, functions=functions)


@pytest.mark.parametrize(("server_config", "sim_server", "load"), CASES)
def test_simulator_matches_the_reference_server(
    tmp_path: Path, server_config: dict[str, Any], sim_server: SimServer, load: dict[str, Any]
) -> None:
    scenario = parse_scenario({
        "name": "differential", "protocol": "gradio", "endpoint": {"api_name": "predict"},
        "payload": {"inputs": [{"text": {"words": [2, 3]}}]}, "load": {**load, "timeout": 10},
    })
    # the server in its own process, as in production: in this one it shared the GIL with the load
    # generator, and its service time stretched with it (a quiet box measured p50 0.225 s against the
    # simulated 0.092 at 70% load, where queueing amplifies any stretch)
    with start_reference_server(server_config) as url:
        run = run_measured(scenario, {}, url, tmp_path / "run", {}, None)
    measured = point_result(Point({}), [run.summary], Constraints(), "ok", "", {})
    sim_server = with_overhead(sim_server, run.records)
    scheduled = plan(scenario.load, seed=0)
    arrivals = (OpenArrivals(scheduled.offsets) if isinstance(scheduled, OpenPlan)
                else ClosedArrivals(load["users"], duration_s=load["duration"]))
    runs = [simulate(sim_server, arrivals, seed=seed) for seed in range(5)]
    sim_x = sum(r.throughput_rps for r in runs) / len(runs)
    sim_p50 = sum(r.percentile(50) or 0 for r in runs) / len(runs)
    assert measured.throughput_rps == pytest.approx(sim_x, rel=0.2)
    assert measured.p50_latency_s is not None
    # loopback + server overhead: a few ms per request on top of the simulated queue
    assert sim_p50 * 0.8 - 0.005 <= measured.p50_latency_s <= sim_p50 * 1.3 + 0.03
