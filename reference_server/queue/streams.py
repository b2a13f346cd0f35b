"""The SSE responses: `/queue/data` (all events of a session), `/call/...` (one event), `/heartbeat`.

They are raw ASGI responses so that a client disconnect is noticed at once (a watcher awaits
`http.disconnect` and wakes the reader) and so that messages already queued go out in one write.
A session stream that a front end forwarded runs without a task (`SessionStream.attach`): the messages
put into its mailbox in one turn of the event loop are translated together just before the link's
write of that turn, and the client's leaving is a call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from reference_server.queue import messages as m
from reference_server.queue.queue import EventQueue
from reference_server.queue.sessions import DISCONNECTED, Session

GONE = "qbench.gone"  # scope["extensions"] key: a future done when the client has left (front_ends.py)
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
log = logging.getLogger("reference_server.streams")


class StreamOut(Protocol):
    """Where a stream run in callbacks writes (front_ends.CoreLink gives one per forwarded request)."""

    def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """The response's status and headers (first)."""

    def write(self, body: bytes, more: bool) -> None:
        """A piece of the body; `more` False ends the response."""

    def soon(self, callback: Callable[[], None]) -> None:
        """Call `callback` once later in this turn of the event loop, before its frames are written."""


async def _watch_disconnect(receive: Receive, session: Session) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    session.queue.put_nowait(DISCONNECTED)


def _on_leave(scope: Scope, receive: Receive, session: Session) -> Callable[[], None]:
    """Put DISCONNECTED into the session's queue when the client leaves; returns the undo.

    A request forwarded by a front end carries its `gone` future (the GONE extension): a callback on it
    costs the core no task per stream. Otherwise a watcher task awaits `http.disconnect`."""
    gone: asyncio.Future[None] | None = scope.get("extensions", {}).get(GONE)
    if gone is None:
        watcher = asyncio.create_task(_watch_disconnect(receive, session))

        def cancel() -> None:
            watcher.cancel()
        return cancel

    def left(_: asyncio.Future[None]) -> None:
        session.queue.put_nowait(DISCONNECTED)

    def stop() -> None:
        gone.remove_done_callback(left)

    gone.add_done_callback(left)
    return stop


class SessionStream(Response):
    """Base: attach to a session, translate messages with `translate`, stop when it says so."""

    def __init__(self, queue: EventQueue, session_hash: str, heartbeat_s: float) -> None:
        self.queue, self.session_hash, self.heartbeat_s = queue, session_hash, heartbeat_s

    def translate(self, session: Session, msg: m.Message) -> tuple[bytes, bool]:
        """(bytes to send, stream finished)."""
        raise NotImplementedError

    def on_missing(self) -> bytes:
        return m.frame(m.unexpected_error("404: Not Found", session_not_found=True))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        session = self.queue.sessions.get(self.session_hash)
        if session is None:
            await send({"type": "http.response.body", "body": self.on_missing(), "more_body": False})
            return
        session.readers += 1
        stop_watching = _on_leave(scope, receive, session)
        beat = self.queue.sessions.heartbeats.start(session, self.heartbeat_s)
        try:
            last = await self._pump(session, send)
            if last is not None:  # the final write carries the chunked-encoding terminator too
                await send({"type": "http.response.body", "body": last, "more_body": False})
        except OSError:
            self.queue.disconnect(self.session_hash)
        finally:
            stop_watching()
            beat.stop()
            session.readers -= 1

    def attach(self, out: StreamOut) -> Callable[[], None] | None:
        """Run the stream in callbacks, without a task (a request a front end forwarded): what `__call__`
        sends, written to `out`. Returns what to call when the client leaves (None: the stream ended at
        once)."""
        out.start(200, SSE_HEADERS)
        session = self.queue.sessions.get(self.session_hash)
        if session is None:
            out.write(self.on_missing(), False)
            return None
        return _Reader(self, session, out).left

    async def _pump(self, session: Session, send: Send) -> bytes | None:
        """Forward messages until the stream is finished (returns its last bytes) or the client left."""
        while True:
            msg = await session.queue.get()
            chunks: list[bytes] = []
            while True:
                if msg is DISCONNECTED:
                    self.queue.disconnect(self.session_hash)
                    return None
                data, finished = self.translate(session, msg)
                chunks.append(data)
                if finished:
                    return b"".join(chunks)
                try:
                    msg = session.queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
            body = b"".join(chunks)
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})


class _Reader:
    """`SessionStream._pump` in callbacks: the mailbox's listener asks `out` for one `drain` per loop
    turn, which translates every message put in that turn and writes them as one piece."""

    __slots__ = ("stream", "session", "out", "beat", "due", "done")

    def __init__(self, stream: SessionStream, session: Session, out: StreamOut) -> None:
        self.stream, self.session, self.out = stream, session, out
        self.due = self.done = False
        session.readers += 1
        self.beat = stream.queue.sessions.heartbeats.start(session, stream.heartbeat_s)
        session.queue.listeners.append(self.wake)
        if not session.queue.empty():  # messages put before the stream came (the join's estimation)
            self.wake()

    def wake(self) -> None:
        if not self.due:
            self.due = True
            self.out.soon(self.drain)

    def drain(self) -> None:
        self.due = False
        if self.done:
            return
        try:
            body, finished = self._translate_all()
        except Exception:  # noqa: BLE001 - as a task's stream would: the client's response ends, the server goes on
            log.exception("error in the stream of session %r", self.stream.session_hash)
            self._close()
            self.out.write(b"", False)
            return
        if body is None:  # another reader of the session saw its client leave: this response ends too
            self.left()
            self.out.write(b"", False)
        elif finished:
            self._close()
            self.out.write(body, False)
        elif body:
            self.out.write(body, True)

    def _translate_all(self) -> tuple[bytes | None, bool]:
        """(the turn's bytes, the stream finished); None for the bytes once DISCONNECTED came."""
        chunks: list[bytes] = []
        mailbox, translate, session = self.session.queue, self.stream.translate, self.session
        while not mailbox.empty():
            msg = mailbox.get_nowait()
            if msg is DISCONNECTED:
                return None, False
            data, finished = translate(session, msg)
            chunks.append(data)
            if finished:
                return b"".join(chunks), True
        return b"".join(chunks), False

    def left(self) -> None:
        """The client left: the session's waiting events are dropped, as `__call__` does."""
        if not self.done:
            self._close()
            self.stream.queue.disconnect(self.stream.session_hash)

    def _close(self) -> None:
        self.done = True
        self.beat.stop()
        self.session.readers -= 1
        if self.wake in self.session.queue.listeners:
            self.session.queue.listeners.remove(self.wake)


class QueueDataStream(SessionStream):
    """`GET /gradio_api/queue/data`: every message of the session; close_stream when nothing is pending."""

    def translate(self, session: Session, msg: m.Message) -> tuple[bytes, bool]:
        data = m.frame(msg)
        if msg["msg"] == "process_completed":
            session.pending.discard(msg["event_id"])
            if not session.pending:
                if self.queue.sessions.get(self.session_hash) is session:
                    self.queue.sessions.drop(self.session_hash)
                return data + m.frame(m.CLOSE_STREAM), True
        return data, False


def _named(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class CallStream(SessionStream):
    """`GET /gradio_api/call/{api_name}/{event_id}`: named SSE events for one event, full values."""

    def __init__(self, queue: EventQueue, session_hash: str, event_id: str, heartbeat_s: float) -> None:
        super().__init__(queue, session_hash, heartbeat_s)
        self.event_id = event_id

    def on_missing(self) -> bytes:
        return _named("error", "Event not found (it may have been read already).")

    def translate(self, session: Session, msg: m.Message) -> tuple[bytes, bool]:
        kind = msg["msg"]
        if kind == "heartbeat":
            return b"event: heartbeat\ndata: null\n\n", False
        if msg["event_id"] != self.event_id:
            if msg["event_id"] is not None and kind == "process_completed":
                session.pending.discard(msg["event_id"])
            return b"", False
        if kind == "process_generating":
            return _named("generating", msg["output"]["data"]), False
        if kind != "process_completed":
            return b"", False
        session.pending.discard(self.event_id)
        if not session.pending:
            self.queue.sessions.drop(self.session_hash)
        if msg["success"]:
            return _named("complete", msg["output"].get("data", [])), True
        return _named("error", msg["output"]), True


class HeartbeatStream(Response):
    """`GET /gradio_api/heartbeat/{session}`: `data: ALIVE` every interval until the client leaves."""

    def __init__(self, interval_s: float, on_close: Callable[[], None] | None = None) -> None:
        self.interval_s, self.on_close = interval_s, on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})

        async def beat() -> None:
            while True:
                await send({"type": "http.response.body", "body": b"data: ALIVE\n\n", "more_body": True})
                await asyncio.sleep(self.interval_s)

        task = asyncio.create_task(beat())
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            task.cancel()
            if self.on_close:
                self.on_close()
