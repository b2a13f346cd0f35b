"""HTTP front ends in processes of their own, before the one queue (`launch.front_ends`).

Measured on the CPU stand-in of a GPU server (bench/server_cost.py) and on one H100 (bench/RESULTS.md),
once uploads and decoding had left the server's main process, its event loop was the ceiling: ~0.9 ms
of CPU per image request, about half of it HTTP itself (uvicorn's parser and transport, starlette's
request and response objects), all of it under the GIL that the model's thread needs too. With
`launch.front_ends: N` the server runs as N + 1 processes:

    front ends (N)   accept the clients' connections on the public port (one listening socket, made
                     by the core and inherited: the kernel hands each connection to one of them),
                     parse HTTP, read the request's body, and forward the request over a Unix socket
                     to the core; they write the core's response back, SSE streams included, and
                     tell the core when a client leaves
    core (1)         the same Starlette app as ever (queue, sessions, workloads, decode workers,
                     auth, admin): a forwarded request runs through it as an ASGI call, without
                     HTTP parsing or socket writes of its own

So every route, state and semantic stays in one process (one queue per app, what `concurrency_limit`
and `max_batch_size` mean, a session's join and stream may reach different front ends), and what
leaves the core is the per-connection work. On the link, the frames queued within one turn of the
event loop go out as one message, in one write (a pickled list, arrays out of band: see Link); an
upload's decoded image does not travel on it where an arena is shared (arena.py: the core reads it in
place, and gives its block back on a later message), and a request travels as a tuple with its
headers in one bytes (request_wire: split only for the routes that go through the app). A
forwarded request to a route without path parameters skips Starlette's middleware stack and router in
the core (when the app has no middleware of its own: no auth); a join and an upload the front end
parsed are answered in the callback that reads their frame (gradio_routes.FAST); the session stream
(`/queue/data`) runs without a task (streams.SessionStream.attach: its messages of one loop turn are
translated just before the link's write, its client's leaving is a call); other streams hear their
client leave from a future, not a task.
The core's uvicorn serves a private Unix socket only (its lifespan, and a way in for tools);
websockets (Gradio 3.x's queue) are not forwarded, so `front_ends` needs a release with the SSE
queue (4.x and later).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.http.arena import ArenaReader, ArenaWriter, from_wire, make_arena, to_wire
from reference_server.io.decode_pool import Failed, UploadPart
from reference_server.queue.streams import GONE, SessionStream

HEADER = struct.Struct("!I")
COUNT = struct.Struct("!H")  # raw buffers in a link message
READ_BUFFER = 256 * 1024  # the link's read buffer for small messages
BIG = 128 * 1024  # larger messages (an inline image) get a buffer of their own (their arrays are views of
# it); below it, the read buffer serves (several uploads' raw bytes in one turn reached 64 KiB, and paid
# for a buffer and a copy their bytes did not need)
PARSED_UPLOAD = "qbench.parsed_upload"  # scope key: an upload's parts, parsed by the front end
HEADER_BLOB = "qbench.header_blob"  # scope key: a forwarded request's headers, unsplit (header_blob)
UPLOAD_PATH = "/gradio_api/upload"
PLAIN_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]
Frame = tuple[Any, ...]
Endpoint = Callable[[Request], Any]
# gradio_routes.FAST's forms: an answer (status, JSON), a stream, or None (declined: the app takes it)
FastRoute = Callable[[dict[str, Any], bytes], "tuple[int, bytes] | SessionStream | None"]
JSON_HEADERS = [(b"content-type", b"application/json")]
log = logging.getLogger("reference_server.front_ends")


def resolve_front_ends(value: int | str, device: Callable[[], str], gradio: int) -> int:
    """`launch.front_ends` -> a count: auto = 0 (off) on every device, until a measurement on a GPU shows
    that front ends help there (they are measured on the 2-core CPU box only: docs/reference-server.md);
    an explicit count is taken as it is. `device` and `gradio` are the inputs a measured auto will
    need (the device may import torch: it is not asked now)."""
    if isinstance(value, int):
        return value
    return 0


# ---------------------------------------------------------------- the link (both sides)
class Link(asyncio.BufferedProtocol):
    """Frames over a stream socket: the frames sent in one turn of the event loop leave as one message
    (one pickle, one write, one wake-up of the other side for all of them); `on_frame` gets each frame,
    `on_lost` is called once.

    A message is a 4-byte size, a 2-byte count of raw buffers and their 4-byte sizes, the pickled list
    of frames (protocol 5), then the raw buffers: the contiguous arrays in the frames (an upload's
    decoded image) travel out of band. A message larger than BIG gets a buffer of its own (what its
    first read brought is copied there, the rest is read straight into it) and its arrays are views
    of that buffer: at most one copy of an image in user space on the receiving side (there were
    two or three: the transport's bytes, a reassembly buffer, pickle's own)."""

    def __init__(self, on_frame: Callable[[Frame], None], on_lost: Callable[[], None]) -> None:
        self.on_frame, self.on_lost = on_frame, on_lost
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the connection's (asked once: it costs a getpid)
        self._buf = bytearray(READ_BUFFER)  # small messages, unread bytes in [_start, _end)
        self._start = self._end = 0
        self._big: memoryview | None = None  # a large message being read in place
        self._big_filled = 0
        self._out: list[Frame] = []
        self._before: list[Callable[[], None]] = []  # soon(): called before the next flush
        self._due = False  # a flush is scheduled
        self._lost = False
        self.extra: Callable[[], Frame | None] | None = None  # a last frame for each message, if any

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport instances
        self.loop = asyncio.get_running_loop()
        if self._out or self._before:  # frames sent before the connection was made
            self._schedule()

    # ------------------------------------------------------------ reading
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return self._big[self._big_filled:]
        if self._end == len(self._buf):  # full: move the unread bytes (less than a message) to the front
            left = self._end - self._start
            self._buf[:left] = self._buf[self._start:self._end]
            self._start, self._end = 0, left
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                message, self._big = self._big, None
                self._deliver(message, in_place=True)
            return
        self._end += nbytes
        self._parse()

    def data_received(self, data: bytes) -> None:
        """Feed bytes as the transport would (for tests and callers holding bytes)."""
        view = memoryview(data)
        while view:
            target = self.get_buffer(len(view))
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def _parse(self) -> None:
        buf = self._buf
        while self._end - self._start >= HEADER.size:
            (size,) = HEADER.unpack_from(buf, self._start)
            body_at = self._start + HEADER.size
            if size > BIG:  # a buffer of its own, the rest read straight into it
                have = min(self._end - body_at, size)
                big = _uninitialised(size)
                big[:have] = buf[body_at:body_at + have]
                if have == size:  # all here already
                    self._start = body_at + size
                    self._deliver(big, in_place=True)
                    continue
                self._big, self._big_filled = big, have
                self._start = self._end = 0
                return
            if self._end - body_at < size:
                break
            self._start = body_at + size
            with memoryview(buf)[body_at:body_at + size] as message:
                self._deliver(message, in_place=False)
        if self._start == self._end:
            self._start = self._end = 0

    def _deliver(self, message: memoryview, in_place: bool) -> None:
        """Unpickle one message; its raw buffers are views of it when it has a buffer of its own, else
        copies (the read buffer is reused)."""
        (count,) = COUNT.unpack_from(message, 0)
        sizes = struct.unpack_from(f"!{count}I", message, COUNT.size)
        at = COUNT.size + 4 * count
        (pickled,) = HEADER.unpack_from(message, at)
        at += HEADER.size
        body, at = message[at:at + pickled], at + pickled
        buffers = []
        for size in sizes:
            raw = message[at:at + size]
            buffers.append(raw if in_place else bytearray(raw))
            at += size
        frames = pickle.loads(body, buffers=buffers)
        for frame in frames:
            self.on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport, self._lost, self._out, self._before = None, True, [], []
        self.on_lost()

    # ------------------------------------------------------------ writing
    def send(self, frame: Frame) -> None:
        """Queue a frame (its objects must not change until the end of the loop turn); dropped once the
        link is lost."""
        if self._lost:
            return
        self._out.append(frame)
        if not self._due:
            self._schedule()

    def soon(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, just before this loop turn's frames are written (it may send frames that
        leave with them): a stream's messages of one turn are translated together, without a task."""
        if self._lost:
            return
        self._before.append(callback)
        if not self._due:
            self._schedule()

    def _schedule(self) -> None:
        if self.loop is not None:
            self._due = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        while self._before:
            before, self._before = self._before, []
            for callback in before:
                try:
                    callback()
                except Exception:  # noqa: BLE001 - one stream's bug must not keep the turn's frames
                    log.exception("a link callback failed")
        self._due = False
        if self.extra is not None:
            last = self.extra()
            if last is not None:
                self._out.append(last)
        out, self._out = self._out, []
        if self.transport is None or not out:
            return
        self.transport.write(encode(out))


def _uninitialised(size: int) -> memoryview:
    """A writable buffer of `size` bytes, not zeroed first (bytearray(size) would: 3% of the core's
    event loop, for bytes about to be overwritten)."""
    import numpy as np

    return np.empty(size, np.uint8).data


def encode(frames: list[Frame]) -> bytes:
    """One message of the link (Link's docstring); a frame that cannot be pickled is logged and left out,
    so it does not take the loop turn's other frames with it."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        body = pickle.dumps(frames, protocol=5, buffer_callback=buffers.append)
    except Exception:  # noqa: BLE001
        buffers.clear()
        good = [f for f in frames if _picklable(f)]
        body = pickle.dumps(good, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    sizes = [r.nbytes for r in raws]
    head = COUNT.pack(len(raws)) + struct.pack(f"!{len(raws)}I", *sizes) + HEADER.pack(len(body))
    size = len(head) + len(body) + sum(sizes)
    return b"".join([HEADER.pack(size), head, body, *raws])


def _picklable(frame: Frame) -> bool:
    try:
        pickle.dumps(frame, protocol=5, buffer_callback=lambda _buffer: None)
    except Exception:  # noqa: BLE001 - logged and dropped: a bug of the app's, not the link's
        log.exception("a link frame could not be pickled and was dropped: %.200r", frame)
        return False
    return True


# ---------------------------------------------------------------- the core's side
class CoreLink:
    """The core's end of one front end's link: runs each forwarded request through `app`."""

    def __init__(self, app: ASGIApp, server_addr: tuple[str, int], on_lost: Callable[[CoreLink], None],
                 arenas: list[ArenaReader | None] | None = None) -> None:
        self.app, self.server_addr, self._on_lost = app, server_addr, on_lost
        self.arenas = arenas or []  # by front end: the one this link's front end names is its own
        self.arena: ArenaReader | None = None
        self.link = Link(self._frame, lambda: self._on_lost(self))
        self.direct = direct_routes(app)
        fast = getattr(getattr(app, "state", None), "fast_routes", None) or {}
        self.fast: dict[tuple[str, str], FastRoute] = {
            key: fast[endpoint] for key, endpoint in self.direct.items() if endpoint in fast}
        self._gone: dict[int, asyncio.Future[None]] = {}
        self._left: dict[int, Callable[[], None]] = {}  # streams run in callbacks: their client left
        self.tasks: set[asyncio.Task[None]] = set()

    def _frame(self, frame: Frame) -> None:
        if frame[0] == "r":
            _, rid, request, body, parsed = frame
            if type(request) is tuple:
                request = request_scope(request)
            if parsed is not None:
                parsed = self._parts(parsed)
            fast = self.fast.get((request["method"], request["path"]))
            if fast is not None and self._answer(fast, rid, request, body, parsed):
                return
            loop = self.link.loop
            assert loop is not None  # frames arrive on a made connection
            gone = self._gone[rid] = loop.create_future()
            task = loop.create_task(self._run(rid, request, body, parsed, gone))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif frame[0] == "g":  # the client left
            stream_left = self._left.pop(frame[1], None)
            if stream_left is not None:
                stream_left()
                return
            left = self._gone.get(frame[1])
            if left is not None and not left.done():
                left.set_result(None)
        elif frame[0] == "arena":  # the front end's first frame, when it has an arena
            self.arena = self.arenas[frame[1]]
            if self.arena is not None:
                self.link.extra = self.arena.release_frame

    def _parts(self, wire: Any) -> list[UploadPart] | Failed:
        try:
            return from_wire(wire, self.arena)
        except (ValueError, TypeError) as exc:  # a front end's bug: the upload fails, the link goes on
            log.error("a front end sent a malformed upload: %s", exc)
            return Failed(500, "the server could not read the upload's parts")

    def _answer(self, fast: FastRoute, rid: int, request: dict[str, Any], body: bytes, parsed: Any) -> bool:
        """Answer a request to a hot route at once, in this callback (no task, no Starlette request or
        response), or start its stream, run in callbacks (SessionStream.attach); False when the route's
        fast form declines it (then the app takes it)."""
        scope = request if parsed is None else {**request, PARSED_UPLOAD: parsed}
        out: _StreamOut | None = None
        try:
            answer = fast(scope, body)
            if isinstance(answer, SessionStream):
                out = _StreamOut(self, rid)
                left = answer.attach(out)
                if left is not None:
                    self._left[rid] = left
                return True
        except Exception:  # noqa: BLE001 - as in _run: the client gets a 500, the server goes on
            log.exception("error in %s %s", request["method"], request["path"])
            if out is not None and out.started:
                self._left.pop(rid, None)
                self.link.send(("b", rid, b"", False))
                return True
            answer = (500, b"Internal Server Error")
            headers = PLAIN_TEXT
        else:
            if answer is None:
                return False
            headers = JSON_HEADERS
        status, content = answer
        if headers is JSON_HEADERS:  # the whole answer in one frame, its headers made by the front end
            self.link.send(("j", rid, status, content))
            return True
        self.link.send(("s", rid, status, [(b"content-length", str(len(content)).encode()), *headers]))
        self.link.send(("b", rid, content, False))
        return True

    def lost(self) -> None:
        """The front end is gone: every request it forwarded has lost its client."""
        for gone in self._gone.values():
            if not gone.done():
                gone.set_result(None)
        streams, self._left = list(self._left.values()), {}
        for left in streams:
            left()

    async def _run(self, rid: int, request: dict[str, Any], body: bytes, parsed: Any,
                   gone: asyncio.Future[None]) -> None:
        scope: Scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                        "scheme": "http", "root_path": "", "server": self.server_addr, "state": {},
                        "extensions": {GONE: gone}, **request}
        if parsed is not None:  # an upload the front end parsed (and decoded): gradio_routes.upload
            scope[PARSED_UPLOAD] = parsed
        if HEADER_BLOB in scope:  # the app's routes and middleware read the list
            scope["headers"] = split_headers(scope.pop(HEADER_BLOB))
        sent_body = False
        started = False

        async def receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal started
            if gone.done():
                raise OSError("the client left")  # as a socket write would fail: streams stop
            if message["type"] == "http.response.start":
                started = True
                self.link.send(("s", rid, message["status"], list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                self.link.send(("b", rid, message.get("body", b""), message.get("more_body", False)))

        try:
            endpoint = self.direct.get((scope["method"], scope["path"]))
            if endpoint is not None:
                await call_direct(self.app, endpoint, scope, receive, send)
            else:
                await self.app(scope, receive, send)
        except Exception:  # noqa: BLE001 - the client gets a 500, the server goes on
            log.exception("error in %s %s", scope["method"], scope["path"])
            if not started:
                self.link.send(("s", rid, 500, PLAIN_TEXT))
            self.link.send(("b", rid, b"Internal Server Error" if not started else b"", False))
        finally:
            self._gone.pop(rid, None)


def request_wire(scope: Scope) -> tuple[Any, ...]:
    """What the core needs of a request's scope, as the link carries it: a tuple (a dict's keys were
    pickled and looked up again per request), its headers in one bytes (`header_blob`)."""
    return (scope["method"], scope["path"], scope.get("raw_path"), scope["query_string"],
            header_blob(scope["headers"]), scope.get("client"), scope.get("http_version", "1.1"))


def request_scope(wire: tuple[Any, ...]) -> dict[str, Any]:
    """`request_wire`'s tuple -> the request's part of an ASGI scope, its headers still in one bytes
    (HEADER_BLOB: `header_value` reads one, CoreLink._run splits them for the app)."""
    method, path, raw_path, query, blob, client, version = wire
    request = {"method": method, "path": path, "query_string": query, HEADER_BLOB: blob, "client": client,
               "http_version": version}
    if raw_path is not None:
        request["raw_path"] = raw_path
    return request


def header_blob(headers: list[tuple[bytes, bytes]]) -> bytes:
    """Headers as one bytes, each as CRLF, name, colon, value (an ASGI server's names and values hold no
    CR or LF, and a name no colon): one object to pickle and unpickle instead of a list of pairs."""
    return b"".join([b"\r\n" + name + b":" + value for name, value in headers])


def split_headers(blob: bytes) -> list[tuple[bytes, bytes]]:
    return [(line[:at], line[at + 1:]) for line in blob.split(b"\r\n")[1:] if (at := line.find(b":")) >= 0]


def header_value(scope: dict[str, Any], name: bytes) -> bytes | None:
    """The first value of a header of a scope (its name in lower case, as ASGI servers give them),
    from its headers' list or, for a forwarded request, their blob."""
    blob: bytes | None = scope.get(HEADER_BLOB)
    if blob is None:
        found: bytes | None = next((value for key, value in scope["headers"] if key == name), None)
        return found
    at = blob.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = blob.find(b"\r\n", start)
    return blob[start:] if end < 0 else blob[start:end]


def json_headers(content: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a whole JSON answer (a `j` frame's)."""
    return [(b"content-length", str(len(content)).encode()), *JSON_HEADERS]


class _StreamOut:
    """streams.StreamOut for one forwarded request: its response's frames, on the link."""

    __slots__ = ("core", "rid", "started")

    def __init__(self, core: CoreLink, rid: int) -> None:
        self.core, self.rid, self.started = core, rid, False

    def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        self.core.link.send(("s", self.rid, status, headers))

    def write(self, body: bytes, more: bool) -> None:
        self.core.link.send(("b", self.rid, body, more))
        if not more:
            self.core._left.pop(self.rid, None)

    def soon(self, callback: Callable[[], None]) -> None:
        self.core.link.soon(callback)


def direct_routes(app: ASGIApp) -> dict[tuple[str, str], Endpoint]:
    """(method, path) -> endpoint for the app's routes without path parameters, when the app is a
    Starlette app without middleware of its own (no auth): `call_direct` runs them without Starlette's
    middleware stack and router, which cost the core more than the handlers of the hot routes (upload,
    join, the SSE stream) themselves. Every other request goes through the whole app."""
    if getattr(app, "user_middleware", None) != [] or not hasattr(app, "routes"):
        return {}
    table: dict[tuple[str, str], Endpoint] = {}
    for route in app.routes:
        if not (isinstance(route, Route) and not route.param_convertors and route.methods
                and asyncio.iscoroutinefunction(route.endpoint)):
            continue
        for method in route.methods:
            probe = {"type": "http", "path": route.path, "root_path": "", "method": method}
            first = next(r for r in app.routes if r.matches(probe)[0] is Match.FULL)
            if first is route:  # the route the router would pick for it
                table[(method, route.path)] = route.endpoint
    return table


async def call_direct(app: Any, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
    """What Starlette's stack does for a plain route, without the stack: the endpoint's response, or the
    app's exception handler's for what the endpoint raised (HTTPException: Starlette's plain text)."""
    scope["app"], scope["path_params"], scope["endpoint"] = app, {}, endpoint
    request = Request(scope, receive, send)
    try:
        response: Response = await endpoint(request)
    except Exception as exc:
        handler = next((app.exception_handlers[kind] for kind in type(exc).__mro__
                        if kind in app.exception_handlers), None)
        if handler is not None:
            response = await handler(request, exc)
        elif isinstance(exc, HTTPException) and exc.status_code in {204, 304}:
            response = Response(status_code=exc.status_code, headers=exc.headers)
        elif isinstance(exc, HTTPException):
            response = PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
        else:
            raise
    await response(scope, receive, send)


class FrontEnds:
    """The core's front ends: the link server, the child processes, and their readiness."""

    def __init__(self, app: ASGIApp, count: int, listener: socket.socket, log_level: str) -> None:
        self.app, self.count, self.listener, self.log_level = app, count, listener, log_level
        self.links: list[CoreLink] = []
        self.arenas: list[ArenaReader | None] = []  # one per front end (arena.py)
        self.children: list[subprocess.Popen[bytes]] = []
        self._dir = Path(_private_dir())
        self.path = str(self._dir / "core.sock")
        self._server: asyncio.AbstractServer | None = None
        self._connected = asyncio.Event()

    async def start(self, timeout_s: float = 60.0) -> None:
        """Open the link socket, spawn the front ends, wait until each has connected."""
        loop = asyncio.get_running_loop()
        addr = self.listener.getsockname()
        self._server = await loop.create_unix_server(lambda: self._accept(addr).link, self.path)
        fd = self.listener.fileno()
        for i in range(self.count):
            argv = [sys.executable, "-m", "reference_server.http.front_ends", "--fd", str(fd),
                    "--link", self.path, "--log-level", self.log_level, "--name", f"front-end-{i}"]
            arena = make_arena() if self.upload_parsing()[0] else None
            self.arenas.append(None if arena is None else ArenaReader(arena))
            if arena is not None:
                argv += ["--arena-fd", str(arena), "--arena", str(i)]
            try:
                self.children.append(subprocess.Popen(argv, pass_fds=(fd,) if arena is None else (fd, arena)))
            finally:
                if arena is not None:
                    os.close(arena)  # mapped here, inherited there
        deadline = time.monotonic() + timeout_s
        while len(self.links) < self.count:
            dead = [c.returncode for c in self.children if c.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"exited with code {dead[0]}" if dead else f"did not connect within {timeout_s:g} s"
                raise RuntimeError(f"a front-end process {why} (launch.front_ends = {self.count})")
            self._connected.clear()
            try:
                await asyncio.wait_for(self._connected.wait(), 0.2)
            except asyncio.TimeoutError:
                pass

    def _accept(self, addr: tuple[str, int]) -> CoreLink:
        core = CoreLink(self.app, (str(addr[0]), int(addr[1])), self._lost, self.arenas)
        self.links.append(core)
        self._connected.set()
        core.link.send(("hello", self.upload_parsing()))  # leaves once the connection is made
        return core

    def upload_parsing(self) -> tuple[bool, Any]:
        """(parse uploads in the front ends, the image prep to decode them with): when the server has
        decode workers, the front ends do their work for uploads, so an upload costs the core no trip
        to a worker (the decode workers still serve inputs that are not uploads)."""
        pool = getattr(getattr(self.app, "state", None), "server", None)
        pool = getattr(pool, "pool", None)
        return (pool is not None, getattr(pool, "upload_prep", None))

    def _lost(self, core: CoreLink) -> None:
        core.lost()
        if core in self.links:
            self.links.remove(core)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for child in self.children:
            if child.poll() is None:
                child.terminate()
        for child in self.children:
            try:
                await asyncio.to_thread(child.wait, 5)
            except subprocess.TimeoutExpired:
                child.kill()
        shutil.rmtree(self._dir, ignore_errors=True)  # the link socket and the core's own


def _private_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="qbench-core-")


# ---------------------------------------------------------------- the front end's side
class _Pending:
    """One forwarded request's response frames, as they arrive."""

    __slots__ = ("frames", "waiter")

    def __init__(self) -> None:
        self.frames: list[Frame | None] = []
        self.waiter: asyncio.Future[None] | None = None

    def put(self, frame: Frame | None) -> None:
        self.frames.append(frame)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def take(self) -> list[Frame | None]:
        while not self.frames:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        frames, self.frames = self.frames, []
        return frames




class Forwarder:
    """The front end's ASGI app: every HTTP request goes to the core over the link, its response back."""

    def __init__(self, on_core_lost: Callable[[], None], arena: tuple[int, int] | None = None) -> None:
        self.link = Link(self._frame, self._lost)
        self.arena: ArenaWriter | None = None  # (descriptor, index): the core's arena for this front end
        if arena is not None:
            self.arena = ArenaWriter(arena[0])
            self.link.send(("arena", arena[1]))  # the first frame: the core reads the next ones with it
        self.pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._on_core_lost = on_core_lost
        self.parse_uploads, self.prep = False, None

    def _frame(self, frame: Frame) -> None:
        if frame[0] == "hello":
            self.parse_uploads, self.prep = frame[1]
            return
        if frame[0] == "f":  # arena blocks the core no longer holds
            if self.arena is not None:
                self.arena.release(frame[1])
            return
        pending = self.pending.get(frame[1])
        if pending is not None:
            pending.put(frame)

    def _lost(self) -> None:
        for pending in self.pending.values():
            pending.put(None)
        self._on_core_lost()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1011,
                        "reason": "websockets are not forwarded by the front ends (launch.front_ends)"})
            return
        if scope["type"] != "http":
            return
        body = await _body(receive)
        rid = next(self._ids)
        pending = self.pending[rid] = _Pending()
        request = request_wire(scope)
        parsed = self._parsed_upload(scope, body)
        self.link.send(("r", rid, request, b"" if parsed is not None else body, parsed))
        watcher: asyncio.Task[None] | None = None
        started = False
        try:
            while True:
                for frame in await pending.take():
                    if frame is None:  # the core is gone: a 502, or the end of a response under way
                        frame = ("b", rid, b"" if started else b"the server's core process is gone", False)
                        if not started:
                            await send({"type": "http.response.start", "status": 502,
                                        "headers": PLAIN_TEXT})
                    if frame[0] == "j":  # a whole JSON answer (CoreLink._answer)
                        await send({"type": "http.response.start", "status": frame[2],
                                    "headers": json_headers(frame[3])})
                        await send({"type": "http.response.body", "body": frame[3], "more_body": False})
                        return
                    if frame[0] == "s":
                        started = True
                        await send({"type": "http.response.start", "status": frame[2], "headers": frame[3]})
                        continue
                    await send({"type": "http.response.body", "body": frame[2], "more_body": frame[3]})
                    if not frame[3]:
                        return
                    if watcher is None:  # a streamed response: the core must hear when the client leaves
                        watcher = asyncio.create_task(self._watch(rid, receive))
        except OSError:
            self.link.send(("g", rid))
        finally:
            if watcher is not None:
                watcher.cancel()
            self.pending.pop(rid, None)

    def _parsed_upload(self, scope: Scope, body: bytes) -> Any:
        """An upload's parts (images decoded), or why it is malformed (decode_pool.Failed); None when
        the core parses it (no decode workers, a large body, another route)."""
        if not (self.parse_uploads and scope["method"] == "POST" and scope["path"] == UPLOAD_PATH):
            return None
        from reference_server.io.decode_pool import parse_upload
        from reference_server.io.uploads import IN_MEMORY_LIMIT

        if not 0 < len(body) <= IN_MEMORY_LIMIT:
            return None
        kind = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"), "")
        return to_wire(parse_upload(body, kind, self.prep), self.arena)

    async def _watch(self, rid: int, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.link.send(("g", rid))
        pending = self.pending.get(rid)
        if pending is not None:
            pending.put(("b", rid, b"", False))  # stop writing to a client that left


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _front_end(fd: int, link_path: str, log_level: str, arena: tuple[int, int] | None) -> None:
    import uvicorn

    server: uvicorn.Server | None = None

    def core_lost() -> None:
        if server is not None:
            server.should_exit = True

    forwarder = Forwarder(core_lost, arena)
    loop = asyncio.get_running_loop()
    await loop.create_unix_connection(lambda: forwarder.link, link_path)
    listener = socket.socket(fileno=fd)
    config = uvicorn.Config(forwarder, log_level=log_level, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    await server.serve(sockets=[listener])


def main(argv: list[str] | None = None) -> int:
    """`python -m reference_server.http.front_ends --fd N --link PATH`: one front end."""
    p = argparse.ArgumentParser(prog="python -m reference_server.http.front_ends")
    p.add_argument("--fd", type=int, required=True, help="the inherited listening socket")
    p.add_argument("--link", required=True, help="the core's Unix socket")
    p.add_argument("--log-level", default="warning")
    p.add_argument("--name", default="front-end")
    p.add_argument("--arena-fd", type=int, help="the inherited memfd of this front end's upload arena")
    p.add_argument("--arena", type=int, default=0, help="this front end's index among the core's arenas")
    args = p.parse_args(argv)
    arena = None if args.arena_fd is None else (args.arena_fd, args.arena)
    try:
        import uvloop

        uvloop.run(_front_end(args.fd, args.link, args.log_level, arena))
    except ImportError:
        asyncio.run(_front_end(args.fd, args.link, args.log_level, arena))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
