"""Plain HTTP request/response: method + path + JSON body template.

In the body template (scenario `endpoint.body`) a string "$0", "$1", ... is replaced by the generated
value of that input; file inputs (image, audio, files) become base64 strings. Phases: sent ->
joined (response headers) -> completed (body read). There is no queue to observe, so started_at_s
(and with it queue wait and service time) stays None.
"""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.payloads import FileValue
from qbench.run.protocols.base import Clock, fail, fail_http
from qbench.run.records import RequestRecord
from qbench.run.scenario import Scenario


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
        self.endpoint_label = f"{ep.method} {ep.path}"
        self._cache: dict[int, bytes] = {}

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
        """Serialised body for these inputs (cached per input list identity: payload variants repeat)."""
        if self.template is None and self.method == "GET":
            return None
        key = id(inputs)
        cached = self._cache.get(key)
        if cached is None:
            cached = orjson.dumps(render(self.template, inputs))
            self._cache[key] = cached
        return cached

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        data = self.body(inputs)
        record.bytes_sent = len(data) if data else 0
        record.sent_at_s = self.clock.now()
        try:
            async with self.http.request(self.method, self.url, data=data, headers=self.headers) as resp:
                record.joined_at_s = self.clock.now()
                record.http_status = resp.status
                raw = await resp.read()
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"{self.method} {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        record.bytes_received = len(raw)
        if resp.status >= 400:
            fail_http(record, self.method, self.url, resp.status, raw, self.clock.now())
            return
        record.completed_at_s = self.clock.now()
        record.outcome = "ok"

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: the executor closes the connection by cancelling the request."""

    async def close(self) -> None:
        self._cache.clear()


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
