"""The SSE responses driven as raw ASGI apps: what they write, when they stop, and who leaves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from reference_server.queue import messages as m
from reference_server.queue.queue import EventQueue
from reference_server.queue.sessions import Sessions
from reference_server.queue.streams import GONE, CallStream, HeartbeatStream, QueueDataStream


class FakeQueue:
    """What a stream uses of EventQueue: the session table and disconnect()."""

    def __init__(self) -> None:
        self.sessions = Sessions()
        self.disconnected: list[str] = []

    def disconnect(self, session: str) -> None:
        self.disconnected.append(session)
        self.sessions.drop(session)


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


async def serve(app: ASGIApp, leave_after_s: float | None = None) -> list[dict[str, Any]]:
    """Run the response; the client leaves after `leave_after_s` (never if None). Returns what was sent."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if leave_after_s is None:
            await asyncio.Event().wait()
        await asyncio.sleep(leave_after_s or 0)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app({"type": "http"}, receive, send), 2.0)
    return sent


def body(sent: list[dict[str, Any]]) -> bytes:
    return b"".join(s.get("body", b"") for s in sent)


def done(event_id: str, data: list[Any], success: bool = True) -> m.Message:
    return m.process_completed(event_id, m.output_body(data, False, 0.1, 0.1), success)


def test_a_missing_session_gets_one_session_not_found_frame() -> None:
    queue = FakeQueue()
    sent = asyncio.run(serve(QueueDataStream(cast(EventQueue, queue), "nobody", 15.0)))
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert body(sent) == m.frame(m.unexpected_error("404: Not Found", session_not_found=True))
    assert sent[-1]["more_body"] is False


def test_queue_data_sends_everything_and_closes_when_nothing_is_pending() -> None:
    queue = FakeQueue()
    session = queue.sessions.open("s")
    session.pending |= {"e1", "e2"}
    first = [m.process_starts("e1", None), done("e1", ["a"])]
    for message in first:
        session.queue.put_nowait(message)

    async def main() -> list[dict[str, Any]]:
        task = asyncio.create_task(serve(QueueDataStream(cast(EventQueue, queue), "s", 15.0)))
        await asyncio.sleep(0.02)
        session.queue.put_nowait(done("e2", ["b"]))
        return await task

    sent = asyncio.run(main())
    chunks = [s["body"] for s in sent[1:]]
    assert chunks == [b"".join(map(m.frame, first)),  # queued messages went out in one write
                      m.frame(done("e2", ["b"])) + m.frame(m.CLOSE_STREAM)]
    assert sent[-1]["more_body"] is False
    assert "s" not in queue.sessions and session.readers == 0 and not queue.disconnected


def test_a_client_that_leaves_disconnects_its_session() -> None:
    queue = FakeQueue()
    session = queue.sessions.open("s")
    session.pending.add("e1")
    sent = asyncio.run(serve(QueueDataStream(cast(EventQueue, queue), "s", 15.0), leave_after_s=0.02))
    assert queue.disconnected == ["s"] and session.readers == 0
    assert body(sent) == b""


def test_a_reader_gets_heartbeats_while_it_waits() -> None:
    queue = FakeQueue()
    queue.sessions.open("s").pending.add("e1")
    sent = asyncio.run(serve(QueueDataStream(cast(EventQueue, queue), "s", 0.01), leave_after_s=0.1))
    assert body(sent).count(m.frame(m.HEARTBEAT)) >= 3


def test_call_stream_sends_named_events_of_its_event_only() -> None:
    queue = FakeQueue()
    session = queue.sessions.open("s")
    session.pending |= {"e1", "other"}
    for message in [m.HEARTBEAT, m.process_starts("e1", None),
                    m.process_generating("other", m.output_body(["x"], True, None, None)),
                    done("other", ["x"]),
                    m.process_generating("e1", m.output_body(["par"], True, None, None)),
                    done("e1", ["full"])]:
        session.queue.put_nowait(message)
    sent = asyncio.run(serve(CallStream(cast(EventQueue, queue), "s", "e1", 15.0)))
    assert body(sent) == (b"event: heartbeat\ndata: null\n\n"
                          b'event: generating\ndata: ["par"]\n\n'
                          b'event: complete\ndata: ["full"]\n\n')
    assert "s" not in queue.sessions  # both events delivered their terminal message


def test_call_stream_reports_a_failure_as_an_error_event() -> None:
    queue = FakeQueue()
    session = queue.sessions.open("s")
    session.pending |= {"e1", "e2"}
    session.queue.put_nowait(m.process_completed("e1", {"error": "boom"}, False, "Error"))
    sent = asyncio.run(serve(CallStream(cast(EventQueue, queue), "s", "e1", 15.0)))
    assert body(sent) == b'event: error\ndata: {"error": "boom"}\n\n'
    assert queue.sessions.get("s") is session and session.pending == {"e2"}  # e2 still to be read


def test_call_stream_for_a_missing_session_says_the_event_is_gone() -> None:
    sent = asyncio.run(serve(CallStream(cast(EventQueue, FakeQueue()), "nobody", "e1", 15.0)))
    assert body(sent).startswith(b"event: error\ndata: ") and b"not found" in body(sent)


def test_heartbeat_stream_beats_until_the_client_leaves_then_calls_back() -> None:
    closed: list[bool] = []
    sent = asyncio.run(serve(HeartbeatStream(0.01, lambda: closed.append(True)), leave_after_s=0.06))
    assert body(sent).count(b"data: ALIVE\n\n") >= 3 and closed == [True]


def test_a_stream_with_a_gone_future_hears_the_client_leave_without_a_watcher_task() -> None:
    """A request forwarded by a front end carries a future done when its client leaves (GONE): the
    stream stops on it, without a task awaiting `http.disconnect` (receive is never called)."""
    queue = FakeQueue()
    queue.sessions.add_pending("s", "e1")

    async def scenario() -> tuple[list[dict[str, Any]], int]:
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            raise AssertionError("a stream with a GONE future must not read from receive")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        stream = QueueDataStream(cast(EventQueue, queue), "s", 15.0)
        running = asyncio.ensure_future(stream({"type": "http", "extensions": {GONE: gone}}, receive, send))
        await asyncio.sleep(0.01)
        tasks = len(asyncio.all_tasks())
        gone.set_result(None)
        await asyncio.wait_for(running, 2.0)
        return sent, tasks

    sent, tasks = asyncio.run(scenario())
    assert tasks == 2  # the scenario and the stream: no watcher
    assert sent[0]["status"] == 200 and queue.disconnected == ["s"]
