"""What every Gradio wire family shares: `GradioApp` (the app as discovery found it), the `QueueWire`
interface the families implement, and `apply_message`: one queue message -> the record."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson

from qbench.run.protocols.base import JOURNEY, JSON_HEADERS, Clock, fail
from qbench.run.records.schema import RequestRecord

FAMILIES = ("ws", "sse", "sse_v1", "sse_v2", "sse_v2.1", "sse_v3")
CANCEL_ROUTE_SINCE = (4, 31)  # POST /cancel; before it, POST /reset (which only resets generators)


@dataclass(frozen=True)
class GradioApp:
    """One Gradio app's endpoint, as discovery found it."""

    base: str  # the target's root, where /config is
    api: str  # base + api_prefix: where the queue, upload and cancel routes are
    family: str  # one of FAMILIES
    version: tuple[int, ...]  # Gradio's version from /config, () when it does not say
    fn_index: int  # the dependency's id (its index in config["dependencies"] before 4.x)
    # what the browser sends with an event whose function reads gr.EventData (a like, a select...);
    # None for the others (qbench.run.protocols.gradio_values.event_data)
    event_data: dict[str, Any] | None = None

    @property
    def has_cancel_route(self) -> bool:
        if self.version:
            return self.version >= CANCEL_ROUTE_SINCE
        return self.family == "sse_v3"


class QueueWire(Protocol):
    """One family's way to queue a prepared request and follow it to its end."""

    async def send(self, record: RequestRecord, data: list[Any], slot: int) -> None:
        """Join the queue with `data` (encoded) in the session of `slot` and fill `record`; never raises."""
        ...

    def session_hash(self, record: RequestRecord, slot: int) -> str:
        """The session `record` is sent in, chosen before its uploads (which carry it)."""
        ...

    def abandon(self, record: RequestRecord) -> None:
        """The executor gave up on `record` (timeout): cancel it on the server if the family can."""
        ...

    async def close(self) -> None: ...


class Background:
    """Fire-and-forget tasks (cancels) that `close()` stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def new_session_hash() -> str:
    return uuid.uuid4().hex


def pick_session(record: RequestRecord, slot: int, pool: Sequence[str]) -> str:
    """A request's session_hash: its journey's, else the pool's for its slot, else the record's, else new."""
    journey = JOURNEY.get()  # a journey's requests share its session
    if journey is not None:
        return journey.session_hash
    if pool:
        return pool[slot % len(pool)]
    return record.session_id or new_session_hash()


def parse_version(text: Any) -> tuple[int, ...]:
    """"4.44.1" -> (4, 44, 1); "5.0.0b3" -> (5, 0, 0); anything else -> ()."""
    match = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text or ""))
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


#: Output files of completed events, by id(record), until the protocol fetches them (see `output_files`).
OUTPUT_FILES: dict[int, list[str]] = {}


def output_files(data: Any, api: str) -> list[str]:
    """The URLs of the files in a result: FileData dicts (4.x+) and 3.x's {name, is_file: true}."""
    found: list[str] = []
    if isinstance(data, list):
        for item in data:
            found += output_files(item, api)
    elif isinstance(data, dict):
        meta = data.get("meta")
        if (isinstance(meta, dict) and meta.get("_type") == "gradio.FileData") or (
                "path" in data and "orig_name" in data):
            ref = data.get("url") or (f"{api}/file={data['path']}" if data.get("path") else None)
            if isinstance(ref, str):
                found.append(ref)
        elif data.get("is_file") and isinstance(data.get("name"), str):
            found.append(f"{api}/file={data['name']}")
        else:
            for value in data.values():
                found += output_files(value, api)
    return found


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
    elif kind == "queue_full":  # ws and sse say it on the stream; later families answer the join 503
        fail(record, "queue_full", "queue_full: the queue is at its max_size", at)
        return True
    elif kind == "unexpected_error":
        fail(record, "server_error", str(msg.get("message")), at)
        return True
    return False


def _complete(record: RequestRecord, msg: dict[str, Any], at: float) -> None:
    if record.completed_at_s is not None:  # already closed (e.g. queue_full): the first verdict wins
        return
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
        files = output_files(output.get("data"), "") if isinstance(output, dict) else []
        if files:
            OUTPUT_FILES[id(record)] = files


async def sse_messages(
    resp: aiohttp.ClientResponse, clock: Clock
) -> AsyncIterator[tuple[dict[str, Any], int, float]]:
    """(message, frame bytes, arrival time) per `data: {...}` frame; heartbeats and bad frames skipped."""
    buf = b""
    async for chunk in resp.content.iter_any():
        buf += chunk
        if b"\n\n" not in buf:
            continue
        *frames, buf = buf.split(b"\n\n")
        at = clock.now()
        for frame in frames:
            start = frame.find(b"data:")
            if start < 0:
                continue
            try:
                msg = orjson.loads(frame[start + 5 :])
            except orjson.JSONDecodeError:
                continue
            if isinstance(msg, dict) and msg.get("msg") != "heartbeat":
                yield msg, len(frame) + 2, at


async def post_quietly(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    """A best-effort POST (cancels): failures are ignored, the request is already closed."""
    try:
        async with http.post(url, data=orjson.dumps(body), headers=JSON_HEADERS) as resp:
            await resp.read()
    except (aiohttp.ClientError, OSError):
        pass
