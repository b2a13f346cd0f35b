"""The OpenAI front through the app: which functions are models, answers whole and streamed,
max_tokens, usage, and every client mistake as a 4xx naming its parameter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from reference_server.http.app import build_app
from reference_server.settings import synthetic_settings

FUNCTIONS: list[dict[str, Any]] = [
    {"api_name": "echo", "workload": "echo", "concurrency_limit": None},
    {"api_name": "tok", "workload": "tokens", "params": {"tokens": 5, "ttft_ms": 0, "interval_ms": 0},
     "concurrency_limit": None},
    {"api_name": "broken", "workload": "fail", "params": {"message": "boom"}},
    {"api_name": "num", "workload": "echo", "params": {"type": "number"}},  # not text: not a model
    {"api_name": "img", "workload": "imageop"},  # not text: not a model
]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(synthetic_settings(functions=FUNCTIONS, show_error=True))) as c:
        yield c


def chat(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "a b c"}],
                                                     **body})


def sse(text: str) -> list[Any]:
    """The `data:` payloads of an SSE body ("[DONE]" kept as a string)."""
    out: list[Any] = []
    for line in text.split("\n\n"):
        if line.startswith("data: "):
            data = line[len("data: "):]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def test_models_are_the_functions_with_one_text_input_and_output(client: TestClient) -> None:
    body = client.get("/v1/models").json()
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["echo", "tok", "broken"]


def test_a_whole_chat_answer_with_usage_counted_in_words(client: TestClient) -> None:
    answer = chat(client, model="echo")
    body = answer.json()
    assert answer.status_code == 200 and body["object"] == "chat.completion" and body["model"] == "echo"
    assert body["id"].startswith("chatcmpl-")
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "a b c"},
                                "finish_reason": "stop"}]
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}


def test_messages_and_content_parts_are_joined_into_one_prompt(client: TestClient) -> None:
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url"},
                                             {"type": "text", "text": "y"}]}]
    body = client.post("/v1/chat/completions", json={"model": "echo", "messages": messages}).json()
    assert body["choices"][0]["message"]["content"] == "be brief\nx  y"


def test_a_whole_completion_of_a_token_streamer(client: TestClient) -> None:
    body = client.post("/v1/completions", json={"model": "tok", "prompt": ["go"]}).json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["choices"] == [{"index": 0, "text": "t0 t1 t2 t3 t4", "logprobs": None,
                                "finish_reason": "stop"}]
    assert body["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_stops_the_generator_with_finish_reason_length(client: TestClient, key: str) -> None:
    body = chat(client, model="tok", **{key: 2}).json()
    assert body["choices"][0]["message"]["content"] == "t0 t1"
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 2


def test_a_streamed_chat_sends_role_deltas_finish_usage_and_done(client: TestClient) -> None:
    answer = chat(client, model="tok", stream=True, stream_options={"include_usage": True}, max_tokens=3)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    frames = sse(answer.text)
    assert frames[-1] == "[DONE]"
    chunks = frames[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:4]] == ["t0", " t1", " t2"]
    assert chunks[4]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "length"}
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["completion_tokens"] == 3


def test_a_streamed_completion_without_usage(client: TestClient) -> None:
    answer = client.post("/v1/completions", json={"model": "echo", "prompt": "hi", "stream": True})
    frames = sse(answer.text)
    assert [f["choices"][0]["text"] for f in frames[:-1]] == ["hi", ""]
    assert frames[-2]["choices"][0]["finish_reason"] == "stop" and frames[-1] == "[DONE]"
    assert all("usage" not in f for f in frames[:-1])


def test_a_failed_job_is_a_server_error_whole_or_streamed(client: TestClient) -> None:
    whole = chat(client, model="broken")
    assert whole.status_code == 500
    assert whole.json()["error"]["type"] == "server_error" and "boom" in whole.json()["error"]["message"]
    frames = sse(chat(client, model="broken", stream=True).text)
    assert frames[-1]["error"]["type"] == "server_error" and "[DONE]" not in frames


@pytest.mark.parametrize(
    ("path", "body", "status", "param", "reason"),
    [
        ("/v1/chat/completions", b"{oops", 400, None, "not valid JSON"),
        ("/v1/chat/completions", b"[]", 400, None, "must be a JSON object"),
        ("/v1/chat/completions", b'{"messages": [{"content": "x"}]}', 400, "model", "'model' is required"),
        ("/v1/chat/completions", b'{"model": "img", "messages": [{"content": "x"}]}', 404, "model",
         "served: echo, tok, broken"),
        ("/v1/chat/completions", b'{"model": "echo", "messages": []}', 400, "messages", "non-empty list"),
        ("/v1/chat/completions", b'{"model": "echo", "messages": "hi"}', 400, "messages", "non-empty list"),
        ("/v1/chat/completions", b'{"model": "echo", "messages": [{"content": 3}]}', 400,
         "messages[0].content", "must be a string"),
        ("/v1/chat/completions", b'{"model": "echo", "messages": ["hi"]}', 400, "messages[0].content",
         "must be a string"),
        ("/v1/completions", b'{"model": "echo", "prompt": ""}', 400, "prompt", "non-empty string"),
        ("/v1/completions", b'{"model": "echo", "prompt": ["a", "b"]}', 400, "prompt", "non-empty string"),
        ("/v1/completions", b'{"model": "echo", "prompt": "a", "max_tokens": 0}',
         400, "max_tokens", ">= 1"),
        ("/v1/completions", b'{"model": "echo", "prompt": "a", "max_tokens": true}',
         400, "max_tokens", ">= 1"),
        ("/v1/completions", b'{"model": "echo", "prompt": "a", "max_tokens": "3"}',
         400, "max_tokens", ">= 1"),
        ("/v1/completions", b'{"model": "echo", "prompt": "a", "stream_options": [1]}', 400, "stream_options",
         "must be an object"),
    ],
)
def test_client_mistakes_are_4xx_naming_the_parameter(
    client: TestClient, path: str, body: bytes, status: int, param: str | None, reason: str
) -> None:
    answer = client.post(path, content=body)
    error = answer.json()["error"]
    assert answer.status_code == status and reason in error["message"], answer.text
    assert error["param"] == param and error["type"] in ("invalid_request_error", "not_found_error")


def test_a_full_queue_is_503_with_retry_after() -> None:
    settings = synthetic_settings(functions=[{"api_name": "echo", "workload": "echo"}], queue={"max_size": 0})
    with TestClient(build_app(settings)) as client:
        answer = chat(client, model="echo")
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json()["error"]["type"] == "queue_full"
        assert len(client.app.state.server.queue.sessions) == 0  # type: ignore[attr-defined]
