"""`qbench capacity` on servers whose sustainable rate is known: the answer never exceeds the ceiling and
reaches at least 85% of it, and a probe above the ceiling fails as not steady even when its p95 passes.

    hard ceiling   reference server, sleep 100 ms, concurrency_limit 4: 40 req/s
    degrading      the same, plus a queue whose dispatch stalls 0.1 ms per waiting event: 40 req/s while
                   the queue stays short, and throughput falls once a long one forms (past the ceiling)
    batched        batches of up to 8 at 50 ms + 10 ms per item, one worker: 8 / 0.13 s = 61.5 req/s
    plain HTTP     the hard ceiling's function behind the reference server's plain HTTP front
                   (POST /predict/predict, no Gradio protocol, no start event): 40 req/s

Each server runs in its own process (as in production: the load generator does not share its GIL).
Bounded: 5 s confirmations, bisection probes of at most 6 s (the full 60 s confirmation is what
docs/capacity.md measures).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.tune.capacity.command import (
    CapacityRun,
    capacity_config,
    capacity_prober,
    run_capacity,
)
from qbench.tune.servers.server_process import start_reference_server
from qbench.tune.servers.settle import wait_for_empty_queue

pytestmark = pytest.mark.slow

SLEEP = {"api_name": "predict", "workload": "sleep", "params": {"base_ms": 100, "per_item_ms": 0},
         "concurrency_limit": 4}
BATCHED = {"api_name": "predict", "workload": "sleep", "params": {"base_ms": 50, "per_item_ms": 10},
           "batch": True, "max_batch_size": 8, "concurrency_limit": 1}
GRADIO_BODY = {"endpoint": {"api_name": "predict"}, "protocol": "gradio"}
HTTP_BODY = {"protocol": "http",
             "endpoint": {"method": "POST", "path": "/predict/predict", "body": {"inputs": "$0"}}}


@pytest.fixture(scope="module")
def hard_ceiling_server() -> Iterator[str]:
    """One server for the three tests of the hard ceiling (a start costs seconds on a busy machine)."""
    with start_reference_server({"functions": [SLEEP]}) as url:
        yield url


@pytest.fixture
def hard_ceiling(hard_ceiling_server: str) -> str:
    """The shared server with no backlog left by the test before (one probe runs past the ceiling)."""
    assert wait_for_empty_queue(hard_ceiling_server, timeout_s=60).drained
    return hard_ceiling_server


def scenario_file(tmp_path: Path, slo: dict[str, float], body: dict[str, Any] | None = None) -> Path:
    spec = {"name": "ceiling", **(body or GRADIO_BODY), "payload": {"inputs": [{"text": {"words": [2, 3]}}]},
            "load": {"rate": 10, "arrival": "poisson", "duration": 3, "timeout": 20}, "slo": slo}
    path = tmp_path / "ceiling.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def capacity(path: Path, url: str, tmp_path: Path, **options: Any) -> CapacityRun:
    config = capacity_config(path, target=url, tolerance=0.1, duration_s=3, max_duration_s=6,
                             confirm_duration_s=5, estimate_users=16, out_root=tmp_path / "r",
                             **{"overload": False, **options})
    return run_capacity(config)


def assert_within(run: CapacityRun, ceiling: float) -> None:
    found = run.capacity
    rate = found.capacity_rps
    table = [(p.kind, round(p.rate_rps, 1), p.verdict, p.why, p.host_wait) for p in found.probes]
    # at most 2% over: a few seconds of confirmation cannot tell 40.1 req/s from a ceiling of 40
    assert rate is not None and rate <= 1.02 * ceiling, table
    # at least 85% of it, or the answer says the host was busy (qbench's own generator waited for a core:
    # the server very likely did too, and the sleeps' ceiling is not what this box then gives)
    assert rate >= 0.85 * ceiling or (found.host_busy is not None and "host" in dict(run.lines)), table
    assert found.confirmed and found.confirmation is not None and found.confirmation.steady, table
    above = [p for p in found.probes if p.kind in ("rate", "confirm") and p.rate_rps > ceiling * 1.05]
    assert all(not p.passed for p in above), table  # a probe above the ceiling never passes


def test_a_hard_ceiling(tmp_path: Path, hard_ceiling: str) -> None:
    run = capacity(scenario_file(tmp_path, {"p95_latency_s": 1.0}), hard_ceiling, tmp_path)
    assert_within(run, 40.0)
    lines = dict(run.lines)
    # one confirmation; two (different Poisson seeds) where a starved box made the sleeping server's own
    # service slow down, and its throughput fall, with its queue (metastable there: said, and held twice)
    assert lines["held"].startswith(("for the whole 5 s confirmation", "for each of 2 5 s confirmations"))
    assert "probe length" in lines


def test_a_probe_above_the_ceiling_fails_as_not_steady_though_its_p95_passes(
    tmp_path: Path, hard_ceiling: str
) -> None:
    """46 req/s against 40: in 6 s the queue grows by ~36 requests, about 0.9 s of wait, so the p95 stays
    under a 3 s bound; the backlog's trend gives it away."""
    path = scenario_file(tmp_path, {"p95_latency_s": 3.0})
    config = capacity_config(path, target=hard_ceiling, tolerance=0.1, out_root=tmp_path / "r")
    prober = capacity_prober(config)
    prober.stop_runaway = False  # the whole window: its p95 is what a short probe would judge
    probe, _ = prober.open_loop(46.0, 6.0)
    assert probe.p95_latency_s is not None and probe.p95_latency_s < 3.0
    assert not probe.passed and probe.steady is False
    assert probe.violations[0].startswith("not steady, ") and "backlog +" in probe.violations[0]


def test_a_server_that_slows_as_its_queue_grows(tmp_path: Path) -> None:
    """Past the capacity the queue grows and each dispatch stalls longer: throughput falls, and the
    advised max_size sits under the queue length where it fell under the answered rate. The run past the
    answer (x1.3) shows it when x1.3 is well past what the server serves; where a busy host's answer sat
    so far under the 40 req/s ceiling that x1.3 was not, the same verdict is checked at x1.3 the ceiling
    (past it on any box)."""
    settings = {"functions": [SLEEP], "queue": {"stall_ms_per_waiting": 0.1}}
    path = scenario_file(tmp_path, {"p95_latency_s": 1.0})
    with start_reference_server(settings) as url:
        run = capacity(path, url, tmp_path, overload=True)
        overload = run.capacity.overload
        assert overload is not None
        line = dict(run.lines)["past it (x1.3)"]
        if "throughput fell" not in line:
            # x1.3 a busy host's answer was too close to what the box served for the stalls to grow (27 of
            # 40 answered once: 35.4 req/s offered against 33.7 served, 0.1 ms a waiting request, held): said
            # so, and only under 1.2 x the ceiling; the verdict is checked at x1.3 the ceiling
            assert "throughput held" in line and overload.rate_rps < 1.2 * 40.0, (line, overload)
            config = capacity_config(path, target=url, max_duration_s=6, out_root=tmp_path / "o")
            assert wait_for_empty_queue(url, timeout_s=60).drained
            overload = capacity_prober(config).overload(40.0)[1]
            assert overload is not None
    assert_within(run, 40.0)
    assert overload.fall > 0.1, overload  # throughput falls past the capacity
    # the cap sits under the queue where throughput fell under the answered rate (from there a burst never
    # drains at that rate), which is at or past where it first fell 10% (the same place when the answer
    # is the base throughput; later where a busy box answered under it: 44 < 55, past 24, once)
    # (a run too short to fall under it: the advice says it stayed above, and the cap is the wait's bound)
    assert overload.fell_at_waiting is not None and overload.max_size is not None, overload
    if overload.tips_at_waiting is None:
        assert "stayed above the capacity" in overload.advice and overload.max_size <= 1.0 * 40, overload
    else:
        assert overload.fell_at_waiting <= overload.tips_at_waiting, overload
        assert overload.max_size < overload.tips_at_waiting, overload
    # the run right after it, against the confirmation: both at the answer, compared request by request
    change = run.capacity.burst_change
    assert change is not None and change.rate_rps == run.capacity.capacity_rps and change.requests_between > 0
    assert "against the confirmation" in dict(run.lines)["after the burst"]


def test_a_batched_function(tmp_path: Path) -> None:
    with start_reference_server({"functions": [BATCHED]}) as url:
        run = capacity(scenario_file(tmp_path, {"p95_latency_s": 0.5}), url, tmp_path)
    assert_within(run, 8 / 0.13)


def test_a_plain_http_server_with_a_ceiling(tmp_path: Path, hard_ceiling: str) -> None:
    run = capacity(scenario_file(tmp_path, {"p95_latency_s": 1.0}, HTTP_BODY), hard_ceiling, tmp_path,
                   start_rate=30.0)
    assert_within(run, 40.0)
    steadiness = run.capacity.confirmation.steadiness if run.capacity.confirmation else None
    assert steadiness is not None and steadiness.wait_name == "latency"  # no start event over HTTP
