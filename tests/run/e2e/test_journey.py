"""Journeys: one user's steps in order in one session (Gradio session_hash, an OpenAI conversation,
HTTP cookies), closed and open loop; scenario errors; per-step and per-journey summaries. Real Gradio
apps: tests/gradio_versions/test_mix_journey.py."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.report.build import build_report
from qbench.run.pipeline import run_scenario
from qbench.run.scenario.schema import load_scenario
from reference_server.settings import load_preset
from reference_server.testing import RunningServer, serve_in_thread
from tests.run.conftest import scenario, serve_aiohttp

ROOT = Path(__file__).resolve().parents[3]
TEXT = {"inputs": [{"text": {"words": [2, 4]}}]}


# ---------------------------------------------------------------- scenario errors


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("journey:\n  - {endpoint: {api_name: a}}\nmix:\n  - {endpoint: {api_name: a}}\n"
         "load: {users: 1, duration: 1}\n", r"key 'journey': a journey's steps replace a mix"),
        ("endpoint: {api_name: x}\njourney:\n  - {endpoint: {api_name: a}}\nload: {users: 1, duration: 1}\n",
         r"key 'journey': a journey replaces endpoint and payload .* \{'api_name': 'x'\}"),
        ("journey:\n  - {endpoint: {api_name: a}, repeat: 0}\nload: {users: 1, duration: 1}\n",
         r"key 'journey.0.repeat': value 0: Input should be greater than or equal to 1"),
        ("journey:\n  - {endpoint: {api_name: a}}\nload: {replay: /nowhere}\n",
         r"key 'journey': runs with load users or rate or stages or burst .* not replay"),
        ("journey: []\nload: {users: 1, duration: 1}\n", r"key 'journey': expected a list of at least one"),
    ],
)
def test_scenario_errors_name_the_file_key_and_value(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "j.yaml"
    path.write_text(body)
    with pytest.raises(ScenarioError, match=r"j.yaml: invalid scenario(.|\n)*" + message):
        load_scenario(path)


# ---------------------------------------------------------------- Gradio (reference server)


def test_closed_loop_journeys_share_one_session_each(echo_server: RunningServer, tmp_path: Path) -> None:
    steps = [{"endpoint": {"api_name": "echo"}, "payload": TEXT},
             {"endpoint": {"api_name": "echo"}, "payload": TEXT, "repeat": 3, "think_time": 0.01,
              "name": "again"}]
    spec = scenario(journey=steps, load={"users": 2, "duration": 1.5, "timeout": 10})
    result = run_scenario(spec, target=echo_server.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert records and all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    by_journey: dict[int, list[Any]] = defaultdict(list)
    for r in records:
        by_journey[r.journey_id].append(r)  # type: ignore[index]
    assert len(by_journey) >= 4
    sessions = {j: {r.session_id for r in rs} for j, rs in by_journey.items()}
    assert all(len(s) == 1 for s in sessions.values())  # one session per journey
    assert len({next(iter(s)) for s in sessions.values()}) == len(by_journey)  # a new one per journey
    for rs in by_journey.values():
        assert [(r.step, r.turn, r.endpoint) for r in rs] == [(0, 0, "echo"), (1, 0, "again"),
                                                            (1, 1, "again"), (1, 2, "again")][:len(rs)]
    journeys = result.summary.journeys
    assert journeys is not None and journeys.started == len(by_journey)
    assert journeys.completed + journeys.unfinished == journeys.started and journeys.completed >= 2
    assert journeys.duration.count == journeys.completed and set(journeys.steps) == {"0:echo", "1:again"}
    saved = json.loads((result.run_dir / "summary.json").read_text())
    assert saved["journeys"]["completed"] == journeys.completed
    files = build_report(result.run_dir)
    assert "| 1:again |" in files.markdown.read_text() and "**journeys**" in files.markdown.read_text()
    assert '<section id="journey">' in files.html.read_text()


def test_open_loop_journeys_start_on_schedule(echo_server: RunningServer, tmp_path: Path) -> None:
    steps = [{"endpoint": {"api_name": "echo"}, "payload": TEXT, "repeat": 2}]
    spec = scenario(journey=steps, load={"rate": 5, "duration": 2, "timeout": 10})
    result = run_scenario(spec, target=echo_server.url, out_dir=tmp_path / "run", live=False)
    firsts = sorted(r.intended_at_s for r in result.records if r.turn == 0)
    assert len(firsts) == 10 and firsts[:3] == pytest.approx([0.0, 0.2, 0.4])  # the plan's arrivals
    assert Counter(r.journey_id for r in result.records).most_common(1)[0][1] == 2
    assert all(r.ok for r in result.records)


# ---------------------------------------------------------------- OpenAI and plain HTTP


@pytest.fixture
def chat_server() -> Iterator[tuple[str, list[list[dict[str, Any]]]]]:
    """An OpenAI-compatible chat that streams "reply <n>" and keeps every request's messages."""
    seen: list[list[dict[str, Any]]] = []

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body["messages"])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in ("reply ", str(len(body["messages"]))):
            chunk = {"choices": [{"delta": {"content": piece}, "finish_reason": None}]}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        done = {"choices": [{"delta": {}, "finish_reason": "stop"}]}
        await resp.write(b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    app = web.Application()
    app.add_routes([web.get("/v1/models", models), web.post("/v1/chat/completions", chat)])
    with serve_aiohttp(app) as url:
        yield url, seen


def test_an_openai_journey_sends_the_growing_conversation(chat_server: tuple[str, list[Any]],
                                                          tmp_path: Path) -> None:
    url, seen = chat_server
    steps = [{"endpoint": {"path": "/v1/chat/completions"}, "payload": TEXT, "repeat": 4}]
    spec = scenario(protocol="openai", journey=steps, load={"users": 1, "requests": 8, "timeout": 10})
    result = run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    assert len(result.records) == 8 and all(r.ok for r in result.records)
    assert [len(m) for m in seen] == [1, 3, 5, 7, 1, 3, 5, 7]  # each turn: the conversation so far + 1
    last = seen[3]
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]
    assert [m["content"] for m in last if m["role"] == "assistant"] == ["reply 1", "reply 3", "reply 5"]
    assert seen[4][0]["content"] != last[0]["content"] or len(seen[4]) == 1  # a new journey starts over


def test_an_http_journey_keeps_the_cookies_the_server_set(tmp_path: Path) -> None:
    visits: list[str | None] = []
    issued = [0]

    async def step(request: web.Request) -> web.Response:
        sid = request.cookies.get("sid")
        visits.append(sid)
        resp = web.json_response({"ok": True})
        if sid is None:
            issued[0] += 1
            resp.set_cookie("sid", f"s{issued[0]}")
        return resp

    app = web.Application()
    app.add_routes([web.post("/login", step), web.post("/work", step)])
    steps = [{"endpoint": {"path": "/login"}}, {"endpoint": {"path": "/work"}, "repeat": 2}]
    with serve_aiohttp(app) as url:
        spec = scenario(protocol="http", journey=steps, load={"users": 2, "requests": 12, "timeout": 10})
        result = run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    assert len(result.records) == 12 and all(r.ok for r in result.records)
    journeys = Counter(r.journey_id for r in result.records)
    assert visits.count(None) == len(journeys)  # each journey's first request only
    longer = [n for n in journeys.values() if n > 1]  # (the requests limit may cut the last ones short)
    assert len(set(visits) - {None}) == len(longer)  # every journey its own cookie, never another's
    assert sorted(Counter(v for v in visits if v is not None).values()) == sorted(
        n - 1 for n in longer)


def test_the_docs_journey_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/traffic-mixes-and-journeys.md: serve session-chat, run scenarios/journey.yaml (6 s, 3 users,
    no thinking): the server's chat sees histories of 0, 1, 2 and 3 exchanges in equal numbers."""
    monkeypatch.chdir(ROOT)
    users = 3
    with serve_in_thread(load_preset("session-chat")) as server:
        args = ["run", "scenarios/journey.yaml", "--target", server.url, "--out", str(tmp_path / "r"),
                "--set", "load.duration=6", "--set", f"load.users={users}",
                "--set", "journey.1.think_time=0.05", "--no-live"]
        out = CliRunner().invoke(app, args)
        seen = httpx.get(server.url + "/status").json()["workloads"]["chat"]["calls_by_history"]
    assert out.exit_code in (0, 3), out.output  # 3: an SLO missed on a busy host
    assert "Per journey step" in out.output and "journeys:" in out.output
    counts = {int(k): v for k, v in seen.items()}
    assert set(counts) == {0, 1, 2, 3} and counts[0] - counts[3] <= users and counts[3] >= 2, counts
