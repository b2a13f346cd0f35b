"""The reference server as older Gradio releases (`gradio: 3 | 4 | 5`): settings rules, Gradio 3.50's
websocket queue (message order and shapes, one worker pool shared by every event, batches, queue
full, estimations, /reset), and qbench runs recording every phase on each release's wire."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import yaml

from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import parse_scenario
from reference_server.settings import SettingsError, load_preset, parse_settings
from reference_server.testing import RunningServer, serve_in_thread

FUNCTIONS = [
    {"api_name": "echo", "workload": "echo"},
    {"api_name": "sleep_a", "workload": "sleep", "params": {"base_ms": 150}},
    {"api_name": "sleep_b", "workload": "sleep", "params": {"base_ms": 150}},
    {"api_name": "batch", "workload": "sleep", "params": {"base_ms": 150}, "batch": True,
     "max_batch_size": 3},
    {"api_name": "gen", "workload": "stream", "params": {"chunks": 3, "interval_ms": 5}},
    {"api_name": "long", "workload": "stream", "params": {"chunks": 100, "interval_ms": 50}},
    {"api_name": "fail", "workload": "fail", "params": {"message": "nope"}},
]
PHASES = ("joined_at_s", "estimation_at_s", "started_at_s", "completed_at_s")


def settings(gradio: int, **queue: Any) -> Any:
    raw = {"gradio": gradio, "functions": FUNCTIONS, "queue": queue, "launch": {"port": 0}}
    return parse_settings(raw, "test")


@pytest.fixture(scope="module")
def g3() -> Iterator[RunningServer]:
    with serve_in_thread(settings(3, concurrency_count=2)) as running:
        yield running


@pytest.fixture(scope="module")
def g3_tight() -> Iterator[RunningServer]:
    with serve_in_thread(settings(3, max_size=1)) as running:
        yield running


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"gradio": 3, "functions": [{**FUNCTIONS[0], "concurrency_limit": 2}]},
         "functions[0].concurrency_limit does not exist in Gradio 3.x"),
        ({"gradio": 3, "functions": [{**FUNCTIONS[0], "concurrency_id": "g"}]},
         "functions[0].concurrency_id does not exist in Gradio 3.x"),
        ({"gradio": 3, "functions": FUNCTIONS[:1], "queue": {"default_concurrency_limit": 4}},
         "the equivalent is queue.concurrency_count"),
        ({"gradio": 6, "functions": FUNCTIONS[:1], "queue": {"concurrency_count": 4}},
         "queue.concurrency_count exists only in Gradio 3.x (gradio: 3), not in gradio: 6"),
        ({"gradio": 2, "functions": FUNCTIONS[:1]}, "gradio = 2"),
    ],
)
def test_a_knob_the_release_lacks_is_an_error_naming_the_equivalent(raw: dict[str, Any],
                                                                     expected: str) -> None:
    with pytest.raises(SettingsError, match="invalid server settings") as info:
        parse_settings(raw, "server.yaml")
    assert expected in str(info.value) and "server.yaml" in str(info.value)


def test_the_gradio3_preset_and_the_readme_settings_block_load() -> None:
    """`qbench serve --preset gradio3` and docs/reference-server.md's settings example, `gradio:` included."""
    preset = load_preset("gradio3")
    assert (preset.gradio, preset.concurrency_count, preset.functions[0].batch) == (3, 1, True)
    page = Path(__file__).resolve().parents[3] / "docs" / "reference-server.md"
    readme = page.read_text(encoding="utf-8")
    block = readme.split("Settings file (every key optional except `functions`):", 1)[1]
    raw = yaml.safe_load(block.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert raw["gradio"] == 6 and parse_settings(raw, "README").gradio == 6


def test_gradio3_raises_max_threads_to_concurrency_count() -> None:
    s = parse_settings({"gradio": 3, "functions": FUNCTIONS[:1], "queue": {"concurrency_count": 64},
                        "launch": {"max_threads": 40}})
    assert (s.max_threads, s.concurrency_count, s.resolved_limit(s.functions[0])) == (64, 64, 64)
    assert parse_settings({"gradio": 3, "functions": FUNCTIONS[:1]}).concurrency_count == 1
    assert parse_settings({"gradio": 6, "functions": FUNCTIONS[:1], "queue": {"default_concurrency_limit": 3},
                           "launch": {"max_threads": 2}}).max_threads == 2


# ---------------------------------------------------------------- the 3.x wire


async def ws_call(url: str, fn_index: int, data: list[Any], session: str = "s1",
                  on_start: Any = None) -> list[dict[str, Any]]:
    """One event over Gradio 3's websocket; every server message, in order (close as its code)."""
    seen: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url.replace("http", "ws", 1) + "/queue/join") as ws:
            async for frame in ws:
                msg = frame.json()
                seen.append(msg)
                if msg["msg"] == "send_hash":
                    await ws.send_json({"fn_index": fn_index, "session_hash": session})
                elif msg["msg"] == "send_data":
                    await ws.send_json({"data": data, "event_data": None, "fn_index": fn_index,
                                        "session_hash": session})
                elif msg["msg"] == "process_starts" and on_start is not None:
                    await on_start(http)
            seen.append({"msg": "closed", "code": ws.close_code})
    return seen


def kinds(seen: list[dict[str, Any]]) -> list[str]:
    return [m["msg"] for m in seen]


def test_config_speaks_3x(g3: RunningServer) -> None:
    config = httpx.get(g3.url + "/config").json()
    assert config["version"] == "3.50.2" and "protocol" not in config and "api_prefix" not in config
    assert [d["api_name"] for d in config["dependencies"]] == [f["api_name"] for f in FUNCTIONS]
    assert all("id" not in d for d in config["dependencies"])  # 3.x: the fn_index is the position
    assert httpx.get(g3.url + "/gradio_api/info").status_code == 404
    status = httpx.get(g3.url + "/queue/status").json()
    assert status["msg"] == "estimation" and status["rank"] is None and status["queue_eta"] == 1


def test_plain_generator_and_failing_calls_follow_350s_messages(g3: RunningServer) -> None:
    plain = asyncio.run(ws_call(g3.url, 0, ["hi"]))
    assert kinds(plain) == ["send_hash", "estimation", "send_data", "process_starts", "process_completed",
                            "closed"]
    estimation, done = plain[1], plain[4]
    assert set(estimation) == {"msg", "rank", "queue_size", "avg_event_process_time",
                               "avg_event_concurrent_process_time", "rank_eta", "queue_eta"}
    assert done["success"] is True and set(done["output"]) == {"data", "is_generating", "duration",
                                                               "average_duration"}
    assert done["output"]["data"] == ["hi"] and plain[-1]["code"] == 1000
    gen = asyncio.run(ws_call(g3.url, 4, ["x"]))
    steps = [m["output"]["data"] for m in gen if m["msg"] == "process_generating"]
    assert len(steps) == 3 and all(isinstance(s[0], str) for s in steps)  # full values, never diffs
    assert gen[-2]["output"] == [m for m in gen if m["msg"] == "process_generating"][-1]["output"]
    failed = asyncio.run(ws_call(g3.url, 6, ["x"]))
    assert failed[-2] == {"msg": "process_completed", "output": {"error": None}, "success": False}


async def burst(url: str, calls: list[tuple[int, str]]) -> list[list[dict[str, Any]]]:
    calls_ = (ws_call(url, fn, [text], f"s{i}") for i, (fn, text) in enumerate(calls))
    return list(await asyncio.gather(*calls_))


class Sampler:
    """Samples the server's running jobs and their sizes (its loop runs in another thread)."""

    def __init__(self, server: RunningServer) -> None:
        self.queue = server.state.queue
        self.running: list[int] = [0]
        self.job_sizes: set[int] = set()

    async def run(self) -> None:
        while True:
            self.running.append(self.queue.running_jobs)
            for group in list(self.queue.groups.values()):
                self.job_sizes.update(len(job.events) for job in list(group.running))
            await asyncio.sleep(0.003)

    def during(self, calls: list[tuple[int, str]], url: str) -> list[list[dict[str, Any]]]:
        async def main() -> list[list[dict[str, Any]]]:
            task = asyncio.create_task(self.run())
            try:
                return await burst(url, calls)
            finally:
                task.cancel()

        return asyncio.run(main())


def test_one_pool_of_concurrency_count_workers_serves_every_function(g3: RunningServer) -> None:
    """2 workers, 3 + 3 sleeps of two functions: at most 2 run at once, whichever function they are."""
    sampler = Sampler(g3)
    seen = sampler.during([(1, "a"), (2, "b")] * 3, g3.url)
    assert all(s[-2]["success"] for s in seen)
    assert max(sampler.running) == 2, sampler.running
    later = [s[1] for s in seen if s[1]["rank"] >= 2]  # joined behind two running jobs
    assert later and all(m["queue_size"] >= 3 for m in later)


def test_batch_takes_up_to_max_batch_size_of_the_same_function(g3: RunningServer) -> None:
    sampler = Sampler(g3)
    seen = sampler.during([(3, f"b{i}") for i in range(5)], g3.url)
    assert all(s[-2]["success"] for s in seen)
    assert sorted(s[-2]["output"]["data"][0] for s in seen) == [f"b{i}" for i in range(5)]
    assert max(sampler.job_sizes) in (2, 3) and max(sampler.job_sizes) <= 3, sampler.job_sizes


def test_estimations_follow_350s_formula_once_a_job_was_measured(g3: RunningServer) -> None:
    asyncio.run(ws_call(g3.url, 1, ["warm"]))  # one more measured job
    seen = asyncio.run(burst(g3.url, [(1, f"e{i}") for i in range(4)]))
    first = [s[1] for s in seen]
    for m in first:  # many jobs measured already: the concurrent time is the mean over 2 workers
        assert m["avg_event_process_time"] > 0.1 and m["rank_eta"] is not None
        assert m["avg_event_concurrent_process_time"] == pytest.approx(m["avg_event_process_time"] / 2)
    ranks = sorted(m["rank"] for m in first)  # a join may come after a dispatch: [0, 0, 1, 2] happens
    assert ranks[-1] >= 1 and all(0 <= r <= i for i, r in enumerate(ranks)), ranks
    for m in first:
        busy = m["rank_eta"] - (m["rank"] * m["avg_event_concurrent_process_time"]
                                + m["avg_event_process_time"])
        assert busy == pytest.approx(0) or busy == pytest.approx(m["avg_event_concurrent_process_time"])


def test_queue_full_then_close(g3_tight: RunningServer) -> None:
    seen = asyncio.run(burst(g3_tight.url, [(1, f"q{i}") for i in range(4)]))
    verdicts = sorted(s[-2]["msg"] for s in seen)
    assert "queue_full" in verdicts and "process_completed" in verdicts
    assert all(s[-1] == {"msg": "closed", "code": 1000} for s in seen)
    assert all(kinds(s) == ["send_hash", "queue_full", "closed"] for s in seen if s[1]["msg"] == "queue_full")


def test_reset_stops_the_sessions_running_generator(g3_tight: RunningServer) -> None:
    async def reset(http: aiohttp.ClientSession) -> None:
        async with http.post(g3_tight.url + "/reset", json={"session_hash": "r1", "fn_index": 5}) as resp:
            assert (await resp.json()) == {"success": True}

    seen = asyncio.run(asyncio.wait_for(ws_call(g3_tight.url, 5, ["x"], "r1", on_start=reset), 10))
    assert len([m for m in seen if m["msg"] == "process_generating"]) < 100
    assert seen[-1]["msg"] == "closed"


# ---------------------------------------------------------------- qbench on every emulated release


def qbench_run(url: str, tmp_path: Path, api_name: str, load: dict[str, Any]) -> list[RequestRecord]:
    raw = {"name": api_name, "endpoint": {"api_name": api_name}, "payload": {"inputs": [{"value": "hi"}]},
           "load": {"timeout": 20, **load}}
    return run_scenario(parse_scenario(raw), target=url, out_dir=tmp_path / api_name, live=False).records


@pytest.mark.parametrize(("gradio", "protocol", "prefix"), [(3, "ws", ""), (4, "sse_v3", ""),
                                                             (5, "sse_v3", "/gradio_api")])
def test_qbench_records_every_phase_on_each_release(gradio: int, protocol: str, prefix: str,
                                                     tmp_path: Path) -> None:
    with serve_in_thread(settings(gradio)) as server:
        raw = {"name": "t", "endpoint": {"api_name": "gen"}, "payload": {"inputs": [{"value": "hi"}]},
               "load": {"burst": 3, "timeout": 20}}
        result = run_scenario(parse_scenario(raw), target=server.url, out_dir=tmp_path / "gen", live=False)
        assert [r.outcome for r in result.records] == ["ok"] * 3
        assert all(all(getattr(r, p) is not None for p in PHASES) and r.outputs == 3 for r in result.records)
        info = result.run_info.server["gradio"]
        assert (info["protocol"], info["api_prefix"], info["version"][0]) == (protocol, prefix, str(gradio))
        failed = qbench_run(server.url, tmp_path, "fail", {"burst": 2})
        assert [r.error_kind for r in failed] == ["server_error"] * 2
        batch = qbench_run(server.url, tmp_path, "batch", {"burst": 4})
        assert [r.outcome for r in batch] == ["ok"] * 4
