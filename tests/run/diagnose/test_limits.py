"""Where the limit was: findings from records (simulated queues with known behaviour, and a real run)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench.report.build import build_report
from qbench.run.diagnose.limits import configured_slots, diagnose
from qbench.run.diagnose.phases import KINDS as PHASE_KINDS
from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import summarize
from qbench.tune.servers.server_process import start_reference_server
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from report_synth import simulate  # noqa: E402

Factory = Callable[..., AbstractContextManager[RunningServer]]


def kinds(records: list[RequestRecord], server: dict[str, Any] | None = None) -> list[str]:
    return [f.kind for f in diagnose(records, summarize(records, None), server)]


def shared_cpu(n: int = 600, slots: int = 4, base_s: float = 0.02, seed: int = 0) -> list[RequestRecord]:
    """A server whose `slots` workers share one CPU: a job's service time is base x the jobs running
    when it starts. Light load for the first half of the run, overload for the second."""
    rng = np.random.default_rng(seed)
    gaps = np.concatenate([rng.exponential(base_s * 3, n // 2), rng.exponential(base_s / 2, n - n // 2)])
    t, free, running_ends, records = 0.0, [0.0] * slots, [], []
    for i, gap in enumerate(gaps):
        t += gap
        w = int(np.argmin(free))
        start = max(t, free[w])
        running_ends = [e for e in running_ends if e > start]
        done = start + base_s * (len(running_ends) + 1)
        running_ends.append(done)
        free[w] = done
        records.append(RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="e", warmup=False,
                                     intended_at_s=t, sent_at_s=t, started_at_s=start, completed_at_s=done,
                                     outcome="ok"))
    return records


def test_a_warmup_over_the_whole_run_is_named() -> None:
    records = [RequestRecord(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, "warmup": True})
               for r in simulate(n=100)]
    (finding,) = diagnose(records, summarize(records, None))
    assert finding.kind == "warmup" and "load.warmup covered all 100 requests" in finding.message


def test_a_server_with_room_to_spare() -> None:
    assert kinds(simulate(n=400, rate_rps=10, service_s=0.05, workers=2)) == ["headroom"]


def test_an_overloaded_queue_whose_service_time_holds_is_queue_limited() -> None:
    records = simulate(n=600, rate_rps=40, service_s=0.08, workers=2)
    (finding,) = diagnose(records, summarize(records, None))
    assert finding.kind == "queue_limit" and "about 2 request(s) at a time" in finding.message
    assert "caps throughput near 2" in finding.message  # 2 workers / 80 ms = 25 req/s


def test_service_that_slows_with_concurrency_is_model_bound() -> None:
    (finding,) = diagnose(shared_cpu(), summarize(shared_cpu(), None))
    assert finding.kind == "model_bound" and "grows with concurrency" in finding.message


def reference_status(limit: int, batch: int = 1) -> dict[str, Any]:
    fn = {"api_name": "f", "concurrency_limit": limit, "batch": batch > 1, "max_batch_size": batch}
    return {"fn_index": 0, "config": {"dependencies": [{"id": 0, "api_name": "f"}]},
            "status": {"settings": {"functions": [fn], "queue": {"default_concurrency_limit": 1}}}}


def test_slots_configured_but_idle_are_named() -> None:
    records = simulate(n=600, rate_rps=40, service_s=0.08, workers=2)
    assert kinds(records, reference_status(limit=8)) == ["idle_slots", "queue_limit"]
    assert kinds(records, reference_status(limit=2)) == ["queue_limit"]
    assert configured_slots(reference_status(limit=4, batch=8)) == 32
    assert configured_slots({"config": {}, "status": None}) is None  # a server that reports nothing


def test_a_real_saturated_run_says_so_everywhere(server_factory: Factory, tmp_path: Path) -> None:
    spec = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"rate": 40, "duration": 2, "timeout": 20})
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 50}, "concurrency_limit": 1}
    with server_factory(functions=[work]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    assert [f.kind for f in result.diagnosis] == ["usage", "queue_limit"], result.diagnosis
    assert "server CPU" in result.diagnosis[0].message and "event loop" in result.diagnosis[0].message
    assert "about 1 request(s) at a time" in result.diagnosis[1].message
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["diagnosis"][1]["kind"] == "queue_limit"
    files = build_report(tmp_path / "run")
    assert "where the limit was** (queue_limit: the queue ran about 1" in files.markdown.read_text()
    stored = json.loads((tmp_path / "run" / "run.json").read_text())
    status_end = stored["server"]["status_end"]
    assert status_end["cpu_s"] > 0 and "gpu" not in status_end  # no GPU here: the field is absent
    info = RunInfo.from_dict(stored)  # every key the runner and executors write is a RunInfo field
    assert info.extra == {} and info.generator is not None and info.records == len(result.records)
    assert info.started_at and info.host and RunInfo.from_dict(info.to_dict()) == info


def usage_server(loop_cpu_s: float, gpu_busy_s: float | None = None,
                 loop_wait_s: float | None = None, cpu_s: float | None = None) -> dict[str, Any]:
    """/status at the start and the end of a 10 s run (`loop_wait_s`: the loop's wait for a core;
    `cpu_s`: the whole process's CPU, else 1.2 x the loop's)."""
    server = reference_status(limit=2)
    start = {**server["status"], "uptime_s": 5.0, "cpu_s": 1.0, "event_loop_cpu_s": 0.5}
    used = loop_cpu_s * 1.2 if cpu_s is None else cpu_s
    end = {**server["status"], "uptime_s": 15.0, "cpu_s": 1.0 + used, "event_loop_cpu_s": 0.5 + loop_cpu_s}
    if loop_wait_s is not None:
        start["event_loop_wait_s"], end["event_loop_wait_s"] = 0.2, 0.2 + loop_wait_s
    if gpu_busy_s is not None:
        start["gpu"] = [{"index": 0, "busy_s": 2.0, "sampled_s": 5.0}]
        end["gpu"] = [{"index": 0, "busy_s": 2.0 + gpu_busy_s, "sampled_s": 15.0}]
    return {**server, "status": start, "status_end": end}


def test_an_event_loop_crowded_off_its_core_is_still_the_limit() -> None:
    """On a shared host the loop at its limit runs 40% of a core and waits for one another 50% (the
    kernel's run-queue wait, schedstat): it wanted a whole core, so it is still named, with the
    crowding; a loop that ran 20% and waited 5% had room."""
    records = simulate(n=600, rate_rps=40, service_s=0.08, workers=2)
    findings = diagnose(records, summarize(records, None), usage_server(4.0, loop_wait_s=5.0))
    assert [f.kind for f in findings] == ["usage", "server_cpu", "queue_limit"]
    assert "its event loop 40% (and 50% waiting for a core)" in findings[0].message
    assert "busy and waited for a core another 50% of the time" in findings[1].message
    calm = diagnose(records, summarize(records, None), usage_server(2.0, loop_wait_s=0.5))
    assert [f.kind for f in calm] == ["usage", "queue_limit"]
    assert "waiting for a core" not in calm[0].message


def test_a_busy_event_loop_with_an_idle_gpu_is_named() -> None:
    records = simulate(n=600, rate_rps=40, service_s=0.08, workers=2)
    findings = diagnose(records, summarize(records, None), usage_server(9.5, gpu_busy_s=1.0))
    assert [f.kind for f in findings] == ["usage", "server_cpu", "queue_limit"]
    assert findings[0].message.startswith("server CPU 114% of a core, its event loop 95%, GPU busy 10%")
    assert "busy only 10%" in findings[1].message
    busy_gpu = diagnose(records, summarize(records, None), usage_server(9.5, gpu_busy_s=9.0))
    assert "server_cpu" not in [f.kind for f in busy_gpu]  # the GPU was the busy one
    calm = diagnose(records, summarize(records, None), usage_server(2.0))
    assert [f.kind for f in calm] == ["usage", "queue_limit"]


# ---------------------------------------------------------------- real servers whose limit is known


def run_diagnosis(server_factory: Factory, tmp_path: Path, functions: list[dict[str, Any]],
                  load: dict[str, Any], **settings: Any) -> list[str]:
    api = functions[0]["api_name"]
    spec = scenario(endpoint={"api_name": api}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"timeout": 20, **load})
    with server_factory(functions=functions, **settings) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    return [f.kind for f in result.diagnosis if f.kind not in ("usage", *PHASE_KINDS)]


def test_an_instant_function_well_below_its_limit_has_headroom(tmp_path: Path) -> None:
    """The echo preset's function, 200 requests at 50 req/s: nothing waits for it (it once read 'queue_limit
    ... about 0 request(s) at a time ... caps throughput near 0.0 req/s'). 50 req/s, not 300: a slow or
    busy client cannot send 300 on time, and then the generator really is the limit (that verdict's own
    case: test_a_lagging_generator_is_named_instead_of_the_server). The server runs in its own process:
    in the test's own, a starved box made the generator and the server share one process's turns on a
    core, so requests really waited in the server's queue while the generator lagged as long, and the
    verdict 'generator' was right about that setup, not about a server with headroom."""
    echo = {"api_name": "echo", "workload": "echo", "concurrency_limit": None}
    spec = scenario(endpoint={"api_name": "echo"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"timeout": 20, "rate": 50, "requests": 200})
    with start_reference_server({"functions": [echo]}) as url:
        result = run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    found = [f.kind for f in result.diagnosis if f.kind not in ("usage", *PHASE_KINDS)]
    assert found == ["headroom"], result.diagnosis


def test_a_slow_function_at_a_tenth_of_its_ceiling_has_headroom(server_factory: Factory,
                                                                tmp_path: Path) -> None:
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 50}, "concurrency_limit": 4}
    assert run_diagnosis(server_factory, tmp_path, [work], {"rate": 8, "duration": 3}) == ["headroom"]


def test_slots_held_back_by_max_threads_are_idle_slots(server_factory: Factory, tmp_path: Path) -> None:
    """concurrency_limit 4 but max_threads 2: at most 2 x 50 ms = 40 req/s run, offered 60."""
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 50}, "concurrency_limit": 4}
    found = run_diagnosis(server_factory, tmp_path, [work], {"rate": 60, "duration": 2},
                          launch={"max_threads": 2})
    assert found[0] == "idle_slots" and found[-1] == "queue_limit", found


def test_an_instant_function_behind_its_arrivals_is_request_handling() -> None:
    """Arrivals at 200/s, handled at 100/s one after another, each taking 0.1 ms to run: the requests
    wait, but not for the function."""
    records = []
    for i in range(400):
        sent = i / 200
        start = i / 100 + 0.0037  # off the diagnosis grid
        records.append(RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="e", warmup=False,
                                     intended_at_s=sent, sent_at_s=sent, started_at_s=start,
                                     completed_at_s=start + 1e-4, outcome="ok"))
    (finding,) = diagnose(records, summarize(records, None))
    assert finding.kind == "server_cpu" and "not for the function" in finding.message
    assert "not steady" in finding.message


LIGHT = 26  # the model-bound case's light requests: MIN_GROUP (20) at few running, and some to spare


def one_request_s(url: str, api: dict[str, Any], tmp_path: Path) -> float:
    """The server's own time for one request of `api` on this machine now, one at a time: the median
    service time (its process_starts to process_completed) of 12 requests from one closed-loop user (the
    median is the typical one, not a first request's warm-up). The test sizes its rates by it: a time
    taken in the test's own process (a torch matmul timed here) read 15 x too short when six suite
    workers crowded the box."""
    spec = scenario(endpoint={"api_name": api["api_name"]}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"users": 1, "requests": 12, "timeout": 120})
    result = run_scenario(spec, target=url, out_dir=tmp_path / "one", live=False)
    one = result.summary.phase("service_s").p50
    assert one is not None and one > 0, result.summary
    return one


@pytest.mark.timeout(900)
def test_real_cpu_work_that_slows_with_concurrency_is_model_bound(tmp_path: Path) -> None:
    """The `cpu` workload (torch matmuls, one torch thread each) with 8 slots on this machine's 2 cores:
    8 running take about four times as long each as 1. The rates are sized by the server's own time for
    one request, t, measured first: light load, LIGHT requests at 0.05 / t req/s (0.05 running on average
    on a slow box as on a fast one, and under 4, the few the growth is read against, even where the host
    later gives the server a 40th of the share it had while t was measured: a busy run at 0.2 / t, its
    server serving at 27 x t, ran ~5 at a time and left too few requests at low concurrency to compare),
    then overload, 240 requests at 8 / t req/s (the 2 cores serve about 2 / t). LIGHT is the diagnosis's
    group of 20 and a few more: the light phase lasts LIGHT x 20 t (a busy box's t made 40 of them
    outlast the 300 s test timeout), mostly idle, so its timeout is the slow box's, not its CPU.
    8 slots, not 4: B other busy processes on the host stretch few-running and k-running alike, so the
    growth reads (k + B) / (1 + B); with 4 slots it fell under 1.5 at B = 6 (a CI box running the
    suite in parallel said queue_limit), with 8 it stays about 2. Every rate and count is sized by t, so
    16 matmuls a request (~85 ms here) test what 32 did at half the suite's CPU (~20 s less)."""
    work = {"api_name": "work", "workload": "cpu", "params": {"n": 512, "repeats": 16},
            "concurrency_limit": 8}
    with start_reference_server({"functions": [work], "torch_threads": 1}) as url:
        t = one_request_s(url, work, tmp_path)
        light, heavy = 0.05 / t, 8 / t
        spec = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                        load={"stages": [{"duration": LIGHT / light, "rate": light},
                                         {"duration": 240 / heavy, "rate": heavy}],
                              "timeout": 30 + 240 * t})
        result = run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    found = [f.kind for f in result.diagnosis if f.kind != "usage"]
    assert "model_bound" in found, (t, result.diagnosis)


def test_an_event_loop_busy_with_the_work_is_server_cpu(tmp_path: Path) -> None:
    """An `async def` doing 20 ms of CPU work on the server's event loop (echo, busy_ms 20): one core
    serves at most 50 req/s whatever the concurrency_limit (4 here), offered 100. The server runs in its
    own process, so its /status measures its own event loop's thread."""
    work = {"api_name": "work", "workload": "echo", "params": {"busy_ms": 20}, "concurrency_limit": 4}
    spec = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"rate": 100, "duration": 2, "timeout": 20})
    with start_reference_server({"functions": [work]}) as url:
        result = run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    usage, first, *_ = result.diagnosis
    assert usage.kind == "usage" and first.kind == "server_cpu", result.diagnosis
    assert "event loop kept one core" in first.message
    assert result.summary.throughput_rps < 55  # the ceiling held: 1 / 20 ms
    status_end = json.loads((tmp_path / "run" / "run.json").read_text())["server"]["status_end"]
    assert status_end["event_loop_wait_s"] >= 0  # Linux's schedstat: the loop's wait for a core


def test_a_lagging_generator_is_named_instead_of_the_server() -> None:
    """The generator's loop lagged (p99) about as long as the requests 'waited': the waits are its
    own, so no finding blames the server (it once read 'queue_limit ... about 40 request(s) at a time ...
    caps throughput near 4493 req/s (against 1500 offered)' for an instant function)."""
    from qbench.run.results.summary import GeneratorStats

    records = simulate(n=600, rate_rps=40, service_s=0.08, workers=2)
    later = [r for r in records if r.request_id >= 300]
    waits = sorted((r.started_at_s or 0.0) - (r.sent_at_s or 0.0) for r in later)
    lag = waits[len(waits) // 2]  # as long as the median wait it would explain
    lagging = summarize(records, None, generator=GeneratorStats(p99_loop_lag_s=lag, max_loop_lag_s=lag))
    calm = summarize(records, None, generator=GeneratorStats(p99_loop_lag_s=0.001))
    (finding,) = diagnose(records, lagging)
    assert finding.kind == "generator" and "its own lag" in finding.message
    assert [f.kind for f in diagnose(records, calm)] == ["queue_limit"]
