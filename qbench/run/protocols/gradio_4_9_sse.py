"""The session-stream families (sse_v1 to sse_v3, Gradio 4.9 on): join by POST, follow the session stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from qbench.run.protocols.base import JSON_HEADERS, Clock, fail, http_problem, status_kind
from qbench.run.protocols.gradio_wire import (
    Background,
    GradioApp,
    apply_message,
    new_session_hash,
    pick_session,
    post_quietly,
    sse_messages,
)
from qbench.run.records.schema import RequestRecord

MessageHandler = Callable[[RequestRecord, dict[str, Any], int, float], bool]

#: Reopen attempts in a row that bring no message for a pending event before giving up on them.
MAX_EMPTY_REOPENS = 3
MAX_ORPHANS = 10_000
CLOSE_GRACE_S = 1.0  # how long to wait for the end of the response after close_stream


async def _read_to_eof(resp: aiohttp.ClientResponse) -> None:
    """After close_stream let the server end the response (a hang-up first can look like a disconnect)."""
    try:
        await asyncio.wait_for(resp.content.read(), CLOSE_GRACE_S)
    except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
        pass


def _unexpected(msg: dict[str, Any]) -> str:
    if msg.get("session_not_found"):
        return (f"{msg.get('message')}: session not found: the server that answered the stream has no "
                "message queue for this session (its join reached another replica, or the server dropped "
                "the session: Gradio keeps at most 2000)")
    return str(msg.get("message"))


class GradioSession:
    """A session_hash, its pending events and its (single) SSE reader."""

    def __init__(
        self,
        session_hash: str,
        http: aiohttp.ClientSession,
        data_url: str,
        clock: Clock,
        handler: MessageHandler,
        *,
        shared: bool = False,
        close_message: bool = True,
    ) -> None:
        self.hash = session_hash
        self.http = http
        self.url = f"{data_url}?session_hash={session_hash}"
        self.clock = clock
        self.handler = handler
        self.shared = shared  # True: a pool session with a reader task; False: read inline by the request
        self.close_message = close_message  # sse_v3 ends a stream with close_stream; earlier ones just end
        self.pending: dict[str, tuple[RequestRecord, asyncio.Future[None] | None]] = {}
        self.orphans: dict[str, list[tuple[dict[str, Any], int, float]]] = {}
        self.dropped: set[str] = set()
        self.reader: asyncio.Task[None] | None = None

    async def follow(self, record: RequestRecord) -> None:
        """Wait until the joined event reaches a terminal message (or the stream breaks)."""
        assert record.event_id is not None
        if not self.shared:
            self.pending[record.event_id] = (record, None)
            await self._read_loop()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending[record.event_id] = (record, future)
        for msg, nbytes, at in self.orphans.pop(record.event_id, []):
            self._route(msg, nbytes, at)
        if future.done():
            return
        if self.reader is None:
            self.reader = asyncio.get_running_loop().create_task(self._reader_task())
        await future

    def forget(self, event_id: str) -> None:
        """Stop tracking an event the executor gave up on; later messages for it are ignored."""
        self.pending.pop(event_id, None)
        self.dropped.add(event_id)

    async def stop(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            try:
                await self.reader
            except asyncio.CancelledError:
                pass

    async def _reader_task(self) -> None:
        try:
            await self._read_loop()
        except Exception as exc:  # never lose records to a bug in the reader
            self._fail_all("client", f"SSE reader: {exc.__class__.__name__}: {exc}")
        finally:
            self.reader = None

    async def _read_loop(self) -> None:
        empty = 0
        while self.pending:
            before = len(self.pending)
            problem = await self._read_once()
            if problem is not None:
                self._fail_all("stream_broken", problem)
                return
            empty = empty + 1 if len(self.pending) == before else 0
            if empty >= MAX_EMPTY_REOPENS:
                self._fail_all("stream_broken", "stream closed repeatedly without news of pending events")
                return

    async def _read_once(self) -> str | None:
        """Read one stream to its end; None after a clean close_stream, else what went wrong."""
        try:
            async with self.http.get(self.url) as resp:
                if resp.status != 200:
                    return http_problem("GET", self.url, resp.status, await resp.read())
                async for msg, nbytes, at in sse_messages(resp, self.clock):
                    if msg.get("msg") == "close_stream":
                        await _read_to_eof(resp)
                        return None
                    self._route(msg, nbytes, at)
                return "SSE stream ended before close_stream" if self.close_message else None
        except (aiohttp.ClientError, OSError) as exc:
            return f"SSE stream: {exc.__class__.__name__}: {exc}"

    def _route(self, msg: dict[str, Any], nbytes: int, at: float) -> None:
        event_id = msg.get("event_id")
        if event_id is None:
            if msg.get("msg") == "unexpected_error":
                self._fail_all("server_error", _unexpected(msg), at)
            return
        entry = self.pending.get(event_id)
        if entry is None:
            if self.shared and event_id not in self.dropped and len(self.orphans) < MAX_ORPHANS:
                self.orphans.setdefault(event_id, []).append((msg, nbytes, at))
            return
        record, future = entry
        if self.handler(record, msg, nbytes, at):
            del self.pending[event_id]
            if future is not None and not future.done():
                future.set_result(None)

    def _fail_all(self, kind: str, message: str, at: float | None = None) -> None:
        when = self.clock.now() if at is None else at
        for record, future in self.pending.values():
            fail(record, kind, message, when)
            if future is not None and not future.done():
                future.set_result(None)
        self.pending.clear()


class SessionStreamWire:
    def __init__(self, app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int,
                 handler: MessageHandler = apply_message) -> None:
        self.app, self.http, self.clock = app, http, clock
        self.handler = handler  # how a message updates its record (streamed inputs add their own)
        self.pool = [self._session(new_session_hash(), shared=True) for _ in range(pool)]
        self.background = Background()

    def _session(self, session_hash: str, shared: bool = False) -> GradioSession:
        return GradioSession(
            session_hash,
            self.http,
            self.app.api + "/queue/data",
            self.clock,
            self.handler,
            shared=shared,
            close_message=self.app.family == "sse_v3",
        )

    def session_hash(self, record: RequestRecord, slot: int) -> str:
        return pick_session(record, slot, [s.hash for s in self.pool])

    async def send(self, record: RequestRecord, data: list[Any], slot: int) -> None:
        session = await self.join(record, data, slot)
        if session is not None:
            await session.follow(record)

    def body(self, data: list[Any], session_hash: str) -> bytes:
        """The join's body (a streamed input's next chunk is the same body)."""
        return orjson.dumps({"data": data, "event_data": self.app.event_data, "fn_index": self.app.fn_index,
                             "session_hash": session_hash})

    async def join(self, record: RequestRecord, data: list[Any], slot: int) -> GradioSession | None:
        """Join the queue in the session of `slot`: the session to follow, None when the join failed."""
        record.session_id = self.session_hash(record, slot)
        session = next((s for s in self.pool if s.hash == record.session_id), None)
        session = session or self._session(record.session_id)  # a journey's (one at a time) or a new one
        url = self.app.api + "/queue/join"
        body = self.body(data, session.hash)
        record.bytes_sent += len(body)
        try:
            async with self.http.post(url, data=body, headers=JSON_HEADERS) as resp:
                raw = await resp.read()
                record.http_status = resp.status
                record.bytes_received += len(raw)
        except (aiohttp.ClientError, OSError) as exc:
            fail(record, "connect", f"POST {url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return None
        if resp.status != 200:
            kind = "queue_full" if resp.status == 503 else status_kind(resp.status)
            fail(record, kind, http_problem("POST", url, resp.status, raw), self.clock.now())
            return None
        record.joined_at_s = self.clock.now()
        record.event_id = str(orjson.loads(raw)["event_id"])
        return session

    def abandon(self, record: RequestRecord) -> None:
        """Timeout: forget the event locally and cancel it on the server (/cancel from 4.31, else /reset)."""
        if record.event_id is None:
            return
        for session in self.pool:
            if session.hash == record.session_id:
                session.forget(record.event_id)
        route, body = "/reset", dict[str, Any](event_id=record.event_id)
        if self.app.has_cancel_route:
            route = "/cancel"
            body.update(session_hash=record.session_id, fn_index=self.app.fn_index)
        self.background.spawn(post_quietly(self.http, self.app.api + route, body))

    async def close(self) -> None:
        self.background.cancel_all()
        for session in self.pool:
            await session.stop()
