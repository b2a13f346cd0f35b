"""MCP tool calls over Streamable HTTP (`protocol: mcp`): what an agent sends to an MCP server.

A Gradio app launched with `mcp_server=True` serves its functions as MCP tools at `/gradio_api/mcp/`
(the default `endpoint.path`); any Streamable HTTP MCP server works the same way. Per the MCP spec
(2025-06-18), every message is a JSON-RPC POST to that one URL, answered with JSON or with an SSE
stream of JSON-RPC messages:

    discover   `initialize` (the server's name, protocol version, and an `Mcp-Session-Id` when it
               keeps sessions), `notifications/initialized`, then `tools/list`: the tool must exist
    a request  one `tools/call` {name: endpoint.tool, arguments: {endpoint.arguments[i]: input i}}
               -> sent; the response's headers -> joined; each `notifications/progress` message on
               the stream -> an output (the first one: first_output_at_s); the JSON-RPC response with
               the request's id -> completed

An answer with `isError: true` (the tool raised) is a `server_error` carrying the tool's text; a
JSON-RPC `error` is `server_error` too (`http_4xx` for invalid params, -32602, and an unknown
method, -32601: the client's mistake); an HTTP refusal is read like plain HTTP's. There is no queue
to observe, so the queue wait and service time stay unknown (None), as for `protocol: http`.
"""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import Clock, fail
from qbench.run.protocols.http import refuse
from qbench.run.records import RequestRecord
from qbench.run.scenario.scenario import Scenario, endpoint_label

DEFAULT_PATH = "/gradio_api/mcp/"
PROTOCOL_VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
CLIENT_ERRORS = {-32600, -32601, -32602}  # invalid request, unknown method, invalid params


class McpError(Exception):
    """A JSON-RPC error answer or a malformed one: `kind` is the record's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class McpProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        ep = scenario.endpoint
        assert ep.tool is not None
        self.url = target.rstrip("/") + "/" + (ep.path or DEFAULT_PATH).lstrip("/")
        self.tool, self.arguments = ep.tool, list(ep.arguments)
        self.http, self.clock = http, clock
        self.headers = {"Content-Type": "application/json", "Accept": ACCEPT, **ep.headers}
        self.endpoint_label = endpoint_label("mcp", ep)
        self._ids = itertools.count(3)  # 1 and 2: initialize and tools/list

    async def discover(self) -> dict[str, Any]:
        """Initialise (keeping the session id the server gives), then check the tool is listed."""
        server, tools = await list_tools(self.http, self.url, self.headers)
        names = [str(t.get("name")) for t in tools]
        if self.tool not in names:
            raise TargetError(f"{self.url}: no tool {self.tool!r}; it lists: {', '.join(names) or 'none'}")
        schema = next(t for t in tools if t.get("name") == self.tool).get("inputSchema") or {}
        properties = schema.get("properties") or {}
        unknown = [a for a in self.arguments if a not in properties]
        if unknown and properties:
            raise TargetError(f"tool {self.tool!r} takes no argument(s) {', '.join(unknown)}; its arguments: "
                              f"{', '.join(properties)}")
        return {"url": self.url, "server": server, "protocol_version": self.headers["Mcp-Protocol-Version"],
                "session": "Mcp-Session-Id" in self.headers, "tool": self.tool, "input_schema": schema}

    def body(self, inputs: list[Any], number: int) -> bytes:
        arguments = dict(zip(self.arguments, inputs, strict=False))
        return orjson.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                             "params": {"name": self.tool, "arguments": arguments}})

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        number = next(self._ids)
        data = self.body(inputs, number)
        record.bytes_sent = len(data)
        record.sent_at_s = self.clock.now()
        try:
            async with self.http.post(self.url, data=data, headers=self.headers) as resp:
                record.joined_at_s = self.clock.now()
                record.http_status = resp.status
                if resp.status >= 400:
                    await refuse(record, resp, self.clock)
                    return
                result = await self._read(record, resp, number)
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"POST {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        except McpError as exc:
            fail(record, exc.kind, f"tools/call {self.tool}: {exc}", self.clock.now())
            return
        if result.get("isError"):
            fail(record, "server_error", f"tool {self.tool} raised: {tool_text(result)}", self.clock.now())
            return
        record.completed_at_s = self.clock.now()
        record.outcome = "ok"

    async def _read(self, record: RequestRecord, resp: aiohttp.ClientResponse, number: int) -> dict[str, Any]:
        """The call's result: a JSON body, or an SSE stream read message by message (progress counted)."""
        if "text/event-stream" not in resp.headers.get("Content-Type", ""):
            raw = await resp.read()
            record.bytes_received = len(raw)
            return answer(parse_messages(raw, "application/json"), number)
        received, buffer = 0, b""
        async for chunk in resp.content.iter_any():
            received += len(chunk)
            buffer += chunk
            *events, buffer = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
            for event in events:
                message = sse_message(event)
                if message is None:
                    continue
                if message.get("id") == number and "method" not in message:
                    record.bytes_received = received
                    return answer([message], number)
                if message.get("method") == "notifications/progress":
                    now = self.clock.now()
                    if record.first_output_at_s is None:
                        record.first_output_at_s = now
                    record.outputs = (record.outputs or 0) + 1
        record.bytes_received = received
        raise McpError("stream_broken", "the stream ended without the call's answer")

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: closing the stream is the client's cancellation (the executor does it)."""

    async def close(self) -> None:
        return None


async def list_tools(http: aiohttp.ClientSession, url: str, headers: dict[str, str]
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`initialize`, `notifications/initialized`, `tools/list` at `url`: (the server's info, its tools).
    `headers` gains the session id and protocol version to send from then on. TargetError when the
    server cannot be reached or does not answer as an MCP server."""
    init = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "qbench", "version": "1"}}
    try:
        result, answered = await _rpc(http, url, headers, 1, "initialize", init)
        if answered.get("Mcp-Session-Id"):
            headers["Mcp-Session-Id"] = answered["Mcp-Session-Id"]
        headers["Mcp-Protocol-Version"] = str(result.get("protocolVersion") or PROTOCOL_VERSION)
        body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        async with http.post(url, data=body, headers=headers) as resp:
            await resp.read()
        listed, _ = await _rpc(http, url, headers, 2, "tools/list", {})
    except (aiohttp.ClientError, OSError) as exc:
        raise TargetError(f"{url}: cannot connect ({exc.__class__.__name__}: {exc}); is the server "
                          "running, and is this its MCP URL (Gradio: launch(mcp_server=True))?") from None
    except McpError as exc:
        raise TargetError(f"{url}: no MCP server answers initialize and tools/list there: {exc} (Gradio: "
                          "launch(mcp_server=True), with gradio[mcp] installed)") from None
    info = result.get("serverInfo")
    tools = [t for t in listed.get("tools") or [] if isinstance(t, dict)]
    return (info if isinstance(info, dict) else {}), tools


async def _rpc(http: aiohttp.ClientSession, url: str, headers: dict[str, str], number: int, method: str,
               params: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """One JSON-RPC request outside the load: its result and the response's headers."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
    async with http.post(url, data=body, headers=headers) as resp:
        raw = await resp.read()
        if resp.status >= 400:
            raise McpError("http_4xx" if resp.status < 500 else "http_5xx",
                           f"{method}: HTTP {resp.status}: {raw[:200].decode(errors='replace')}")
        return answer(parse_messages(raw, resp.headers.get("Content-Type", "")), number), resp.headers


def parse_messages(raw: bytes, content_type: str) -> list[dict[str, Any]]:
    """JSON-RPC messages of a whole response body: one JSON message or a batch, or an SSE stream."""
    if "text/event-stream" in content_type:
        events = raw.replace(b"\r\n", b"\n").split(b"\n\n")
        return [m for m in (sse_message(e) for e in events) if m is not None]
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise McpError("server_error", f"not JSON: {raw[:120].decode(errors='replace')}") from None
    return [m for m in (data if isinstance(data, list) else [data]) if isinstance(m, dict)]


def sse_message(event: bytes) -> dict[str, Any] | None:
    """The JSON-RPC message of one SSE event (its `data:` lines joined), None for a comment or ping."""
    lines = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return None
    try:
        message = orjson.loads(b"\n".join(lines))
    except orjson.JSONDecodeError:
        raise McpError("server_error", f"an SSE event that is not JSON: {event[:120]!r}") from None
    return message if isinstance(message, dict) else None


def answer(messages: list[dict[str, Any]], number: int) -> dict[str, Any]:
    """The result of request `number` among `messages`; McpError for its JSON-RPC error or none."""
    reply = next((m for m in messages if m.get("id") == number and "method" not in m), None)
    if reply is None:
        raise McpError("server_error", f"no answer to request {number}")
    error = reply.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        kind = "http_4xx" if code in CLIENT_ERRORS else "server_error"
        raise McpError(kind, f"JSON-RPC error {code}: {error.get('message')}")
    result = reply.get("result")
    if not isinstance(result, dict):
        raise McpError("server_error", f"request {number}: an answer without a result object")
    return result


def tool_text(result: dict[str, Any]) -> str:
    """A tool result's text content, joined (what the tool said when it failed)."""
    parts = [str(c.get("text")) for c in result.get("content") or [] if isinstance(c, dict) and "text" in c]
    return " ".join(parts)[:500] or "(no text)"
