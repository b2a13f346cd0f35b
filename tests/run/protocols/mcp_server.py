"""An MCP server made with the official SDK (FastMCP, Streamable HTTP at /mcp) in a thread, for tests and
bench/mcp_vs_sdk.py: one tool, `steps`, that reports progress `count` times (when the call asks for it)
and answers the count; every HTTP request it gets is logged (method, session id, JSON-RPC method,
status) so a test can see the sessions a client opened, used and deleted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from mcp.server.fastmcp import Context, FastMCP

from reference_server.testing import bound_port


@dataclass(frozen=True)
class Hit:
    http_method: str  # POST, GET, DELETE
    session: str | None  # the Mcp-Session-Id header sent
    rpc: str | None  # the JSON-RPC method of a POST (tools/call, initialize, ...)
    status: int  # the response's status
    progress_token: bool  # a tools/call that asked for progress


@dataclass
class McpServer:
    url: str  # http://127.0.0.1:PORT/mcp
    hits: list[Hit] = field(default_factory=list)

    def calls(self) -> list[Hit]:
        return [h for h in self.hits if h.rpc == "tools/call"]


def build(delay_s: float, idle_timeout_s: float | None) -> FastMCP:
    server = FastMCP("qbench-test", session_idle_timeout=idle_timeout_s, log_level="WARNING")

    @server.tool()
    async def steps(count: int, ctx: Context) -> int:  # type: ignore[type-arg]
        """Report progress `count` times, `delay_s` apart, then answer `count`.

        Args:
            count: how many progress notifications to send
        """
        for i in range(count):
            await asyncio.sleep(delay_s)
            await ctx.report_progress(i + 1, count)
        await asyncio.sleep(delay_s)
        return count

    return server


def logged(app: Any, hits: list[Hit]) -> Any:
    """`app` with every request logged into `hits` (the body read ahead to name its JSON-RPC method)."""

    async def wrapper(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            rpc = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            rpc = None
        rpc = rpc if isinstance(rpc, dict) else {}
        meta = (rpc.get("params") or {}).get("_meta") or {}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status = [0]
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def record(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                hits.append(Hit(scope["method"], headers.get("mcp-session-id"), rpc.get("method"),
                                message["status"], "progressToken" in meta))
            await send(message)

        await app(scope, replay, record)

    return wrapper


@contextmanager
def mcp_server(delay_s: float = 0.02, idle_timeout_s: float | None = None) -> Iterator[McpServer]:
    """A FastMCP server on 127.0.0.1 and a free port, in a thread; stopped when the block exits."""
    hits: list[Hit] = []
    app = logged(build(delay_s, idle_timeout_s).streamable_http_app(), hits)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="mcp-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.01)
        yield McpServer(f"http://127.0.0.1:{bound_port(server)}/mcp", hits)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
