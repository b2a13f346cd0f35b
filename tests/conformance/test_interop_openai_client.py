"""Interop: the official `openai` client drives the reference server's OpenAI-compatible front
unchanged (create, stream, usage, errors), and `protocol: openai` measures it.

Models are the reference server's text functions: a synthetic token streamer (`tokens`), a tiny
random-init GPT-2 (`text-generation`, the real per-token cost) and a plain echo (one chunk).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from qbench.run.pipeline import run_scenario
from qbench.run.scenario.schema import parse_scenario
from reference_server.settings import parse_settings
from reference_server.testing import serve_in_thread

TOKENS = 6
SETTINGS = {
    "functions": [
        {"api_name": "tokens", "workload": "tokens",
         "params": {"tokens": TOKENS, "ttft_ms": 20, "interval_ms": 10}, "concurrency_limit": 4},
        {"api_name": "gpt", "workload": "text-generation",
         "params": {"size": "tiny", "max_new_tokens": 8, "temperature": 0, "seed": 0}},
        {"api_name": "echo", "workload": "echo"},
        {"api_name": "busy", "workload": "tokens", "params": {"tokens": 2, "ttft_ms": 300},
         "concurrency_limit": 1},
    ],
    "queue": {"max_size": 1},
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(parse_settings(SETTINGS), startup_timeout_s=120) as server:
        yield server.url


@pytest.fixture
def client(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30) as c:
        yield c


def test_models_lists_the_text_functions(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["tokens", "gpt", "echo", "busy"]


def test_chat_create_and_stream_with_usage(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(model="tokens", messages=[{"role": "user", "content": "a b c"}])
    assert done.choices[0].message.content == " ".join(f"t{i}" for i in range(TOKENS))
    assert done.choices[0].finish_reason == "stop" and done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (3, TOKENS)
    stream = client.chat.completions.create(
        model="tokens", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=4,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "t0 t1 t2 t3"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4


def test_completions_stream_from_gpt2_and_plain_echo(client: openai.OpenAI) -> None:
    stream = client.completions.create(model="gpt", prompt="The queue was", max_tokens=5, stream=True)
    pieces = [c.choices[0].text for c in stream if c.choices]
    assert len(pieces) == 6 and pieces[-1] == ""  # five tokens, then the finish chunk
    whole = client.completions.create(model="gpt", prompt="The queue was", max_tokens=5)
    assert whole.choices[0].text == "".join(pieces) and whole.usage is not None
    assert whole.usage.completion_tokens == 5 and whole.usage.prompt_tokens >= 1
    echo = client.completions.create(model="echo", prompt="same words back")
    assert echo.choices[0].text == "same words back" and echo.choices[0].finish_reason == "stop"


def test_bad_requests_are_4xx_with_a_reason(client: openai.OpenAI, url: str) -> None:
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model="tokens", prompt="x", max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="tokens", messages=[])
    resp = httpx.post(url + "/v1/completions", content=b"{not json")
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["error"]["message"]


def test_full_queue_is_503_with_retry_after(url: str) -> None:
    body = {"model": "busy", "prompt": "x", "stream": True}
    with httpx.Client(base_url=url, timeout=10) as http:
        first, second = (http.stream("POST", "/v1/completions", json=body) for _ in range(2))
        with first, second:
            refused = http.post("/v1/completions", json=body)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert "Queue is full" in refused.json()["error"]["message"]
    deadline = time.monotonic() + 10  # the streams above went away: their events leave the queue
    while httpx.get(url + "/gradio_api/queue/status").json()["queue_size"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert httpx.get(url + "/gradio_api/queue/status").json()["queue_size"] == 0


def test_qbench_measures_the_token_stream(url: str, tmp_path: Path) -> None:
    spec = parse_scenario(dict(
        name="tokens",
        protocol="openai",
        endpoint={"model": "tokens", "max_tokens": 5},
        payload={"inputs": [{"text": {"words": [2, 4]}}]},
        # one user: this module's server has queue.max_size 1 (for the 503 test), so a second user's
        # join can race the dispatcher and be refused
        load={"users": 1, "requests": 6, "timeout": 20},
    ))
    result = run_scenario(spec, target=url, out_dir=tmp_path / "r", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    for r in result.records:
        assert (r.output_tokens, r.tokens_from, r.finish_reason, r.itl_count) == (5, "usage", "length", 4)
        # what holds at any speed: no token before its 20 ms prefill, the last no sooner than 4 x 10 ms
        # after it; the gaps are the spacing the client read the 5 chunks at, first to last
        assert r.ttft_s is not None and r.ttft_s >= 0.02
        assert r.latency_from_send_s is not None and r.latency_from_send_s >= 0.02 + 4 * 0.01
        assert r.itl_mean_s is not None and r.itl_p50_s is not None and r.itl_max_s is not None
        assert r.first_output_at_s is not None and r.completed_at_s is not None
        assert r.itl_mean_s * 4 <= r.completed_at_s - r.first_output_at_s + 1e-6
        assert r.itl_p50_s <= r.itl_max_s
    # a client that stalls can read two chunks as one (a gap of ~0 beside one of 20 ms), so the 10 ms
    # spacing shows in the run's typical request, not in each gap: a stall must hit most requests' first
    # chunk to hide it
    assert statistics.median(r.itl_mean_s or 0.0 for r in result.records) >= 0.005
