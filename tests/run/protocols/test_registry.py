"""The two registries (qbench.run.protocols.registry, gradio_families): a scenario's protocol -> its
WireProtocol, and a Gradio app's family -> its QueueWire. Nothing is sent: constructors only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio import GradioProtocol
from qbench.run.protocols.gradio_3x_ws import WebSocketWire
from qbench.run.protocols.gradio_4_0_sse import JoinStreamWire
from qbench.run.protocols.gradio_4_9_sse import SessionStreamWire
from qbench.run.protocols.gradio_families import make_chunk_wire, make_wire
from qbench.run.protocols.gradio_stream import ChunkStreamWire
from qbench.run.protocols.gradio_wire import FAMILIES, GradioApp
from qbench.run.protocols.http import HttpProtocol
from qbench.run.protocols.mcp import McpProtocol
from qbench.run.protocols.openai import OpenAIProtocol
from qbench.run.protocols.page import PageProtocol
from qbench.run.protocols.registry import make_protocol
from qbench.run.scenario.schema import parse_scenario

HTTP: Any = None  # the constructors keep the session; none of them uses it before discover/send


@pytest.mark.parametrize(("protocol", "endpoint", "kind"), [
    ("gradio", {"api_name": "predict"}, GradioProtocol),
    ("http", {"path": "/x"}, HttpProtocol),
    ("openai", {"model": "m"}, OpenAIProtocol),
    ("mcp", {"tool": "t", "arguments": ["text"]}, McpProtocol),
    ("gradio", {"page": "/"}, PageProtocol),  # a page load, whatever the protocol
    ("http", {"page": "/index.html"}, PageProtocol),
])
def test_each_protocol_gets_its_wire_protocol(protocol: str, endpoint: dict[str, Any], kind: type) -> None:
    scenario = parse_scenario({"name": "t", "protocol": protocol, "endpoint": endpoint, "load": {"burst": 1},
                               "payload": {"inputs": [{"text": {"words": [2, 2]}}]}})
    made = make_protocol(scenario, "http://h:1/", HTTP, Clock())
    assert isinstance(made, kind)
    assert made.endpoint_label


def app(family: str, version: tuple[int, ...] = ()) -> GradioApp:
    return GradioApp(base="http://h", api="http://h/gradio_api", family=family, version=version, fn_index=3)


@pytest.mark.parametrize(("family", "kind"), [
    ("ws", WebSocketWire), ("sse", JoinStreamWire), ("sse_v1", SessionStreamWire),
    ("sse_v2", SessionStreamWire), ("sse_v2.1", SessionStreamWire), ("sse_v3", SessionStreamWire),
])
def test_each_gradio_family_gets_its_queue_wire(family: str, kind: type) -> None:
    wire = make_wire(app(family), HTTP, Clock(), pool=2)
    assert type(wire) is kind
    assert wire.app.family == family  # type: ignore[attr-defined]
    assert len(wire.pool) == 2  # type: ignore[attr-defined]


def test_every_family_is_served() -> None:
    assert {type(make_wire(app(f), HTTP, Clock(), 0)).__name__ for f in FAMILIES} == {
        "WebSocketWire", "JoinStreamWire", "SessionStreamWire"}


def test_only_sse_v3_ends_its_session_streams_with_close_stream() -> None:
    for family in ("sse_v1", "sse_v2", "sse_v2.1", "sse_v3"):
        wire = make_wire(app(family), HTTP, Clock(), pool=1)
        assert isinstance(wire, SessionStreamWire)
        assert wire.pool[0].close_message is (family == "sse_v3")
        assert wire.pool[0].shared and wire.pool[0].url.startswith("http://h/gradio_api/queue/data?session_hash=")


def test_a_chunk_wire_takes_its_chunks_and_gradios_default_interval() -> None:
    wire = make_chunk_wire(app("sse_v3"), HTTP, Clock(), 0, chunks=4, every_s=None)
    assert isinstance(wire, ChunkStreamWire) and (wire.chunks, wire.every_s, wire.pool) == (4, 0.5, [])
    assert make_chunk_wire(app("sse_v3"), HTTP, Clock(), 0, chunks=1, every_s=0.1).every_s == 0.1
    asyncio.run(wire.close())
