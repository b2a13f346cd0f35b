"""A lean HTTP/1.1 client for `protocol: http` against `http://` targets: keep-alive connections whose
responses httptools parses straight into the RequestRecord (about a quarter of aiohttp's CPU per request)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import cast
from urllib.parse import urlsplit

import httptools

from qbench import __version__
from qbench.run.protocols.server_timing import apply_server_timing
from qbench.run.records.schema import RequestRecord

ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error body kept for its message


class Http1Error(Exception):
    """A request that got no complete response; `kind` is the record's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Exchange:
    """One request's response as it arrives, written into its record."""

    __slots__ = ("record", "now", "done", "error_body", "_kind", "_tail", "_in_chunk", "status")

    def __init__(self, record: RequestRecord, now: Callable[[], float], done: asyncio.Future[None]) -> None:
        self.record, self.now, self.done = record, now, done
        self.error_body = bytearray()
        self.status = 0
        self._kind = "plain"  # plain | sse | chunks | error
        self._tail = b""
        self._in_chunk = False  # body bytes since the last chunk boundary (the final 0-chunk has none)

    def headers(self, status: int, content_type: bytes, chunked: bool, has_length: bool) -> None:
        record = self.record
        record.joined_at_s = self.now()
        record.http_status = self.status = status
        if status >= 400:
            self._kind = "error"
        elif content_type.startswith(b"text/event-stream"):
            self._kind = "sse"
        elif chunked and not has_length:
            self._kind = "chunks"

    def body(self, data: bytes) -> None:
        record, kind = self.record, self._kind
        if kind == "error":
            room = ERROR_BODY_LIMIT - len(self.error_body)
            if room > 0:
                self.error_body += data[:room]
                record.bytes_received = len(self.error_body)
            return
        record.bytes_received += len(data)
        if kind == "plain":
            return
        if record.first_output_at_s is None:
            record.first_output_at_s = self.now()
        self._in_chunk = True
        if kind == "sse":
            events = (self._tail + data).replace(b"\r\n", b"\n").split(b"\n\n")
            self._tail = events.pop()
            record.outputs += sum(1 for e in events if e.strip())

    def chunk_complete(self) -> None:
        if self._kind == "chunks" and self._in_chunk:
            self.record.outputs += 1
        self._in_chunk = False

    def complete(self) -> None:
        if self._kind == "sse" and self._tail.strip():
            self.record.outputs += 1
        if not self.done.done():
            self.done.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


class Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange at a time (no pipelining)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.reusable = True
        self._parser = httptools.HttpResponseParser(self)
        self._content_type = b""
        self._has_length = False
        self._chunked = False
        self._until_close = False  # the current response's body runs until the server closes

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken("the server switched protocols")
        except httptools.HttpParserError as exc:
            self._broken(f"malformed HTTP response: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.exchange is not None and self._until_close and exc is None:
            self.on_message_complete()  # a body without length or chunks ends with the connection
        if self.exchange is not None:
            answered = self.exchange.record.joined_at_s is not None
            kind = "stream_broken" if answered else "connect"
            reason = f"{exc.__class__.__name__}: {exc}" if exc else "the server closed the connection"
            self.exchange.fail(Http1Error(kind, reason))
            self.exchange = None

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._content_type, self._has_length, self._chunked, self._until_close = b"", False, False, False

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"content-type":
            self._content_type = value.lower()
        elif lower == b"content-length":
            self._has_length = True
        elif lower == b"transfer-encoding" and b"chunked" in value.lower():
            self._chunked = True
        elif lower == b"server-timing" and self.exchange is not None:
            apply_server_timing(self.exchange.record, value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        self.reusable = bool(self._parser.should_keep_alive())
        self._until_close = not self._has_length and not self._chunked
        if self.exchange is not None:
            status = self._parser.get_status_code()
            self.exchange.headers(status, self._content_type, self._chunked, self._has_length)

    def on_body(self, data: bytes) -> None:
        if self.exchange is not None:
            self.exchange.body(data)

    def on_chunk_complete(self) -> None:
        if self.exchange is not None:
            self.exchange.chunk_complete()

    def on_message_complete(self) -> None:
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.complete()

    def _broken(self, reason: str) -> None:
        self.reusable = False
        if self.exchange is not None:
            kind = "stream_broken" if self.exchange.record.joined_at_s is not None else "connect"
            self.exchange.fail(Http1Error(kind, reason))
            self.exchange = None
        if self.transport is not None:
            self.transport.abort()

    def abort(self) -> None:
        self.closed, self.reusable, self.exchange = True, False, None
        if self.transport is not None:
            self.transport.abort()


class Http1Pool:
    """Keep-alive connections to one host: `send` one request, its response goes into the record."""

    def __init__(self, url: str, limit: int, connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"Http1Pool serves plain http:// URLs, not {url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.authority = parts.netloc
        self.limit, self.connect_timeout_s = limit, connect_timeout_s
        self._idle: list[Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def head(self, method: str, target: str, headers: dict[str, str]) -> bytes:
        """The request line and headers, without Content-Length (added per body)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.authority}",
                 f"User-Agent: qbench/{__version__}", "Accept: */*"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def send(
        self, head: bytes, body: bytes | None, record: RequestRecord, now: Callable[[], float]
    ) -> Exchange:
        """Send one request and fill the record as the response arrives; the finished exchange (its status, a
        refusal's body). Raises Http1Error (connect / stream_broken); a cancellation drops the connection."""
        record.sent_at_s = now()  # as with aiohttp: waiting for a connection (or opening one) counts
        conn = await self._acquire()
        loop = asyncio.get_running_loop()
        exchange = Exchange(record, now, loop.create_future())
        conn.exchange = exchange
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        assert conn.transport is not None
        conn.transport.write(head + length + b"\r\n" + (body or b""))
        try:
            await exchange.done
        except BaseException:
            conn.abort()
            self._release(conn)
            raise
        self._release(conn)
        return exchange

    async def _acquire(self) -> Connection:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
                self._open -= 1
            if not self.limit or self._open < self.limit:
                return await self._connect()
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled (a timeout): the free slot goes to the next one
                raise
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    async def _connect(self) -> Connection:
        self._open += 1
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(Connection, self.host, self.port), self.connect_timeout_s
            )
        except BaseException as exc:
            self._open -= 1
            self._wake()
            if isinstance(exc, OSError | asyncio.TimeoutError):
                raise Http1Error("connect", f"{self.authority}: {exc.__class__.__name__}: {exc}") from None
            raise
        return conn

    def _release(self, conn: Connection) -> None:
        if conn.closed or not conn.reusable or conn.exchange is not None:
            if not conn.closed:
                conn.abort()
            self._open -= 1
        else:
            self._idle.append(conn)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
        self._open = 0
