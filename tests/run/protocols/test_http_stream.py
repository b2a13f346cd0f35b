"""protocol: http against streamed bodies (chunked, text/event-stream) and refusals, served by a small
aiohttp app in a thread (a real socket: in-process clients buffer the whole body)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from qbench.run.pipeline import run_scenario
from tests.run.conftest import scenario, serve_aiohttp

GAP_S = 0.05


async def chunked(request: web.Request) -> web.StreamResponse:
    """Five chunks, GAP_S apart: the first arrives long before the end."""
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for i in range(5):
        await resp.write(f"token{i} ".encode())
        await asyncio.sleep(GAP_S)
    await resp.write_eof()
    return resp


async def sse(request: web.Request) -> web.StreamResponse:
    """Three events, the second written in two pieces (an event split across reads), CRLF endings."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b"data: one\r\n\r\n")
    await asyncio.sleep(GAP_S)
    await resp.write(b"data: t")
    await asyncio.sleep(GAP_S)
    await resp.write(b"wo\r\n\r\ndata: three\r\n\r\n")
    await resp.write_eof()
    return resp


async def queue_full(request: web.Request) -> web.Response:
    return web.json_response({"detail": "Queue is full."}, status=503, headers={"Retry-After": "1"})


async def busy(request: web.Request) -> web.Response:
    return web.json_response({"detail": "overloaded"}, status=503)


async def broken(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    await resp.write(b"partial")
    assert request.transport is not None
    request.transport.close()
    return resp


@pytest.fixture(scope="module")
def stream_server() -> Iterator[str]:
    app = web.Application()
    app.add_routes(
        [
            web.post("/chunked", chunked),
            web.post("/sse", sse),
            web.post("/full", queue_full),
            web.post("/busy", busy),
            web.post("/broken", broken),
        ]
    )
    with serve_aiohttp(app) as url:
        yield url


def test_chunked_body_is_read_as_it_arrives(stream_server: str, tmp_path: Path) -> None:
    spec = scenario(protocol="http", endpoint={"path": "/chunked"}, load={"burst": 3, "timeout": 10})
    result = run_scenario(spec, target=stream_server, out_dir=tmp_path / "r", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    for r in result.records:
        assert r.outputs == 5 and r.bytes_received == len("token0 ") * 5
        assert r.first_output_at_s is not None and r.completed_at_s is not None
        # the first chunk came before the four gaps that follow it
        assert r.completed_at_s - r.first_output_at_s >= 3 * GAP_S
    assert result.summary.phase("ttfo_s").count == 3


def test_event_stream_counts_events(stream_server: str, tmp_path: Path) -> None:
    spec = scenario(protocol="http", endpoint={"path": "/sse"}, load={"burst": 2, "timeout": 10})
    result = run_scenario(spec, target=stream_server, out_dir=tmp_path / "r", live=False)
    assert all(r.ok and r.outputs == 3 for r in result.records), [r.outputs for r in result.records]
    r = result.records[0]
    assert r.first_output_at_s is not None and r.completed_at_s is not None
    assert r.completed_at_s - r.first_output_at_s >= GAP_S


def test_status_is_checked_before_the_stream(stream_server: str, tmp_path: Path) -> None:
    kinds = {}
    for path in ("/full", "/busy", "/broken"):
        spec = scenario(protocol="http", endpoint={"path": path}, load={"burst": 2, "timeout": 10})
        result = run_scenario(spec, target=stream_server, out_dir=tmp_path / path[1:], live=False)
        kinds[path] = result.summary.errors_by_kind
        assert all(r.first_output_at_s is None or path == "/broken" for r in result.records)
    assert kinds == {"/full": {"queue_full": 2}, "/busy": {"http_5xx": 2}, "/broken": {"stream_broken": 2}}
    full = run_scenario(
        scenario(protocol="http", endpoint={"path": "/full"}, load={"burst": 1}),
        target=stream_server, out_dir=tmp_path / "msg", live=False,
    )
    assert full.records[0].http_status == 503 and "Queue is full" in (full.records[0].error_message or "")
