"""protocol: openai against a small OpenAI-compatible aiohttp server in a thread: TTFT, inter-token
gaps, token counts from usage or from chunks, finish reasons, refusals, summary and SLO checks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from qbench.errors import TargetError
from qbench.run.pipeline import run_scenario
from tests.run.conftest import scenario, serve_aiohttp

GAP_S = 0.03
TOKENS = 5
SEEN: list[dict[str, Any]] = []
SEEN_IDS: list[str | None] = []


def _sse(data: Any) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else orjson.dumps(data)) + b"\n\n"


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "tiny", "object": "model"}]})


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    SEEN.append(body)
    SEEN_IDS.append(request.headers.get("X-Request-Id"))
    chat = request.path.endswith("chat/completions")
    n = min(body.get("max_tokens") or TOKENS, TOKENS)
    if not body.get("stream"):
        return web.json_response({
            "choices": [{"index": 0, "finish_reason": "length", "text": "x" * n}],
            "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n},
        })
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    if chat:  # the role chunk carries no text: not a token
        await resp.write(_sse({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
    for i in range(n):
        await asyncio.sleep(GAP_S)
        piece = {"delta": {"content": f"t{i}"}} if chat else {"text": f"t{i}"}
        finish = "length" if i == n - 1 else None
        await resp.write(_sse({"choices": [{"index": 0, "finish_reason": finish, **piece}]}))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
        await resp.write(_sse({"choices": [], "usage": usage}))
    if body.get("cut"):
        request.transport.close()  # type: ignore[union-attr]
        return resp
    await resp.write(_sse(b"[DONE]"))
    await resp.write_eof()
    return resp


async def full(request: web.Request) -> web.Response:
    return web.json_response({"error": {"message": "queue is full"}}, status=503)


@pytest.fixture(scope="module")
def openai_server() -> Iterator[str]:
    app = web.Application()
    app.add_routes([
        web.get("/v1/models", models),
        web.post("/v1/chat/completions", completions),
        web.post("/v1/completions", completions),
        web.post("/full/v1/completions", full),
    ])
    with serve_aiohttp(app) as url:
        yield url


def test_chat_stream_ttft_itl_and_usage(openai_server: str, tmp_path: Path) -> None:
    SEEN.clear()
    spec = scenario(
        protocol="openai",
        endpoint={"max_tokens": 4, "body": {"temperature": 0}},
        payload={"inputs": [{"text": {"words": [3, 3]}}]},
        load={"burst": 3, "timeout": 10},
        slo={"p95_ttft_s": 10, "p99_itl_s": 10, "p95_tpot_s": 10, "min_output_tps": 0.1},
    )
    result = run_scenario(spec, target=openai_server, out_dir=tmp_path / "r", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    body = SEEN[0]
    assert body["model"] == "tiny" and body["max_tokens"] == 4 and body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True}
    assert len(body["messages"][0]["content"].split()) == 3
    for r in result.records:
        assert r.endpoint == "POST /v1/chat/completions" and r.outputs == 4
        assert (r.input_tokens, r.output_tokens, r.tokens_from, r.finish_reason) == (3, 4, "usage", "length")
        assert r.itl_count == 3 and r.itl_p50_s is not None and r.itl_p50_s >= GAP_S * 0.5
        assert r.itl_max_s is not None and r.itl_mean_s is not None and r.itl_max_s >= r.itl_mean_s
        assert r.ttft_s is not None and r.ttft_s >= GAP_S * 0.5 and r.tpot_s is not None
    s = result.summary
    assert s.output_tokens == 12 and s.input_tokens == 9 and s.output_tps > 0
    assert s.phase("itl_s").count == 9 and s.phase("ttft_s").count == 3 and s.phase("tpot_s").count == 3
    assert s.request_output_tps.count == 3
    assert [c.name for c in s.slo] == ["p95_ttft_s", "p95_tpot_s", "p99_itl_s", "min_output_tps"]
    assert s.slo_passed and s.goodput_rps > 0


def test_completions_counted_by_chunks_and_not_streamed(openai_server: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    SEEN.clear()
    spec = scenario(
        protocol="openai",
        endpoint={"path": "/v1/completions", "model": "tiny", "body": {"stream_options": None}},
        payload={"inputs": [{"value": "hello"}]},
        load={"burst": 2, "timeout": 10},
    )
    result = run_scenario(spec, target=openai_server, out_dir=tmp_path / "c", live=False)
    assert SEEN[0]["prompt"] == "hello" and "messages" not in SEEN[0]
    assert all(r.ok and r.output_tokens == TOKENS and r.tokens_from == "chunks" for r in result.records)
    assert all(r.input_tokens is None and r.itl_count == TOKENS - 1 for r in result.records)
    whole = scenario(
        protocol="openai",
        endpoint={"path": "/v1/completions", "stream": False, "max_tokens": 2},
        payload={"inputs": [{"value": "hi"}]},
        load={"burst": 1},
    )
    result = run_scenario(whole, target=openai_server, out_dir=tmp_path / "w", live=False)
    r = result.records[0]
    assert r.ok and (r.output_tokens, r.tokens_from, r.itl_count) == (2, "usage", 0)
    assert "endpoint.stream is false" in capsys.readouterr().err  # warned before the load: no TTFT/ITL
    assert r.first_output_at_s is None


def test_refusals_broken_streams_and_unknown_models(openai_server: str, tmp_path: Path) -> None:
    cut = scenario(
        protocol="openai", endpoint={"body": {"cut": True}}, payload={"inputs": [{"value": "x"}]},
        load={"burst": 1, "timeout": 10},
    )
    result = run_scenario(cut, target=openai_server, out_dir=tmp_path / "cut", live=False)
    assert result.summary.errors_by_kind == {"stream_broken": 1}  # the connection broke before [DONE]
    refused = scenario(
        protocol="openai", endpoint={"path": "/full/v1/completions"}, payload={"inputs": [{"value": "x"}]},
        load={"burst": 2},
    )
    result = run_scenario(refused, target=openai_server, out_dir=tmp_path / "full", live=False)
    assert result.summary.errors_by_kind == {"queue_full": 2}
    wrong = scenario(
        protocol="openai", endpoint={"model": "big"}, payload={"inputs": [{"value": "x"}]}, load={"burst": 1}
    )
    with pytest.raises(TargetError, match="no model 'big'; it serves tiny"):
        run_scenario(wrong, target=openai_server, out_dir=tmp_path / "wrong", live=False)


def test_console_and_report_show_tokens(openai_server: str, tmp_path: Path) -> None:
    from rich.console import Console

    from qbench.report.build import phase_rows, run_headline
    from qbench.report.rundir import read_run
    from qbench.run.console import overview_table, phase_table

    spec = scenario(protocol="openai", payload={"inputs": [{"value": "x"}]}, load={"burst": 2, "timeout": 10})
    result = run_scenario(spec, target=openai_server, out_dir=tmp_path / "r", live=False)
    console = Console(width=80, record=True)
    console.print(overview_table(result.summary))
    console.print(phase_table(result.summary))
    text = console.export_text()
    assert "10 out, 6 in" in text and "TTFT (sent)" in text and "TPOT" in text and "ITL" in text
    run = read_run(tmp_path / "r")
    assert dict(run_headline(run))["tokens"].startswith("10 out, 6 in")
    assert any(row[0] == "inter-token gap (every gap)" for row in phase_rows(run.summary))


def test_compare_shows_token_metrics(openai_server: str, tmp_path: Path) -> None:
    from qbench.report.compare import compare

    spec = scenario(protocol="openai", payload={"inputs": [{"value": "x"}]}, load={"burst": 2, "timeout": 10})
    for name in ("a", "b"):
        run_scenario(spec, target=openai_server, out_dir=tmp_path / name, live=False)
    names = {d.name for d in compare(tmp_path / "a", tmp_path / "b").deltas}
    assert {"p95_ttft_s", "p50_tpot_s", "p99_itl_s", "output_tps"} <= names


def test_an_openai_scenario_needs_a_prompt_input() -> None:
    from qbench.errors import ScenarioError

    with pytest.raises((ScenarioError, ValueError), match="needs a payload input"):
        scenario(protocol="openai", load={"burst": 1})
    with pytest.raises((ScenarioError, ValueError), match="mapping of extra request fields"):
        scenario(
            protocol="openai", endpoint={"body": [1]}, payload={"inputs": [{"value": "x"}]}, load={"burst": 1}
        )


def test_chat_turns_go_as_messages_and_requests_name_their_record(openai_server: str, tmp_path: Path) -> None:
    SEEN.clear()
    SEEN_IDS.clear()
    text = {"words": [2, 2], "turns": [2, 2]}
    chat = scenario(protocol="openai", payload={"inputs": [{"text": text}]}, load={"burst": 3, "timeout": 10})
    result = run_scenario(chat, target=openai_server, out_dir=tmp_path / "chat", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    assert all([m["role"] for m in body["messages"]] == ["user", "assistant", "user"] for body in SEEN)
    assert sorted(SEEN_IDS, key=str) == ["qbench-0", "qbench-1", "qbench-2"]
    SEEN.clear()
    prompt = scenario(protocol="openai", endpoint={"path": "/v1/completions"},
                      payload={"inputs": [{"text": text}]}, load={"burst": 1, "timeout": 10})
    run_scenario(prompt, target=openai_server, out_dir=tmp_path / "prompt", live=False)
    assert [len(line.split()) for line in SEEN[0]["prompt"].split("\n")] == [2, 2, 2]


def test_turns_and_tokens_are_checked_where_they_are_written() -> None:
    from qbench.errors import ScenarioError

    with pytest.raises((ScenarioError, ValueError), match="turns .* apply to protocol: openai only"):
        turns = {"inputs": [{"text": {"turns": [1, 2]}}]}
        scenario(endpoint={"api_name": "x"}, payload=turns, load={"burst": 1})
    with pytest.raises((ScenarioError, ValueError), match="tokens: \\[min, max\\] needs tokenizer"):
        scenario(protocol="openai", payload={"inputs": [{"text": {"tokens": [8, 9]}}]}, load={"burst": 1})
