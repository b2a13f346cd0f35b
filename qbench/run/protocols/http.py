"""`protocol: http`: method + path + a JSON body template filled with the inputs; a streamed body (SSE events,
HTTP chunks) read as it arrives. Plain `http://` goes through the lean `http1` pool, the rest via aiohttp."""

from __future__ import annotations

import base64
import os
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import JOURNEY, Clock, fail, http_problem, status_kind
from qbench.run.protocols.http1 import ERROR_BODY_LIMIT, Http1Error, Http1Pool
from qbench.run.protocols.server_timing import apply_server_timing
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.payloads import FileValue
from qbench.run.scenario.schema import Scenario, endpoint_label

BODY_CACHE = 4096  # bodies kept per protocol (payload variants are far fewer)

class HttpProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        ep = scenario.endpoint
        assert ep.path is not None
        self.url = target.rstrip("/") + "/" + ep.path.lstrip("/")
        self.method = ep.method
        self.template = ep.body
        self.headers = {"Content-Type": "application/json", **ep.headers}
        self.http = http
        self.clock = clock
        self.endpoint_label = endpoint_label("http", ep)  # every record has it: no ?token= value
        self._cache: dict[int, tuple[list[Any], bytes]] = {}  # id -> (the list itself, its body)
        self.pool = lean_pool(self.url, scenario)
        if self.pool is not None:
            parts = urlsplit(self.url)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            self.head = self.pool.head(self.method, target, self.headers)

    async def discover(self) -> dict[str, Any]:
        """Check the server answers at all (any HTTP status will do); snapshot /config if it has one."""
        base = self.url.split("/", 3)
        root = "/".join(base[:3])
        try:
            async with self.http.get(root + "/config") as resp:
                body = await resp.read()
                config = orjson.loads(body) if resp.status == 200 else None
        except (aiohttp.ClientError, OSError) as exc:
            raise TargetError(f"{root}: cannot connect ({exc.__class__.__name__}: {exc})") from exc
        except orjson.JSONDecodeError:
            config = None
        return {"config": config, "url": self.url}

    def body(self, inputs: list[Any]) -> bytes | None:
        """The serialised body for these inputs (None: a GET without a template), cached per input list."""
        if self.template is None and self.method == "GET":
            return None
        cached = self._cache.get(id(inputs))
        if cached is not None and cached[0] is inputs:
            return cached[1]
        body = orjson.dumps(render(self.template, inputs))
        if len(self._cache) >= BODY_CACHE:
            self._cache.clear()
        self._cache[id(inputs)] = (inputs, body)
        return body

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        data = self.body(inputs)
        record.bytes_sent = len(data) if data else 0
        journey = JOURNEY.get()  # a journey keeps the cookies the server set (the lean pool has no jar)
        if self.pool is not None and journey is None:
            await self._send_lean(record, data)
            return
        headers = self.headers if journey is None else {**self.headers, **journey.cookie_header()}
        record.sent_at_s = self.clock.now()
        try:
            async with self.http.request(self.method, self.url, data=data, headers=headers) as resp:
                record.joined_at_s = self.clock.now()
                record.http_status = resp.status
                timing = resp.headers.get("Server-Timing")
                if timing:
                    apply_server_timing(record, timing)
                if journey is not None:
                    journey.remember(resp)
                if resp.status >= 400:
                    await refuse(record, resp, self.clock)
                    return
                if is_stream(resp):
                    await read_stream(record, resp, self.clock)
                else:
                    record.bytes_received = len(await resp.read())
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"{self.method} {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        record.completed_at_s = self.clock.now()
        record.outcome = "ok"

    async def _send_lean(self, record: RequestRecord, data: bytes | None) -> None:
        """The same request through the lean HTTP/1.1 pool (qbench.run.protocols.http1)."""
        assert self.pool is not None
        now = self.clock.now
        try:
            exchange = await self.pool.send(self.head, data, record, now)
        except Http1Error as exc:
            fail(record, exc.kind, f"{self.method} {self.url}: {exc}", now())
            return
        if exchange.status >= 400:
            raw = bytes(exchange.error_body)
            kind = refusal_kind(exchange.status, raw)
            fail(record, kind, http_problem(self.method, self.url, exchange.status, raw), now())
            return
        record.completed_at_s = now()
        record.outcome = "ok"

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: the executor closes the connection by cancelling the request."""

    async def close(self) -> None:
        self._cache.clear()
        if self.pool is not None:
            self.pool.close()


def lean_pool(url: str, scenario: Scenario) -> Http1Pool | None:
    """The lean pool for http://; None (aiohttp) for https://, `auth:`, or QBENCH_HTTP_CLIENT=aiohttp."""
    if not url.startswith("http://") or os.environ.get("QBENCH_HTTP_CLIENT", "lean") == "aiohttp":
        return None
    if scenario.auth.is_set:  # credentials and re-login live in the aiohttp session's middleware
        return None
    return Http1Pool(url, scenario.load.max_connections, scenario.load.connect_timeout)


def refusal_kind(status: int, body: bytes) -> str:
    """http_4xx / http_5xx, or queue_full for a 503 whose body says the queue is full."""
    text = body.decode(errors="replace").lower()
    if status == 503 and "queue" in text and "full" in text:
        return "queue_full"
    return status_kind(status)




def is_stream(resp: aiohttp.ClientResponse) -> bool:
    """An event stream, or a chunked body without a length: read it as it arrives."""
    if resp.content_type == "text/event-stream":
        return True
    return resp.content_length is None and resp.headers.get("Transfer-Encoding", "").lower() == "chunked"


async def refuse(record: RequestRecord, resp: aiohttp.ClientResponse, clock: Clock) -> None:
    """Close a record refused with a 4xx/5xx status, its message from the start of the body."""
    raw = await resp.content.read(ERROR_BODY_LIMIT)
    record.bytes_received = len(raw)
    kind = refusal_kind(resp.status, raw)
    fail(record, kind, http_problem(resp.method, str(resp.url), resp.status, raw), clock.now())


async def read_stream(record: RequestRecord, resp: aiohttp.ClientResponse, clock: Clock) -> None:
    """Read a streamed body to its end: first output time, outputs (SSE events or HTTP chunks), bytes."""
    sse = resp.content_type == "text/event-stream"
    tail = b""
    async for chunk, end_of_chunk in resp.content.iter_chunks():
        if not chunk:
            continue
        if record.first_output_at_s is None:
            record.first_output_at_s = clock.now()
        record.bytes_received += len(chunk)
        if sse:
            tail += chunk
            events = tail.replace(b"\r\n", b"\n").split(b"\n\n")
            tail = events.pop()
            record.outputs += sum(1 for e in events if e.strip())
        elif end_of_chunk:
            record.outputs += 1
    if sse and tail.strip():
        record.outputs += 1


def render(template: Any, inputs: list[Any]) -> Any:
    """Fill "$<i>" strings of a JSON template with input values (files as base64)."""
    if template is None:
        return _wire(inputs[0]) if len(inputs) == 1 else [_wire(v) for v in inputs]
    if isinstance(template, dict):
        return {k: render(v, inputs) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, inputs) for v in template]
    if isinstance(template, str) and template.startswith("$") and template[1:].isdigit():
        index = int(template[1:])
        if index >= len(inputs):
            raise TargetError(f"endpoint.body: '{template}' but the payload has {len(inputs)} input(s)")
        return _wire(inputs[index])
    return template


def _wire(value: Any) -> Any:
    if isinstance(value, FileValue):
        return base64.b64encode(value.data).decode()
    return value
