"""A raw Gradio queue-protocol driver (sse_v3) for conformance and differential tests.

It speaks the wire protocol directly with aiohttp, so the same burst can be replayed against the
reference server and against real Gradio and their message sequences compared:

    POST {base}/gradio_api/queue/join  {data, fn_index, session_hash}   -> 200 {event_id} | 503 | 4xx
    GET  {base}/gradio_api/queue/data?session_hash=...                   -> one SSE stream per session

Each session joins its events first and then opens its one stream (the official clients do the
same: Gradio answers `session_not_found` for a stream opened before the first join). Every message
is stamped with `time.monotonic()` when its line arrives, so tests can measure realised concurrency
(overlap of process_starts..process_completed) and batch formation (process_starts arriving
together). Timestamps are client-side: a few milliseconds of skew between sessions is normal.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

API = "/gradio_api"
TERMINAL = "process_completed"


@dataclass(frozen=True)
class Job:
    """One event to submit: which function, its inputs, its session and when to join (offset)."""

    fn: str  # api_name, resolved to a fn_index through /config
    data: list[Any]
    session: str | None = None  # jobs naming the same session share one (fresh) session_hash and stream
    at_s: float = 0.0  # join this long after the burst starts (sessions join in their own order)


@dataclass(frozen=True)
class Message:
    """One SSE message as received."""

    at: float  # time.monotonic() when the line arrived
    body: dict[str, Any]

    @property
    def msg(self) -> str:
        return str(self.body.get("msg"))


@dataclass
class Trace:
    """What happened to one job: the join reply and every message routed to its event_id."""

    job: Job
    session_hash: str
    joined_at: float = 0.0  # monotonic time the join was sent
    acked_at: float = 0.0  # monotonic time the join's reply arrived
    join_status: int = 0
    join_body: Any = None
    messages: list[Message] = field(default_factory=list)

    @property
    def event_id(self) -> str | None:
        if self.join_status == 200 and isinstance(self.join_body, dict):
            return str(self.join_body["event_id"])
        return None

    @property
    def kinds(self) -> list[str]:
        """Message types in arrival order (heartbeats dropped)."""
        return [m.msg for m in self.messages if m.msg != "heartbeat"]

    def first(self, kind: str) -> Message | None:
        return next((m for m in self.messages if m.msg == kind), None)

    def all(self, kind: str) -> list[Message]:
        return [m for m in self.messages if m.msg == kind]

    @property
    def started_at(self) -> float:
        return _required(self.first("process_starts"), "process_starts", self).at

    @property
    def completed(self) -> dict[str, Any]:
        return _required(self.first(TERMINAL), TERMINAL, self).body

    @property
    def completed_at(self) -> float:
        return _required(self.first(TERMINAL), TERMINAL, self).at

    @property
    def output_data(self) -> list[Any]:
        return list(self.completed["output"]["data"])


def _required(message: Message | None, kind: str, trace: Trace) -> Message:
    if message is None:
        raise AssertionError(f"no {kind} for {trace.job} (got {trace.kinds}, join {trace.join_status})")
    return message


@dataclass
class SessionStream:
    """The stream of one session: traces by event id plus the session-level messages."""

    session_hash: str
    traces: list[Trace]
    session_messages: list[Message] = field(default_factory=list)  # event_id null: close_stream, errors
    closed: bool = False  # close_stream received


async def fn_indices(http: aiohttp.ClientSession, base_url: str) -> dict[str, int]:
    """Map api_name -> fn_index (dependency id) the way the official clients do, from GET /config."""
    async with http.get(f"{base_url}/config") as resp:
        resp.raise_for_status()
        config = orjson.loads(await resp.read())
    return {
        str(dep["api_name"]): int(dep["id"])
        for dep in config["dependencies"]
        if dep.get("api_name") and dep.get("api_visibility", "public") != "private"
    }


async def join(
    http: aiohttp.ClientSession, base_url: str, fn_index: int, data: list[Any], session_hash: str
) -> tuple[int, Any]:
    """POST /queue/join; returns (status, parsed JSON body or text)."""
    body = {"data": data, "fn_index": fn_index, "session_hash": session_hash}
    async with http.post(f"{base_url}{API}/queue/join", json=body) as resp:
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, raw.decode(errors="replace")


async def read_stream(
    http: aiohttp.ClientSession, base_url: str, stream: SessionStream, stop_after_s: float | None = None
) -> None:
    """Read /queue/data for one session until close_stream (or stop_after_s), routing by event_id."""
    by_id = {t.event_id: t for t in stream.traces if t.event_id}
    url = f"{base_url}{API}/queue/data"
    async with http.get(url, params={"session_hash": stream.session_hash}) as resp:
        assert resp.status == 200, f"/queue/data answered {resp.status}"
        deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
        while True:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                line = await asyncio.wait_for(resp.content.readline(), timeout)
            except asyncio.TimeoutError:
                return  # leaving the block closes the connection: a client disconnect
            if not line:
                return
            if not line.startswith(b"data:"):
                continue
            message = Message(time.monotonic(), orjson.loads(line[5:]))
            trace = by_id.get(str(message.body.get("event_id")))
            (trace.messages if trace else stream.session_messages).append(message)
            if message.msg == "close_stream":
                stream.closed = True
                return


async def join_into(
    http: aiohttp.ClientSession, base_url: str, stream: SessionStream, job: Job, fn_index: int
) -> Trace:
    """Join `job` in the stream's session and record the attempt (times, status, reply) on it."""
    trace = Trace(job, stream.session_hash, joined_at=time.monotonic())
    trace.join_status, trace.join_body = await join(http, base_url, fn_index, job.data, stream.session_hash)
    trace.acked_at = time.monotonic()
    stream.traces.append(trace)
    return trace


async def run_session(
    http: aiohttp.ClientSession,
    base_url: str,
    indices: dict[str, int],
    jobs: list[Job],
    t0: float,
    stop_after_s: float | None = None,
) -> SessionStream:
    """Join every job of one session at its offset, then read the session's stream."""
    label = jobs[0].session or "s"
    stream = SessionStream(f"{label}-{uuid.uuid4().hex}", [])  # fresh per run: a burst can be repeated
    for job in jobs:
        await asyncio.sleep(max(t0 + job.at_s - time.monotonic(), 0.0))
        await join_into(http, base_url, stream, job, indices[job.fn])
    if any(t.event_id for t in stream.traces):
        await read_stream(http, base_url, stream, stop_after_s)
    return stream


def group_sessions(jobs: list[Job]) -> list[list[Job]]:
    """Jobs with the same `session` share a session; a job without one gets its own."""
    named: dict[str, list[Job]] = defaultdict(list)
    groups: list[list[Job]] = []
    for job in jobs:
        if job.session is None:
            groups.append([job])
        else:
            if job.session not in named:
                groups.append(named[job.session])
            named[job.session].append(job)
    return groups


def new_http() -> aiohttp.ClientSession:
    """A client with no connection cap (aiohttp's default pool of 100 would queue long bursts)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=False),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
    )


async def run_burst_async(base_url: str, jobs: list[Job], timeout_s: float = 30.0) -> list[Trace]:
    """Submit every job (each session concurrently, each job at its offset); traces in job order."""
    async with new_http() as http:
        indices = await fn_indices(http, base_url)
        t0 = time.monotonic()
        sessions = [run_session(http, base_url, indices, group, t0) for group in group_sessions(jobs)]
        streams = await asyncio.wait_for(asyncio.gather(*sessions), timeout_s)
    order = {id(job): i for i, job in enumerate(jobs)}
    traces = [t for s in streams for t in s.traces]
    return sorted(traces, key=lambda t: order[id(t.job)])


def run_burst(base_url: str, jobs: list[Job], timeout_s: float = 30.0) -> list[Trace]:
    """Synchronous wrapper for tests."""
    return asyncio.run(run_burst_async(base_url, jobs, timeout_s))


@dataclass
class LiveSession:
    """A session with joined jobs whose stream is being read in a background task."""

    stream: SessionStream
    reader: asyncio.Task[None]

    @property
    def trace(self) -> Trace:
        return self.stream.traces[0]


async def start_session(
    http: aiohttp.ClientSession,
    base_url: str,
    fn_index: int,
    inputs: list[list[Any]],
    stop_after_s: float | None = None,
) -> LiveSession:
    """Join one job per entry of `inputs` in a new session, then read its stream in the background."""
    stream = SessionStream(uuid.uuid4().hex, [])
    for data in inputs:
        await join_into(http, base_url, stream, Job(str(fn_index), data), fn_index)
    reader = asyncio.create_task(read_stream(http, base_url, stream, stop_after_s))
    return LiveSession(stream, reader)


async def queue_status(http: aiohttp.ClientSession, base_url: str) -> dict[str, Any]:
    """GET /queue/status: an estimation message whose queue_size counts all waiting events."""
    async with http.get(f"{base_url}{API}/queue/status") as resp:
        resp.raise_for_status()
        body: dict[str, Any] = orjson.loads(await resp.read())
        return body


async def cancel(
    http: aiohttp.ClientSession, base_url: str, session_hash: str, fn_index: int, event_id: str
) -> tuple[int, Any]:
    """POST /cancel {session_hash, fn_index, event_id}."""
    body = {"session_hash": session_hash, "fn_index": fn_index, "event_id": event_id}
    async with http.post(f"{base_url}{API}/cancel", json=body) as resp:
        return resp.status, orjson.loads(await resp.read())
