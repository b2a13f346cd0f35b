"""Fixtures for `qbench run` tests: reference servers (via the shared fixtures), a real Gradio app,
and a plain aiohttp JSON echo server, each stopped by the fixture."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from qbench.run.scenario.schema import Scenario, parse_scenario
from qbench.tune.servers.server_process import free_port


def scenario(**raw: Any) -> Scenario:
    """A scenario from keyword sections, e.g. scenario(endpoint={...}, load={...})."""
    raw.setdefault("name", "test")
    return parse_scenario(raw)




@pytest.fixture
def http_echo() -> Iterator[str]:
    """POST /echo returns the JSON body; GET /slow sleeps 0.5 s; /config is 404 (not Gradio)."""

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/json")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.5)
        return web.json_response({"ok": True})

    async def fail(request: web.Request) -> web.Response:
        return web.json_response({"error": "nope"}, status=500)

    app = web.Application()
    app.add_routes([web.post("/echo", echo), web.get("/slow", slow), web.post("/fail", fail)])
    with serve_aiohttp(app) as url:
        yield url


@contextlib.contextmanager
def serve_aiohttp(app: web.Application) -> Iterator[str]:
    """Serve an aiohttp app on a free loopback port in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    port = free_port()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        _wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def gradio_app() -> Iterator[str]:
    """A real Gradio app: `greet` (text, 20 ms, limit 4), `count` (generator), `size` (image -> text)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    import gradio as gr

    def greet(name: str) -> str:
        time.sleep(0.02)
        return "Hello " + name

    def count(text: str) -> Iterator[str]:
        for i in range(4):
            time.sleep(0.01)
            yield text[: i + 1]

    def size(image: Any) -> str:
        return f"{image.size[0]}x{image.size[1]}"

    with gr.Blocks() as demo:
        text, out, image = gr.Textbox(), gr.Textbox(), gr.Image(type="pil")
        gr.Button().click(greet, text, out, api_name="greet", concurrency_limit=4)
        gr.Button().click(count, text, out, api_name="count")
        gr.Button().click(size, image, out, api_name="size")
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    try:
        yield demo.local_url.rstrip("/")
    finally:
        demo.close()


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"port {port} did not open")
