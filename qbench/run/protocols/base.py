"""The interface every wire protocol implements (`WireProtocol`: one scheduled request -> wire traffic and a
filled record), and what they share: the run's HTTP session and clock, a journey's state, failing a record."""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections import deque
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import Load

JSON_HEADERS = {"Content-Type": "application/json"}


def upload_tag(request_id: int) -> str:
    """The `session_hash` header of a request's uploads (qbench.run.results.server_phases joins by it)."""
    return f"qbench-{request_id}"


@dataclass
class SessionState:
    """What one user's journey keeps between requests: its session, cookies, conversation, side tasks."""

    session_hash: str
    cookies: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    background: list[asyncio.Task[None]] = field(default_factory=list)  # ended with the journey

    def end(self) -> None:
        """The journey is over: what ran beside it (a page's heartbeat stream) stops."""
        for task in self.background:
            task.cancel()
        self.background.clear()

    def cookie_header(self) -> dict[str, str]:
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}

    def remember(self, resp: aiohttp.ClientResponse) -> None:
        for name, morsel in resp.cookies.items():
            self.cookies[name] = morsel.value


#: The journey of the request being sent (set by the load generator in the journey's task); None for
#: requests outside a journey, which get a session of their own (or one of the pool's).
JOURNEY: ContextVar[SessionState | None] = ContextVar("qbench_journey", default=None)


class WireProtocol(Protocol):
    """One scenario's endpoint on one target, over one aiohttp session."""

    endpoint_label: str  # what goes in RequestRecord.endpoint

    async def discover(self) -> dict[str, Any]:
        """Check the target serves the endpoint; return a snapshot for run.json. Raises TargetError."""
        ...

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        """Send one request and fill `record` (never raises for per-request failures)."""
        ...

    def abandon(self, record: RequestRecord) -> None:
        """The executor gave up on `record` (timeout): release it and cancel it on the server if possible."""
        ...

    async def close(self) -> None: ...


class RecentFirstConnector(aiohttp.TCPConnector):
    """aiohttp's pool, handing out the connection released last first (a stack, as aiohttp < 3.10 did)."""

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        conns = self._conns.get(key)
        if isinstance(conns, deque) and conns and conns[-1][0] is protocol and _takes_oldest():
            conns.rotate(1)  # to the front, where `_get` takes from


@functools.cache
def _takes_oldest() -> bool:
    """Whether this aiohttp's pool hands out from the front of its deque (the oldest first)."""
    try:
        return "popleft()" in inspect.getsource(aiohttp.BaseConnector._get)
    except (AttributeError, OSError, TypeError):
        return False



def make_http_session(
    load: Load, middlewares: Sequence[aiohttp.ClientMiddlewareType] = (), *, cookies: bool = True
) -> aiohttp.ClientSession:
    """An aiohttp session with the scenario's limits (no total or read timeout; `load.max_connections`, 0:
    unlimited; no decompression); `middlewares`: the run's credentials; `cookies=False`: no shared jar."""
    connector = RecentFirstConnector(limit=load.max_connections, limit_per_host=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, connect=load.connect_timeout, sock_read=None)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        json_serialize=lambda obj: orjson.dumps(obj).decode(),
        read_bufsize=2**21,
        auto_decompress=False,
        raise_for_status=False,
        middlewares=tuple(middlewares),
        cookie_jar=None if cookies else aiohttp.DummyCookieJar(),
    )


class Clock:
    """The run's one monotonic clock: seconds since run start (time.perf_counter based)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def restart(self) -> None:
        self.t0 = time.perf_counter()


def fail(record: RequestRecord, kind: str, message: str, at: float) -> None:
    """Close a record as failed, unless it is already closed (the first verdict wins)."""
    if record.completed_at_s is not None:
        return
    record.outcome = "error"
    record.error_kind = kind
    record.error_message = message  # masked and cut by the load generator (LoadGenerator._finish)
    record.completed_at_s = at


def status_kind(status: int) -> str:
    return "http_4xx" if 400 <= status < 500 else "http_5xx"


def http_problem(method: str, url: str, status: int, body: bytes) -> str:
    """The error message for an HTTP refusal: what was called, the status, the start of the body."""
    excerpt = body.decode(errors="replace").strip().replace("\n", " ")[:200]
    return f"{method} {url}: HTTP {status}: {excerpt or '(empty body)'}"


def fail_http(record: RequestRecord, method: str, url: str, status: int, body: bytes, at: float) -> None:
    """Close `record` as refused: http_4xx / http_5xx with `http_problem`'s message."""
    record.http_status = status
    fail(record, status_kind(status), http_problem(method, url, status, body), at)
