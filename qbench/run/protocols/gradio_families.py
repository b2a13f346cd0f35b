"""The one list of Gradio wire families: the app's family (GET /config `protocol`) -> its QueueWire."""

from __future__ import annotations

import aiohttp

from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_3x_ws import WebSocketWire
from qbench.run.protocols.gradio_4_0_sse import JoinStreamWire
from qbench.run.protocols.gradio_4_9_sse import SessionStreamWire
from qbench.run.protocols.gradio_stream import ChunkStreamWire
from qbench.run.protocols.gradio_wire import GradioApp, QueueWire


def make_wire(app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int) -> QueueWire:
    """The QueueWire for `app.family` (pool: session-pool size, 0 = a new session per request)."""
    if app.family == "ws":
        return WebSocketWire(app, http, clock, pool)
    if app.family == "sse":
        return JoinStreamWire(app, http, clock, pool)
    return SessionStreamWire(app, http, clock, pool)


def make_chunk_wire(app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int, *, chunks: int,
                    every_s: float | None) -> ChunkStreamWire:
    """A .stream() event's wire (sse_v3): `chunks` per event, `every_s` apart (None: Gradio's default)."""
    return ChunkStreamWire(app, http, clock, pool, chunks=chunks, every_s=every_s)
