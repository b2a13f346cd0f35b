"""In-process harness for queue tests: an EventQueue on an asyncio loop, messages read per session."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reference_server.http.server_state import build_functions
from reference_server.io.components import FileStore
from reference_server.queue.messages import Message
from reference_server.queue.queue import EventQueue
from reference_server.settings import ServerSettings, parse_settings


def settings(functions: list[dict[str, Any]], **fields: Any) -> ServerSettings:
    return parse_settings({"functions": functions, **fields}, "<test>")


def run_queue(s: ServerSettings, body: Callable[[EventQueue], Awaitable[None]]) -> None:
    """Run `body(queue)` with a started queue, on a fresh loop; the queue is stopped afterwards."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            queue = EventQueue(s, build_functions(s), FileStore(Path(tmp)))
            queue.start()
            try:
                await body(queue)
            finally:
                await queue.stop()

    asyncio.run(main())


def drain(queue: EventQueue, session: str) -> list[Message]:
    """Every message waiting in the session's queue right now."""
    state = queue.sessions.get(session)
    out: list[Message] = []
    while state is not None and not state.queue.empty():
        out.append(state.queue.get_nowait())
    return out


async def read_until_done(queue: EventQueue, session: str, event_ids: set[str],
                          timeout_s: float = 10.0) -> list[Message]:
    """Read the session's messages until every id in `event_ids` got process_completed."""
    state = queue.sessions.get(session)
    assert state is not None, f"no session {session}"
    out: list[Message] = []
    left = set(event_ids)
    deadline = time.monotonic() + timeout_s
    while left:
        msg = await asyncio.wait_for(state.queue.get(), max(deadline - time.monotonic(), 0.01))
        msg = {**msg, "_t": time.perf_counter()}
        out.append(msg)
        if msg["msg"] == "process_completed":
            left.discard(msg["event_id"])
    return out


def of(msgs: list[Message], event_id: str, kind: str | None = None) -> list[Message]:
    return [m for m in msgs if m["event_id"] == event_id and (kind is None or m["msg"] == kind)]
