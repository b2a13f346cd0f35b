"""Per-request CPU work in worker processes: multipart parsing and image decoding, out of the GIL.

Measured on the CPU stand-in of a GPU server (bench/server_cost.py; image-ideal, 224x224 JPEGs), the
main process spent ~2 ms of CPU per image request, of which ~0.9 ms decoding the image and ~0.1 ms
parsing the upload, in worker threads that hold the GIL while they work: on an H100 box it capped the
image preset near 300 img/s with 1.3 of 16 cores busy and the GPU 3-24% busy. Here those steps run
in `launch.decode_workers` processes (spawned: they import numpy and PIL, never torch):

    upload    the multipart body goes to a worker, which returns the files' bytes (kept in memory by
              the FileStore, not written to disk and read back)
    decode    an image input's bytes go to a worker, which returns a contiguous uint8 HxWx3 RGB array;
              with the workload's `PixelPrep` it also resizes it there (the image preset on a CPU) and
              the array is the workload's prepared row (no `prepare_row` in the main process); with
              `PixelPrep.encoded` (image-classification's `decode: device`) a baseline JPEG is only
              checked from its header and its bytes come back as a 1-D uint8 array, for the device

The main process keeps what must be there: HTTP, the queue, the SSE messages, and the model. A worker
returns errors as values (`Failed`), so a bad upload or image fails only its own request, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import multiprocessing
import os
import pickle
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from reference_server.workloads.base import PixelPrep

__all__ = ["PixelPrep"]  # also here: what the workers are handed


@dataclass(frozen=True)
class Failed:
    """A worker's error as a value: the HTTP status an upload answers with, and the reason."""

    status: int
    detail: str


@dataclass(frozen=True)
class Decoded:
    """A decoded image and the worker's time for each step (s)."""

    array: np.ndarray  # uint8 HxWx3, contiguous
    decode_s: float
    prepare_s: float


# ---------------------------------------------------------------- in the worker
@dataclass(frozen=True)
class UploadPart:
    """One part of a parsed upload, and its image decoded ahead when the server asked for it."""

    name: str
    filename: str | None
    data: bytes
    decoded: Decoded | None = None


def parse_upload(body: bytes, content_type: str, prep: PixelPrep | None) -> list[UploadPart] | Failed:
    """A multipart body -> its parts, or why it is malformed. With `prep` (the server's one image
    function's), every file that is an image is decoded too, in the same trip: the event that names
    it later finds it ready, and the request costs the main process one round trip to a worker."""
    from reference_server.io.uploads import UploadError, parse_parts

    try:
        parts = parse_parts(body, content_type)
    except UploadError as exc:
        return Failed(exc.status, exc.detail)
    out = []
    for part in parts:
        data = b"".join(part.chunks)
        decoded = None
        if prep is not None and part.filename is not None and part.name == "files":
            result = decode_image(data, part.filename, prep)
            decoded = result if isinstance(result, Decoded) else None  # not an image: decoded later, or never
        out.append(UploadPart(part.name, part.filename, data, decoded))
    return out


def decode_image(raw: bytes, label: str, prep: PixelPrep | None) -> Decoded | Failed:
    """Image bytes -> RGB uint8 array (resized when `prep` asks), or why they are not an image; with
    `prep.encoded`, a JPEG the device can decode stays encoded: its bytes as a 1-D uint8 array."""
    from PIL import Image, UnidentifiedImageError

    start = time.perf_counter()
    if prep is not None and prep.encoded and device_decodable(raw):
        return Decoded(np.frombuffer(raw, dtype=np.uint8).copy(), time.perf_counter() - start, 0.0)
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
        rgb = image if image.mode == "RGB" else image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        return Failed(422, f"input {label!r}: not a readable image ({exc})")
    decoded = time.perf_counter()
    if rgb.width < 1 or rgb.height < 1:
        return Failed(422, f"input {label!r}: empty image ({rgb.width}x{rgb.height})")
    if prep is not None and prep.size is not None and rgb.size != prep.size:
        rgb = rgb.resize(prep.size, resample=prep.resample)
    array = np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8))
    return Decoded(array, decoded - start, time.perf_counter() - decoded)


def device_decodable(raw: bytes) -> bool:
    """Whether `raw` is a non-empty baseline JPEG in RGB or greyscale (what nvJPEG's batched decode
    takes), read from its header only; anything else is decoded on the host, as before."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as image:  # lazy: reads the header, decodes nothing
            return (image.format == "JPEG" and image.mode in ("RGB", "L") and image.width >= 1
                    and image.height >= 1 and not image.info.get("progressive")
                    and not image.info.get("progression"))
    except (OSError, ValueError, Image.DecompressionBombError):
        return False


def _ready() -> int:
    return os.getpid()


# ---------------------------------------------------------------- in the server
def worker_count(setting: int | str, device: str) -> int:
    """`launch.decode_workers`: an int, or auto = up to 8 processes on CUDA (a core each, one left for
    the server), 0 on a CPU (decoding in threads competes for the cores the model uses anyway)."""
    if setting != "auto":
        return int(setting)
    if device != "cuda":
        return 0
    return max(1, min(8, (os.cpu_count() or 2) - 1))


class DecodePool:
    """Worker processes on socket pairs, driven from the event loop: `await pool.run(fn, *args)`.

    Not a ProcessPoolExecutor: its feeder and result threads move every argument and result through
    a 64 KiB pipe under the GIL, which cost the main process ~0.27 ms per 224x224 image returned
    (measured: 345 us of main-process CPU per task returning the array, 77 us returning an int).
    Here each worker has its own socket (4 MiB buffers); the event loop writes the pickled call and
    reads the pickled result itself, in one or two large reads, with no thread in between. A task goes
    to the worker with the fewest in flight.
    """

    def __init__(self, workers: int, upload_prep: PixelPrep | None = None) -> None:
        self.workers = workers
        self.upload_prep = upload_prep  # decode uploads ahead like this (the one image function's prep)
        self._procs: list[Any] = []
        self._links: list[_Link] = []
        self._sockets: list[socket.socket] = []
        self._connecting: asyncio.Lock | None = None
        self._respawning: asyncio.Task[None] | None = None
        self.respawns = 0  # workers replaced after they died (at most MAX_RESPAWNS per worker slot)

    def start(self) -> None:
        """Spawn the workers and wait until each answers (blocking: the lifespan runs it in a thread),
        so no request pays a spawn."""
        for _ in range(self.workers):
            proc, ours = _spawn()
            self._procs.append(proc)
            self._sockets.append(ours)

    async def _link(self) -> _Link:
        if not self._links:  # connected lazily, on the serving loop (once: the lock is that loop's)
            self._connecting = self._connecting or asyncio.Lock()
            async with self._connecting:
                await self._connect()
        live = [link for link in self._links if link.lost is None]
        if not live and self._respawning is not None:  # every worker died: wait for the replacement
            await asyncio.shield(self._respawning)
            live = [link for link in self._links if link.lost is None]
        if not live:
            raise WorkerLost(f"every decode worker has exited ({self._links[0].lost})")
        return min(live, key=lambda link: len(link.pending))

    async def _connect(self) -> None:
        if not self._links:
            for sock in self._sockets:
                self._links.append(await self._open(sock))

    async def _open(self, sock: socket.socket) -> _Link:
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock, limit=SOCKET_BUFFER)
        link = _Link(reader, writer, on_lost=self._replace_lost)
        link.task = asyncio.create_task(link.read_results(), name="qbench-decode-results")
        return link

    def _replace_lost(self) -> None:
        """A worker died (its in-flight calls failed with WorkerLost): spawn its replacement, one at a
        time, up to MAX_RESPAWNS per worker slot (a worker that keeps dying is a bug to see, not hide)."""
        if self._respawning is not None or self.respawns >= MAX_RESPAWNS * self.workers:
            return
        index = next((i for i, link in enumerate(self._links) if link.lost is not None), None)
        if index is not None:
            self._respawning = asyncio.create_task(self._respawn(index), name="qbench-decode-respawn")

    async def _respawn(self, index: int) -> None:
        try:
            proc, sock = await asyncio.to_thread(_spawn)
            dead = self._procs[index]
            self._procs[index], self._sockets[index] = proc, sock
            self._links[index] = await self._open(sock)
            self.respawns += 1
            await asyncio.to_thread(dead.join, 2)
        finally:
            self._respawning = None
        self._replace_lost()  # another one died meanwhile

    async def run(self, function: Any, *args: Any) -> Any:
        link = await self._link()
        return await link.call(function, args)

    def close(self) -> None:
        if self._respawning is not None:
            self._respawning.cancel()
        for link in self._links:
            if link.task is not None:
                link.task.cancel()
        for sock in self._sockets:
            sock.close()
        for proc in self._procs:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.kill()


SOCKET_BUFFER = 4 * 1024 * 1024
MAX_RESPAWNS = 3
_HEADER = struct.Struct("!I")


def _spawn() -> tuple[Any, socket.socket]:
    """One worker process and the server's end of its socket, once it answers (blocking)."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with CUDA and threads
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
    proc = context.Process(target=_worker_main, args=(theirs,), daemon=True, name="qbench-decode")
    proc.start()
    theirs.close()
    _send(ours, (0, _ready, ()))
    _, result = _receive(ours)
    if not isinstance(result, int):
        raise RuntimeError(f"a decode worker failed to start: {result!r}")
    return proc, ours


class WorkerLost(RuntimeError):
    """A decode worker died (its socket closed) with calls in flight."""


class _Link:
    """One worker's socket from the event loop's side: calls out, results in, matched by number."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_lost: Callable[[], None] = lambda: None) -> None:
        self.reader, self.writer, self.on_lost = reader, writer, on_lost
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.numbers = itertools.count(1)
        self.task: asyncio.Task[None] | None = None
        self.lost: str | None = None  # why the worker is gone (its calls fail with WorkerLost)

    async def call(self, function: Any, args: tuple[Any, ...]) -> Any:
        if self.lost is not None:
            raise WorkerLost(f"a decode worker exited ({self.lost})")
        number = next(self.numbers)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[number] = future
        payload = pickle.dumps((number, function, args), protocol=pickle.HIGHEST_PROTOCOL)
        self.writer.write(_HEADER.pack(len(payload)) + payload)
        return await future

    async def read_results(self) -> None:
        try:
            while True:
                (size,) = _HEADER.unpack(await self.reader.readexactly(_HEADER.size))
                number, result = pickle.loads(await self.reader.readexactly(size))
                future = self.pending.pop(number, None)
                if future is not None and not future.done():
                    future.set_result(result)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.lost = str(exc) or type(exc).__name__
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(WorkerLost(f"a decode worker exited ({exc})"))
            self.pending.clear()
            self.on_lost()
            self.writer.close()  # the stream keeps the error too: take it, or the collector logs it as
            with contextlib.suppress(ConnectionError):  # "Future exception was never retrieved"
                await self.writer.wait_closed()


# ---------------------------------------------------------------- the worker's loop
def _send(sock: socket.socket, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, SOCKET_BUFFER))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_receive_exactly(sock, _HEADER.size))
    return pickle.loads(_receive_exactly(sock, size))


def _worker_main(sock: socket.socket) -> None:
    """Answer calls until the server's end of the socket closes."""
    while True:
        try:
            number, function, args = _receive(sock)
        except (EOFError, ConnectionError):
            return
        try:
            result = function(*args)
        except Exception as exc:  # a bug, not bad input (that is a Failed value): the call raises it
            result = Failed(500, f"decode worker: {type(exc).__name__}: {exc}")
        _send(sock, (number, result))
