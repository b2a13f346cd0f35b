"""`protocol: mcp`: MCP tool calls over Streamable HTTP, as an agent makes them (a Gradio app's
`mcp_server=True` tools, FastMCP...): JSON-RPC POSTs, answered with JSON or an SSE stream, in MCP sessions."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import Clock, fail
from qbench.run.protocols.http import refuse
from qbench.run.protocols.login import session_slots
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import Scenario, endpoint_label

DEFAULT_PATH = "/gradio_api/mcp/"
PROTOCOL_VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
CLIENT_ERRORS = {-32600, -32601, -32602}  # invalid request, unknown method, invalid params
SESSION_ID = "Mcp-Session-Id"
CLOSE_TIMEOUT_S = 5.0  # the DELETEs at the end of a run, all together


class McpError(Exception):
    """A JSON-RPC error answer or a malformed one: `kind` is the record's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(eq=False)
class McpSession:
    """One MCP session: the headers its requests carry (its session id and protocol version) and its ids."""

    headers: dict[str, str]
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one `initialize` at a time
    opened: bool = False
    opens: int = 0  # how many times it was opened (1 + re-openings after a 404)

    @property
    def id(self) -> str | None:
        return self.headers.get(SESSION_ID)


class McpSessions:
    """The run's MCP sessions: one per session slot or, with `per_slot=False`, one per concurrent call."""

    def __init__(self, http: aiohttp.ClientSession, url: str, headers: dict[str, str],
                 per_slot: bool) -> None:
        self.http, self.url, self.headers, self.per_slot = http, url, headers, per_slot
        self.every: list[McpSession] = []  # all opened or being opened, to DELETE at the end
        self._slots: dict[int, McpSession] = {}
        self._idle: list[McpSession] = []

    def new(self) -> McpSession:
        session = McpSession(dict(self.headers))
        self.every.append(session)
        return session

    def adopt(self, session: McpSession) -> None:
        """The discovery's session, open already: the first slot's, or the pool's first idle one."""
        if self.per_slot:
            self._slots.setdefault(0, session)
        else:
            self._idle.append(session)

    def take(self, slot: int) -> McpSession:
        if self.per_slot:
            session = self._slots.get(slot)
            if session is None:
                session = self._slots[slot] = self.new()
            return session
        return self._idle.pop() if self._idle else self.new()

    def give_back(self, session: McpSession) -> None:
        if not self.per_slot:
            self._idle.append(session)

    async def ready(self, session: McpSession, expired: str | None = None) -> None:
        """Open `session` unless it is open; `expired`: the session id the server no longer knows."""
        async with session.lock:
            if session.opened and (expired is None or session.id != expired):
                return
            headers = dict(self.headers)  # swapped in once open: calls meanwhile keep the old id
            await open_session(self.http, self.url, headers, next(session.ids))
            session.headers, session.opened, session.opens = headers, True, session.opens + 1

    async def close(self) -> int:
        """DELETE every open session that has an id (errors ignored); how many were sent."""
        open_ = [s for s in self.every if s.opened and s.id is not None]

        async def delete(session: McpSession) -> None:
            async with self.http.delete(self.url, headers=session.headers) as resp:
                await resp.read()

        if open_:
            await asyncio.wait_for(asyncio.gather(*(delete(s) for s in open_), return_exceptions=True),
                                   CLOSE_TIMEOUT_S)
        for session in open_:
            session.opened = False
        return len(open_)


class McpProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        ep = scenario.endpoint
        assert ep.tool is not None
        self.url = target.rstrip("/") + "/" + (ep.path or DEFAULT_PATH).lstrip("/")
        self.tool, self.arguments = ep.tool, list(ep.arguments)
        self.progress = ep.progress is not False
        self.http, self.clock = http, clock
        headers = {"Content-Type": "application/json", "Accept": ACCEPT, **ep.headers}
        self.sessions = McpSessions(http, self.url, headers, per_slot=session_slots(scenario.load) > 0)
        self.endpoint_label = endpoint_label("mcp", ep)

    async def discover(self) -> dict[str, Any]:
        """Initialise (keeping the session id the server gives), then check the tool is listed."""
        session = self.sessions.new()
        server, tools = await list_tools(self.http, self.url, session.headers)
        session.opened, session.opens = True, 1
        session.ids = itertools.count(3)  # 1 and 2: initialize and tools/list
        self.sessions.adopt(session)
        names = [str(t.get("name")) for t in tools]
        if self.tool not in names:
            raise TargetError(f"{self.url}: no tool {self.tool!r}; it lists: {', '.join(names) or 'none'}")
        schema = next(t for t in tools if t.get("name") == self.tool).get("inputSchema") or {}
        properties = schema.get("properties") or {}
        unknown = [a for a in self.arguments if a not in properties]
        if unknown and properties:
            raise TargetError(f"tool {self.tool!r} takes no argument(s) {', '.join(unknown)}; its arguments: "
                              f"{', '.join(properties)}")
        version = session.headers["Mcp-Protocol-Version"]
        return {"url": self.url, "server": server, "protocol_version": version,
                "session": session.id is not None, "progress": self.progress, "tool": self.tool,
                "input_schema": schema}

    def body(self, inputs: list[Any], number: int) -> bytes:
        arguments = dict(zip(self.arguments, inputs, strict=False))
        params: dict[str, Any] = {"name": self.tool, "arguments": arguments}
        if self.progress:
            params["_meta"] = {"progressToken": number}
        return orjson.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params})

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        session = self.sessions.take(slot)
        try:
            await self._send(record, inputs, session)
        finally:
            self.sessions.give_back(session)

    async def _send(self, record: RequestRecord, inputs: list[Any], session: McpSession) -> None:
        try:
            await self.sessions.ready(session)
        except (aiohttp.ClientError, OSError, McpError) as exc:
            record.sent_at_s = self.clock.now()
            kind = exc.kind if isinstance(exc, McpError) else "connect"
            fail(record, kind, f"initialize {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        record.sent_at_s = self.clock.now()
        record.bytes_sent = 0
        for attempt in range(2):
            number, sent_on = next(session.ids), session.id
            data = self.body(inputs, number)
            record.bytes_sent += len(data)
            try:
                retry = attempt == 0 and sent_on is not None
                result = await self._post(record, session, data, number, retry=retry)
                if result is None:  # the session expired: open it again, then send the call once more
                    await self.sessions.ready(session, expired=sent_on)
                    continue
                if record.completed_at_s is not None:  # refused (an HTTP error status)
                    return
            except (aiohttp.ClientError, OSError) as exc:
                kind = "connect" if record.joined_at_s is None else "stream_broken"
                fail(record, kind, f"POST {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
                return
            except McpError as exc:
                fail(record, exc.kind, f"tools/call {self.tool}: {exc}", self.clock.now())
                return
            if result.get("isError"):
                message = f"tool {self.tool} raised: {tool_text(result)}"
                fail(record, "server_error", message, self.clock.now())
                return
            record.completed_at_s = self.clock.now()
            record.outcome = "ok"
            return

    async def _post(self, record: RequestRecord, session: McpSession, data: bytes, number: int, *,
                    retry: bool) -> dict[str, Any] | None:
        """The call's result; None: a 404 to retry on a new session (`retry`); {}: refused (record failed)."""
        async with self.http.post(self.url, data=data, headers=session.headers) as resp:
            record.joined_at_s = self.clock.now()
            record.http_status = resp.status
            if resp.status == 404 and retry:
                await resp.read()
                record.joined_at_s = record.http_status = None
                return None
            if resp.status >= 400:
                await refuse(record, resp, self.clock)
                return {}
            return await self._read(record, resp, number)

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
                if message.get("method") == "notifications/progress" and ours(message, number):
                    now = self.clock.now()
                    if record.first_output_at_s is None:
                        record.first_output_at_s = now
                    record.outputs = (record.outputs or 0) + 1
        record.bytes_received = received
        raise McpError("stream_broken", "the stream ended without the call's answer")

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: closing the stream is the client's cancellation."""

    async def close(self) -> None:
        """End the run's sessions (DELETE); a server already gone is no error."""
        try:
            await self.sessions.close()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            pass


def ours(message: dict[str, Any], number: int) -> bool:
    """Whether a progress notification is for request `number` (its progressToken; none given: yes)."""
    params = message.get("params")
    token = params.get("progressToken") if isinstance(params, dict) else None
    return token is None or token == number or str(token) == str(number)


async def open_session(http: aiohttp.ClientSession, url: str, headers: dict[str, str], number: int
                       ) -> dict[str, Any]:
    """`initialize` + `notifications/initialized`: the result; `headers` gains the session id and version.
    McpError for a refusal or a non-MCP answer; aiohttp/OS errors for no connection."""
    init = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "qbench", "version": "1"}}
    headers.pop(SESSION_ID, None)
    result, answered = await _rpc(http, url, headers, number, "initialize", init)
    if answered.get(SESSION_ID):
        headers[SESSION_ID] = answered[SESSION_ID]
    headers["Mcp-Protocol-Version"] = str(result.get("protocolVersion") or PROTOCOL_VERSION)
    body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    async with http.post(url, data=body, headers=headers) as resp:
        await resp.read()
    return result


async def list_tools(http: aiohttp.ClientSession, url: str, headers: dict[str, str]
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Open a session and `tools/list`: (server info, tools). TargetError when no MCP server answers."""
    try:
        result = await open_session(http, url, headers, 1)
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
