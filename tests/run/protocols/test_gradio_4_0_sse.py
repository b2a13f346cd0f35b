"""The `sse` family (Gradio 4.0-4.8; qbench.run.protocols.gradio_4_0_sse) against a fake session: the
join is the event's own stream, send_data posts the inputs with the event_id, refusals on either
request, a stream that ends early, and the /reset on timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from qbench.run.protocols import gradio_4_0_sse
from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_4_0_sse import JoinStreamWire
from qbench.run.protocols.gradio_wire import GradioApp
from qbench.run.records.schema import RequestRecord
from tests.run.protocols.fakes import FakeResponse, sse

APP = GradioApp(base="http://h", api="http://h", family="sse", version=(4, 8, 0), fn_index=5)


class FakeSession:
    def __init__(self, stream: FakeResponse | Exception, data_status: int = 200) -> None:
        self.stream, self.data_status = stream, data_status
        self.gets: list[tuple[str, dict[str, str]]] = []
        self.posts: list[tuple[str, Any]] = []

    def get(self, url: str, params: dict[str, str]) -> FakeResponse:
        self.gets.append((url, params))
        if isinstance(self.stream, Exception):
            raise self.stream
        return self.stream

    def post(self, url: str, data: bytes, headers: dict[str, str]) -> FakeResponse:
        self.posts.append((url, orjson.loads(data)))
        return FakeResponse(self.data_status, [b'{"detail": "bad"}' if self.data_status != 200 else b"{}"])


def send(http: FakeSession, pool: int = 0) -> RequestRecord:
    session: Any = http
    wire = JoinStreamWire(APP, session, Clock(), pool)
    r = new_record()
    asyncio.run(wire.send(r, ["x", 1], slot=0))
    return r


def new_record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="", endpoint="predict", warmup=False,
                         intended_at_s=0)


def test_a_whole_event_joins_by_get_and_sends_its_data_by_post() -> None:
    http = FakeSession(FakeResponse(200, sse(
        {"msg": "estimation", "rank": 0, "queue_size": 1},
        {"msg": "send_data", "event_id": "ev1"},
        {"msg": "process_starts"},
        {"msg": "process_completed", "success": True, "output": {"data": ["y"]}},
    )))
    r = send(http)
    assert http.gets == [("http://h/queue/join", {"fn_index": "5", "session_hash": r.session_id})]
    assert http.posts == [("http://h/queue/data", {"data": ["x", 1], "event_data": None, "fn_index": 5,
                                                   "session_hash": r.session_id, "event_id": "ev1"})]
    assert (r.outcome, r.event_id, r.http_status, r.rank) == ("ok", "ev1", 200, 0)
    assert r.joined_at_s is not None and r.started_at_s is not None
    assert r.bytes_sent == len(orjson.dumps(http.posts[0][1]))
    stream = http.stream
    assert isinstance(stream, FakeResponse)
    assert r.bytes_received == sum(len(c) for c in stream.content.chunks)


@pytest.mark.parametrize(("pool", "shared"), [(1, True), (0, False)])
def test_a_pool_session_is_shared_else_each_request_has_its_own(pool: int, shared: bool) -> None:
    done = sse({"msg": "process_completed", "success": True, "output": {"data": [1]}})
    http: Any = FakeSession(FakeResponse(200, done))
    wire = JoinStreamWire(APP, http, Clock(), pool)
    a, b = new_record(), new_record()
    for r in (a, b):
        asyncio.run(wire.send(r, [], slot=7))
    assert a.outcome == b.outcome == "ok" and (a.session_id == b.session_id) is shared


def test_a_full_queue_is_said_on_the_stream() -> None:
    r = send(FakeSession(FakeResponse(200, sse({"msg": "queue_full"}))))
    assert r.error_kind == "queue_full" and r.http_status == 200


@pytest.mark.parametrize(("status", "kind"), [(404, "http_4xx"), (502, "http_5xx")])
def test_a_refused_join(status: int, kind: str) -> None:
    r = send(FakeSession(FakeResponse(status, [b"nope"])))
    assert (r.error_kind, r.http_status, r.joined_at_s) == (kind, status, None)
    assert r.error_message == f"GET http://h/queue/join: HTTP {status}: nope"


def test_refused_data_ends_the_event() -> None:
    http = FakeSession(FakeResponse(200, sse({"msg": "send_data", "event_id": 3},
                                             {"msg": "process_completed", "success": True})), data_status=422)
    r = send(http)
    assert (r.error_kind, r.http_status, r.event_id) == ("http_4xx", 422, "3")
    assert r.error_message == 'POST http://h/queue/data: HTTP 422: {"detail": "bad"}'


def test_a_stream_that_ends_before_the_result_is_broken() -> None:
    r = send(FakeSession(FakeResponse(200, sse({"msg": "process_starts"}))))
    assert r.error_kind == "stream_broken"
    assert r.error_message == "GET http://h/queue/join: the stream ended before process_completed"


def test_no_connection_is_a_connect_error() -> None:
    r = send(FakeSession(aiohttp.ClientConnectionError("refused")))
    assert r.error_kind == "connect"
    assert r.error_message == "GET http://h/queue/join: ClientConnectionError: refused"


def test_abandon_resets_an_event_that_has_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, dict[str, Any]]] = []

    async def post(http: Any, url: str, body: dict[str, Any]) -> None:
        posted.append((url, body))

    monkeypatch.setattr(gradio_4_0_sse, "post_quietly", post)

    async def run() -> None:
        http: Any = None
        wire = JoinStreamWire(APP, http, Clock(), 0)
        waiting = new_record()
        wire.abandon(waiting)  # not asked for its data yet: the closed stream drops it
        waiting.event_id = "ev9"
        wire.abandon(waiting)
        await asyncio.sleep(0)
        await wire.close()

    asyncio.run(run())
    assert posted == [("http://h/reset", {"event_id": "ev9"})]
