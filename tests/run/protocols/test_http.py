"""Plain HTTP (qbench.run.protocols.http) without a server: the body template, the refusal kinds, which
client a target gets, and how a streamed body is counted (responses faked; aiohttp is not called)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from qbench.errors import TargetError
from qbench.run.protocols.base import Clock
from qbench.run.protocols.http import (
    HttpProtocol,
    is_stream,
    lean_pool,
    read_stream,
    refusal_kind,
    refuse,
    render,
)
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.payloads import FileValue
from qbench.run.scenario.schema import Scenario, parse_scenario

PNG = FileValue(data=b"\x89PNG", name="a.png", mime="image/png")


def scenario(endpoint: dict[str, Any], **raw: Any) -> Scenario:
    raw["load"] = {"burst": 1, **raw.get("load", {})}
    return parse_scenario({"name": "t", "protocol": "http", "endpoint": endpoint, **raw})


def record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="s", endpoint="POST /x", warmup=False,
                         intended_at_s=0.0)


@pytest.mark.parametrize(("template", "inputs", "body"), [
    ({"prompt": "$0", "n": "$1", "keep": "$", "text": "$x"}, ["hi", 3], {"prompt": "hi", "n": 3, "keep": "$",
                                                                         "text": "$x"}),
    ({"nested": [{"a": "$1"}, "$0", 5]}, [1, [2]], {"nested": [{"a": [2]}, 1, 5]}),
    ({"image": "$0"}, [PNG], {"image": "iVBORw=="}),  # files as base64
    (None, ["only"], "only"),  # no template: the one input as the body
    (None, [1, PNG], [1, "iVBORw=="]),  # several: a list
    (None, [], []),
    ("$0", [{"a": 1}], {"a": 1}),
])
def test_render_fills_dollar_strings_with_inputs(template: Any, inputs: list[Any], body: Any) -> None:
    assert render(template, inputs) == body


def test_render_names_a_missing_input() -> None:
    with pytest.raises(TargetError, match=r"endpoint.body: '\$2' but the payload has 2 input\(s\)"):
        render({"x": ["$2"]}, [1, 2])


@pytest.mark.parametrize(("status", "body", "kind"), [
    (503, b'{"detail": "Queue is full."}', "queue_full"),
    (503, b"QUEUE FULL", "queue_full"),
    (503, b"Service Unavailable", "http_5xx"),
    (500, b"queue is full", "http_5xx"),  # only a 503 says so
    (429, b"queue full", "http_4xx"),
    (404, b"", "http_4xx"),
    (503, b"\xff\xfe queue \xff full", "queue_full"),  # undecodable bytes are replaced
])
def test_refusal_kind(status: int, body: bytes, kind: str) -> None:
    assert refusal_kind(status, body) == kind


def test_the_lean_client_only_for_plain_http_without_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QBENCH_HTTP_CLIENT", raising=False)
    post = scenario({"path": "/x", "method": "POST"}, load={"max_connections": 7})
    pool = lean_pool("http://h:8000/x", post)
    assert pool is not None and (pool.host, pool.port, pool.limit) == ("h", 8000, 7)
    assert lean_pool("https://h/x", post) is None
    assert lean_pool("http://h/x", scenario({"path": "/x"}, auth={"bearer": "tok"})) is None
    monkeypatch.setenv("QBENCH_HTTP_CLIENT", "aiohttp")
    assert lean_pool("http://h/x", post) is None


def protocol(endpoint: dict[str, Any], target: str = "https://h:9/api/") -> HttpProtocol:
    http: Any = None  # not used before send
    return HttpProtocol(scenario(endpoint), target, http, Clock())


def test_the_url_headers_and_label() -> None:
    proto = protocol({"path": "/v1/run?x=1", "method": "POST", "headers": {"X-Key": "k"}})
    assert proto.url == "https://h:9/api/v1/run?x=1"
    assert proto.headers == {"Content-Type": "application/json", "X-Key": "k"}
    assert proto.endpoint_label == "POST /v1/run?x=1" and proto.pool is None


def test_the_lean_client_gets_the_request_head(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QBENCH_HTTP_CLIENT", raising=False)
    proto = protocol({"path": "/p?q=1", "method": "PUT"}, "http://h:81")
    head = proto.head.decode("latin-1").split("\r\n")
    assert head[0] == "PUT /p?q=1 HTTP/1.1" and "Host: h:81" in head
    assert "Content-Type: application/json" in head


def test_the_body_is_serialised_once_per_input_list_and_a_get_without_template_has_none() -> None:
    proto = protocol({"path": "/x", "method": "POST", "body": {"q": "$0"}})
    inputs = ["a"]
    first = proto.body(inputs)
    assert first is not None and orjson.loads(first) == {"q": "a"}
    assert proto.body(inputs) is first
    assert orjson.loads(proto.body(["b"]) or b"") == {"q": "b"}
    assert protocol({"path": "/x", "method": "GET"}).body(["a"]) is None
    get = protocol({"path": "/x", "method": "GET", "body": {"a": 1}})
    assert orjson.loads(get.body([]) or b"") == {"a": 1}
    asyncio.run(proto.close())
    assert proto._cache == {}


def test_a_list_made_per_request_never_gets_another_lists_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("qbench.run.protocols.http.BODY_CACHE", 8)
    proto = protocol({"path": "/x", "method": "POST", "body": {"q": "$0"}})
    for n in range(100):  # fresh lists, freed after each call: CPython reuses their ids
        assert orjson.loads(proto.body([f"v{n}"]) or b"") == {"q": f"v{n}"}
    assert len(proto._cache) <= 8  # bounded, whatever the number of lists


class FakeContent:
    def __init__(self, chunks: list[tuple[bytes, bool]]) -> None:
        self.chunks = chunks

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        for chunk in self.chunks:
            yield chunk

    async def read(self, n: int = -1) -> bytes:
        data = b"".join(c for c, _ in self.chunks)
        return data if n < 0 else data[:n]


class FakeResponse:
    def __init__(self, content_type: str = "application/json", chunks: list[tuple[bytes, bool]] | None = None,
                 length: int | None = None, headers: dict[str, str] | None = None, status: int = 200) -> None:
        self.content_type, self.content_length, self.headers = content_type, length, headers or {}
        self.content = FakeContent(chunks or [])
        self.status, self.method, self.url = status, "POST", "http://h/x"


@pytest.mark.parametrize(("resp", "stream"), [
    (FakeResponse("text/event-stream", length=10), True),
    (FakeResponse(headers={"Transfer-Encoding": "Chunked"}), True),
    (FakeResponse(headers={"Transfer-Encoding": "chunked"}, length=5), False),  # a length: read whole
    (FakeResponse(length=5), False),
    (FakeResponse(), False),
])
def test_is_stream(resp: Any, stream: bool) -> None:
    assert is_stream(resp) is stream


def read(resp: Any) -> RequestRecord:
    r = record()
    asyncio.run(read_stream(r, resp, Clock()))
    return r


def test_sse_events_are_counted_across_chunks_and_crlf() -> None:
    chunks = [(b"data: 1\n\nda", False), (b"", True), (b"ta: 2\r\n\r\n\n\n", True), (b"data: 3", True)]
    r = read(FakeResponse("text/event-stream", chunks))
    assert r.outputs == 3  # the blank block is not an event; the unterminated tail is
    assert r.bytes_received == sum(len(c) for c, _ in chunks)
    assert r.first_output_at_s is not None


def test_a_chunked_body_counts_one_output_per_http_chunk() -> None:
    r = read(FakeResponse(chunks=[(b"ab", False), (b"c", True), (b"de", True)]))
    assert (r.outputs, r.bytes_received) == (2, 5)


def test_an_empty_stream_has_no_first_output() -> None:
    r = read(FakeResponse("text/event-stream", []))
    assert (r.outputs, r.bytes_received, r.first_output_at_s) == (0, 0, None)


def test_a_refused_response_fails_the_record_with_the_body_in_the_message() -> None:
    r = record()
    resp: Any = FakeResponse(status=503, chunks=[(b"The queue is full\nretry later", True)])
    asyncio.run(refuse(r, resp, Clock()))
    assert (r.outcome, r.error_kind, r.bytes_received) == ("error", "queue_full", 29)
    assert r.error_message == "POST http://h/x: HTTP 503: The queue is full retry later"
