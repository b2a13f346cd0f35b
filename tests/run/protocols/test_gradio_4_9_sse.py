"""The session-stream families (sse_v1..sse_v3, Gradio 4.9 on; qbench.run.protocols.gradio_4_9_sse)
against a fake session: join by POST, the event followed on its session's stream, close_stream (v3)
or the end of the response (before), reopened streams, refusals, messages that arrive before their
event is known, and the cancel route by release."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from qbench.run.protocols import gradio_4_9_sse
from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_4_9_sse import MAX_EMPTY_REOPENS, GradioSession, SessionStreamWire
from qbench.run.protocols.gradio_wire import GradioApp, apply_message
from qbench.run.records.schema import RequestRecord
from tests.run.protocols.fakes import FakeResponse

CLOSE = {"msg": "close_stream"}


def app(family: str = "sse_v3", version: tuple[int, ...] = (5, 50, 0)) -> GradioApp:
    return GradioApp(base="http://h", api="http://h/gradio_api", family=family, version=version, fn_index=1)


def done(event_id: str) -> dict[str, Any]:
    return {"msg": "process_completed", "event_id": event_id, "success": True, "output": {"data": [1]}}


class FakeSession:
    """POST /queue/join answers `join`; each GET of the session stream plays the next of `streams`
    (the last one again when they run out)."""

    def __init__(self, join: FakeResponse | Exception, streams: list[FakeResponse]) -> None:
        self.join, self.streams = join, streams
        self.posts: list[tuple[str, Any]] = []
        self.gets: list[str] = []

    def post(self, url: str, data: bytes, headers: dict[str, str]) -> FakeResponse:
        self.posts.append((url, orjson.loads(data)))
        if isinstance(self.join, Exception):
            raise self.join
        return self.join

    def get(self, url: str) -> FakeResponse:
        self.gets.append(url)
        return self.streams.pop(0) if len(self.streams) > 1 else self.streams[0]


def new_record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="", endpoint="predict", warmup=False,
                         intended_at_s=0)


def send(http: FakeSession, family: str = "sse_v3") -> RequestRecord:
    session: Any = http
    wire = SessionStreamWire(app(family), session, Clock(), 0)
    r = new_record()
    asyncio.run(wire.send(r, ["x"], slot=0))
    return r


def joined(event_id: str = "e1") -> FakeResponse:
    return FakeResponse(200, orjson.dumps({"event_id": event_id}))


def test_an_sse_v3_event_is_joined_and_followed_to_close_stream() -> None:
    stream = FakeResponse(200, [{"msg": "estimation", "event_id": "e1", "rank": 2}, {"msg": "heartbeat"},
                                {"msg": "process_starts", "event_id": "other"}, done("e1"), CLOSE])
    http = FakeSession(joined(), [stream])
    r = send(http)
    assert http.posts == [("http://h/gradio_api/queue/join",
                           {"data": ["x"], "event_data": None, "fn_index": 1, "session_hash": r.session_id})]
    assert http.gets == [f"http://h/gradio_api/queue/data?session_hash={r.session_id}"]
    assert (r.outcome, r.event_id, r.rank, r.started_at_s, r.http_status) == ("ok", "e1", 2, None, 200)
    frames = stream.content.chunks  # the join's answer and this event's frames; not another event's
    assert r.bytes_received == len(b'{"event_id":"e1"}') + len(frames[0]) + len(frames[3])


@pytest.mark.parametrize(("join", "kind", "message"), [
    (FakeResponse(503, b"Queue is full"), "queue_full",
     "POST http://h/gradio_api/queue/join: HTTP 503: Queue is full"),
    (FakeResponse(422, b""), "http_4xx", "POST http://h/gradio_api/queue/join: HTTP 422: (empty body)"),
    (aiohttp.ClientConnectionError("refused"), "connect",
     "POST http://h/gradio_api/queue/join: ClientConnectionError: refused"),
])
def test_a_refused_join(join: FakeResponse | Exception, kind: str, message: str) -> None:
    http = FakeSession(join, [FakeResponse(200, [CLOSE])])
    r = send(http)
    assert (r.error_kind, r.error_message, r.joined_at_s) == (kind, message, None)
    assert http.gets == []  # no stream opened for a failed join


def test_before_v3_the_end_of_the_response_ends_the_stream() -> None:
    r = send(FakeSession(joined(), [FakeResponse(200, [done("e1")])]), family="sse_v1")
    assert r.outcome == "ok"


def test_before_v3_a_stream_that_ends_early_is_reopened() -> None:
    http = FakeSession(joined(), [FakeResponse(200, [{"msg": "process_starts", "event_id": "e1"}]),
                                  FakeResponse(200, []), FakeResponse(200, [done("e1")])])
    r = send(http, family="sse_v2")
    assert r.outcome == "ok" and len(http.gets) == 3


def test_streams_that_never_bring_news_give_up() -> None:
    http = FakeSession(joined(), [FakeResponse(200, [])])
    r = send(http, family="sse_v2.1")
    assert r.error_kind == "stream_broken" and len(http.gets) == MAX_EMPTY_REOPENS
    assert r.error_message == "stream closed repeatedly without news of pending events"


@pytest.mark.parametrize(("stream", "message"), [
    (FakeResponse(200, [{"msg": "process_starts", "event_id": "e1"}]),
     "SSE stream ended before close_stream"),
    (FakeResponse(404, b"gone"), "GET http://h/gradio_api/queue/data?session_hash="),
])
def test_a_v3_stream_that_ends_without_close_stream_is_broken(stream: FakeResponse, message: str) -> None:
    r = send(FakeSession(joined(), [stream]))
    assert r.error_kind == "stream_broken" and r.error_message is not None and message in r.error_message


@pytest.mark.parametrize(("msg", "message"), [
    ({"msg": "unexpected_error", "message": "boom"}, "boom"),
    ({"msg": "unexpected_error", "message": "Error", "session_not_found": True},
     "Error: session not found: the server that answered the stream has no message queue"),
])
def test_an_unexpected_error_for_the_session_fails_its_events(msg: dict[str, Any], message: str) -> None:
    r = send(FakeSession(joined(), [FakeResponse(200, [msg, done("e1"), CLOSE])]))
    assert r.error_kind == "server_error" and r.error_message is not None
    assert r.error_message.startswith(message)


def shared_session() -> GradioSession:
    http: Any = None
    return GradioSession("abc", http, "http://h/queue/data", Clock(), apply_message, shared=True)


def test_messages_before_the_join_answer_are_kept_and_replayed() -> None:
    session = shared_session()
    session._route({"msg": "estimation", "event_id": "e1", "rank": 4}, 10, 0.1)
    session._route(done("e1"), 20, 0.2)
    r = new_record()
    r.event_id = "e1"
    asyncio.run(session.follow(r))  # both messages replayed: no reader needed
    assert (r.outcome, r.rank, r.completed_at_s, r.bytes_received) == ("ok", 4, 0.2, 30)
    assert session.reader is None and session.orphans == {} and session.pending == {}


def test_a_forgotten_event_keeps_no_messages() -> None:
    session = shared_session()
    session.forget("e9")
    session._route(done("e9"), 20, 0.2)
    assert session.orphans == {} and "e9" in session.dropped


@pytest.mark.parametrize(("version", "route", "body"), [
    ((4, 31, 0), "/cancel", {"event_id": "e1", "session_hash": "S", "fn_index": 1}),
    ((4, 30, 0), "/reset", {"event_id": "e1"}),
])
def test_abandon_cancels_by_release(monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...], route: str,
                                    body: dict[str, Any]) -> None:
    posted: list[tuple[str, dict[str, Any]]] = []

    async def post(http: Any, url: str, sent: dict[str, Any]) -> None:
        posted.append((url, sent))

    monkeypatch.setattr(gradio_4_9_sse, "post_quietly", post)

    async def run() -> set[str]:
        http: Any = None
        wire = SessionStreamWire(app(version=version), http, Clock(), 1)
        r = new_record()
        wire.abandon(r)  # never joined: nothing to cancel
        r.session_id, r.event_id = "S", "e1"
        wire.abandon(r)
        wire.pool[0].hash = "S"
        wire.abandon(r)
        await asyncio.sleep(0)
        await wire.close()
        return wire.pool[0].dropped

    assert asyncio.run(run()) == {"e1"}  # forgotten in the pool session it belongs to
    assert posted == [("http://h/gradio_api" + route, body)] * 2


def test_the_join_body() -> None:
    http: Any = None
    wire = SessionStreamWire(GradioApp("http://h", "http://h", "sse_v1", (4, 9), 3, {"value": 1}), http,
                             Clock(), 0)
    assert orjson.loads(wire.body([1, None], "S")) == {"data": [1, None], "event_data": {"value": 1},
                                                      "fn_index": 3, "session_hash": "S"}
