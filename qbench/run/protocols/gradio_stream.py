"""Streamed inputs into a Gradio `.stream()` event (a webcam, a microphone; 5.0 on): join with the first
chunk, send the others every `stream_every` s, close; `ChunkLog` says which output answered which chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import numpy as np

from qbench.run.protocols.base import JSON_HEADERS, Clock, fail, fail_http
from qbench.run.protocols.gradio_4_9_sse import SessionStreamWire
from qbench.run.protocols.gradio_api import DEFAULT_STREAM_EVERY_S
from qbench.run.protocols.gradio_wire import (
    OUTPUT_FILES,
    GradioApp,
    apply_message,
    output_files,
    post_quietly,
)
from qbench.run.records import gap_histogram
from qbench.run.records.schema import RequestRecord

ENDED_GRACE_S = 1.0  # how long a refused chunk waits for news that the event ended, before it is an error
WEBSOCKET_RELEASES = ((5,), (6,))  # whose browser sends the chunks over the websocket route

#: chunk index (1, 2, ...) -> the chunk's encoded inputs (uploads done), or None when they failed
ChunkData = Callable[[int], Awaitable[list[Any] | None]]
#: GET one output file onto a record -> None, or (error kind, message)
Download = Callable[[RequestRecord, str], Coroutine[Any, Any, tuple[str, str] | None]]


class ChunkLog:
    """One event's chunks and outputs on the run's clock: which output answered which chunk."""

    def __init__(self, sent_at: float) -> None:
        self.sent = 1  # the join's chunk
        self.answered = 0
        self.first = True  # the chunk the function runs on (or will) is the join's
        self.running: float | None = sent_at  # send time of the chunk the function runs on (the join)
        self.waiting: list[float] = []  # chunks sent while the function ran (the newest wins)
        self.latencies: list[float] = []
        self.outputs: list[float] = []
        self.idle = asyncio.Event()  # every chunk sent is answered: the server waits for the next

    def chunk_sent(self, at: float) -> None:
        self.sent += 1
        self.idle.clear()
        if self.running is None:
            self.running, self.first = at, False
        else:
            self.waiting.append(at)

    def chunk_refused(self, at: float) -> None:
        """The chunk `chunk_sent(at)` counted was refused (the event is over, or failed): undo it."""
        self.sent -= 1
        if at in self.waiting:
            self.waiting.remove(at)
        elif self.running == at:
            self.running = None
            self.idle.set()

    def started(self) -> None:
        """`process_starts`: chunks sent while the event queued replaced the join's."""
        self._take_newest()

    def output(self, at: float) -> None:
        self.outputs.append(at)
        if self.running is not None:
            self.answered += 1
            if not self.first:
                self.latencies.append(at - self.running)
        self.running = None
        self._take_newest()
        if self.running is None:
            self.idle.set()

    def completed(self, at: float) -> None:
        """`process_completed`: it carries the last call's output when a chunk was still running."""
        if self.running is not None:
            self.output(at)
        self.idle.set()

    def _take_newest(self) -> None:
        if self.waiting:
            self.running, self.first = self.waiting[-1], False
            self.waiting.clear()

    def fill(self, record: RequestRecord) -> None:
        record.chunks_sent, record.chunks_answered = self.sent, self.answered
        if self.latencies:
            lat = np.asarray(self.latencies, dtype=np.float64)
            record.chunk_latency_count = len(self.latencies)
            record.chunk_latency_mean_s = float(lat.mean())
            record.chunk_latency_p50_s, record.chunk_latency_p95_s = (
                float(x) for x in np.percentile(lat, [50, 95]))
            record.chunk_latency_max_s = float(lat.max())
            record.chunk_latency_hist = gap_histogram.encode(gap_histogram.histogram(self.latencies))
        if len(self.outputs) > 1:
            gaps = np.diff(np.asarray(self.outputs, dtype=np.float64))
            record.output_gap_count = int(gaps.size)
            record.output_gap_mean_s, record.output_gap_max_s = float(gaps.mean()), float(gaps.max())
            record.output_gap_p95_s = float(np.percentile(gaps, 95))
            record.output_gap_hist = gap_histogram.encode(gap_histogram.histogram(gaps.tolist()))


class ChunkStreamWire(SessionStreamWire):
    """sse_v3 with streamed inputs: join with the first chunk, send the others, close the event."""

    def __init__(self, app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int, *,
                 chunks: int, every_s: float | None) -> None:
        super().__init__(app, http, clock, pool, handler=self._message)
        self.chunks, self.every_s = chunks, every_s or DEFAULT_STREAM_EVERY_S
        self.logs: dict[int, ChunkLog] = {}  # by id(record), while its event runs
        self.download: Download | None = None  # fetch each output's files as it comes (fetch_outputs)
        self.downloads: dict[int, dict[str, asyncio.Task[tuple[str, str] | None]]] = {}  # id(record) -> ref

    def _message(self, record: RequestRecord, msg: dict[str, Any], nbytes: int, at: float) -> bool:
        if record.completed_at_s is not None:
            return True  # a chunk failed (the record says why) and the event was closed: done
        log = self.logs.get(id(record))
        kind = msg.get("msg")
        if log is not None and kind == "process_starts":
            log.started()
        elif log is not None and kind == "process_streaming":
            log.output(at)
            output = msg.get("output")
            self._fetch(record, output_files(output.get("data"), "") if isinstance(output, dict) else [])
        elif log is not None and kind == "process_completed" and msg.get("success"):
            log.completed(at)  # (a function that raised answered nothing)
        return apply_message(record, msg, nbytes, at)

    async def stream(self, record: RequestRecord, data: list[Any], slot: int, chunk_data: ChunkData) -> None:
        """Join with `data`, send chunks 1..chunks-1 (`chunk_data`), close; fill `record`."""
        assert record.sent_at_s is not None
        log = self.logs[id(record)] = ChunkLog(record.sent_at_s)
        try:
            session = await self.join(record, data, slot)
            if session is None:
                return
            sender = asyncio.get_running_loop().create_task(self._send_chunks(record, log, chunk_data))
            try:
                await session.follow(record)
            finally:
                sender.cancel()
            await self._downloaded(record)
        finally:
            del self.logs[id(record)]
            for task in self.downloads.pop(id(record), {}).values():
                task.cancel()
            log.fill(record)

    def _fetch(self, record: RequestRecord, refs: list[str]) -> None:
        """Fetch an output's files as it arrives, each file once."""
        if self.download is None:
            return
        tasks = self.downloads.setdefault(id(record), {})
        for ref in refs:
            if ref not in tasks:
                tasks[ref] = asyncio.get_running_loop().create_task(self.download(record, ref))

    async def _downloaded(self, record: RequestRecord) -> None:
        """Fetch the result's other files; the request ends when the last arrives (or the first fails)."""
        if self.download is None:
            return
        self._fetch(record, OUTPUT_FILES.pop(id(record), []))
        tasks = list(self.downloads.get(id(record), {}).values())
        if not tasks or not record.ok:
            return
        record.result_at_s, record.completed_at_s = record.completed_at_s, None  # the timeout still holds
        for problem in await asyncio.gather(*tasks):
            if problem is not None:
                fail(record, *problem, self.clock.now())
                return
        record.completed_at_s = self.clock.now()

    async def _send_chunks(self, record: RequestRecord, log: ChunkLog, chunk_data: ChunkData) -> None:
        assert record.sent_at_s is not None and record.event_id is not None
        url = f"{self.app.api}/stream/{record.event_id}"
        five = WEBSOCKET_RELEASES[0] <= self.app.version < WEBSOCKET_RELEASES[1]
        socket = await self._socket(url) if five else None
        try:
            for k in range(1, self.chunks):
                await asyncio.sleep(max(0.0, record.sent_at_s + k * self.every_s - self.clock.now()))
                data = await chunk_data(k)
                if data is None:  # its upload failed (the record says why): end the event
                    await post_quietly(self.http, url + "/close", {})
                    return
                if socket is None:
                    if not await self._post_chunk(record, log, url, data):
                        return
                elif not await self._socket_chunk(record, log, socket, data):
                    await post_quietly(self.http, url + "/close", {})  # if it still waits: end it
                    return
            await log.idle.wait()
            await post_quietly(self.http, url + "/close", {})
        finally:
            if socket is not None:
                await socket.close()

    async def _socket(self, url: str) -> aiohttp.ClientWebSocketResponse | None:
        """Gradio 5.x's chunk websocket; None when it cannot be opened (then the chunks go by POST)."""
        try:
            return await self.http.ws_connect(url.replace("http", "ws", 1))
        except (aiohttp.ClientError, OSError):
            return None

    async def _socket_chunk(self, record: RequestRecord, log: ChunkLog,
                            socket: aiohttp.ClientWebSocketResponse, data: list[Any]) -> bool:
        """One chunk over the websocket, acknowledged; False when the socket closed (event over) or failed."""
        assert record.session_id is not None
        body = self.body(data, record.session_id)
        record.bytes_sent += len(body)
        at = self.clock.now()
        log.chunk_sent(at)
        try:
            await socket.send_str(body.decode())  # a text frame: the server reads it with receive_json()
            answer = await socket.receive()
        except (aiohttp.ClientError, OSError, ConnectionResetError):
            answer = None
        if answer is not None and answer.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            record.bytes_received += len(answer.data)
            return True
        log.chunk_refused(at)  # closed by the server: the event is gone (5.x raises on an unknown one)
        return False

    async def _post_chunk(self, record: RequestRecord, log: ChunkLog, url: str, data: list[Any]) -> bool:
        """POST one chunk; False when the event is over (404: its time limit ended it) or the chunk failed."""
        assert record.session_id is not None
        body = self.body(data, record.session_id)
        record.bytes_sent += len(body)
        at = self.clock.now()
        log.chunk_sent(at)  # before the POST: its answer may arrive before the POST's
        try:
            async with self.http.post(url, data=body, headers=JSON_HEADERS) as resp:
                raw = await resp.read()
        except (aiohttp.ClientError, OSError) as exc:
            fail(record, "connect", f"POST {url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            raw, status = b"", 0
        else:
            record.bytes_received += len(raw)
            status = resp.status
            if status == 200:
                return True
        log.chunk_refused(at)
        if status == 404:
            return False
        if status:  # Gradio 5.x answers 500 for an event its time limit just ended: wait for the end
            await asyncio.sleep(ENDED_GRACE_S)  # (this task is cancelled when the event's stream ends)
            fail_http(record, "POST", url, status, raw, self.clock.now())
        await post_quietly(self.http, url + "/close", {})  # the event still waits for chunks: end it
        return False
