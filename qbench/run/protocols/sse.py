"""One Gradio session's SSE stream (`/queue/data`): read frames, route them by event_id onto records.

A session has at most ONE open reader (two readers would compete for the session's messages). It
reads until the server's `close_stream`, and reopens while events are still pending (a job joined
after the server decided to close). Messages that arrive for an event whose join response has not
been processed yet are kept and replayed when the event is registered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from qbench.run.protocols.base import Clock, fail
from qbench.run.records import RequestRecord

MessageHandler = Callable[[RequestRecord, dict[str, Any], int, float], bool]

#: Reopen attempts in a row that bring no message for a pending event before giving up on them.
MAX_EMPTY_REOPENS = 3
MAX_ORPHANS = 10_000
CLOSE_GRACE_S = 1.0  # how long to wait for the end of the response after close_stream


def apply_message(record: RequestRecord, msg: dict[str, Any], nbytes: int, at: float) -> bool:
    """Update `record` from one queue message; True when the message is terminal for the event."""
    record.bytes_received += nbytes
    kind = msg.get("msg")
    if kind == "estimation":
        if record.estimation_at_s is None:
            record.estimation_at_s = at
            record.rank = msg.get("rank")
            record.queue_size = msg.get("queue_size")
            record.rank_eta_s = msg.get("rank_eta")
    elif kind == "process_starts":
        if record.started_at_s is None:
            record.started_at_s = at
            record.start_eta_s = msg.get("eta")
    elif kind in ("process_generating", "process_streaming"):
        record.outputs += 1
        if record.first_output_at_s is None:
            record.first_output_at_s = at
    elif kind == "process_completed":
        _complete(record, msg, at)
        return True
    elif kind == "unexpected_error":
        fail(record, "server_error", str(msg.get("message")), at)
        return True
    return False


def _complete(record: RequestRecord, msg: dict[str, Any], at: float) -> None:
    output = msg.get("output") or {}
    duration = output.get("duration") if isinstance(output, dict) else None
    if isinstance(duration, (int, float)) and msg.get("success"):
        record.server_duration_s = float(duration)
    if not msg.get("success"):
        detail = output.get("error") if isinstance(output, dict) else None
        fail(
            record,
            "server_error",
            str(detail or msg.get("title") or "the function raised (no detail shown)"),
            at,
        )
    elif not output:
        fail(record, "cancelled", "cancelled on the server (process_completed with empty output)", at)
    else:
        record.completed_at_s = at
        record.outcome = "ok"


async def _read_to_eof(resp: aiohttp.ClientResponse) -> None:
    """After close_stream the server ends the response: let it, rather than hang up first (a hang-up
    can race with the server's own end of stream and look like a client disconnect to it)."""
    try:
        await asyncio.wait_for(resp.content.read(), CLOSE_GRACE_S)
    except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
        pass


def _unexpected(msg: dict[str, Any]) -> str:
    if msg.get("session_not_found"):
        return (f"{msg.get('message')}: session not found; the server dropped this session's message queue "
                "(Gradio keeps at most 2000 sessions): use a session pool (load.sessions: N)")
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
    ) -> None:
        self.hash = session_hash
        self.http = http
        self.url = f"{data_url}?session_hash={session_hash}"
        self.clock = clock
        self.handler = handler
        self.shared = shared  # True: a pool session with a reader task; False: read inline by the request
        self.pending: dict[str, tuple[RequestRecord, asyncio.Future[None] | None]] = {}
        self.orphans: dict[str, list[tuple[dict[str, Any], int, float]]] = {}
        self.dropped: set[str] = set()
        self.reader: asyncio.Task[None] | None = None

    async def follow(self, record: RequestRecord) -> None:
        """Wait until the joined event `record.event_id` reaches a terminal message (or the stream breaks)."""
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
                    return f"SSE stream: HTTP {resp.status}"
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    if b"\n\n" not in buf:
                        continue
                    *frames, buf = buf.split(b"\n\n")
                    at = self.clock.now()
                    for frame in frames:
                        if self._frame(frame, at):
                            await _read_to_eof(resp)
                            return None
                return "SSE stream ended before close_stream"
        except (aiohttp.ClientError, OSError) as exc:
            return f"SSE stream: {exc.__class__.__name__}: {exc}"

    def _frame(self, frame: bytes, at: float) -> bool:
        """Handle one `data: {...}` frame; True on close_stream."""
        start = frame.find(b"data:")
        if start < 0:
            return False
        try:
            msg = orjson.loads(frame[start + 5 :])
        except orjson.JSONDecodeError:
            return False
        kind = msg.get("msg")
        if kind == "close_stream":
            return True
        if kind != "heartbeat":
            self._route(msg, len(frame) + 2, at)
        return False

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
