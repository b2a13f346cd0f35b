"""Gradio's queue protocol (sse_v3), as the official clients speak it.

Per request: upload file inputs (`POST /gradio_api/upload`, sent as FileData), `POST
/gradio_api/queue/join` -> event_id, then messages on the session's ONE SSE stream
(`GET /gradio_api/queue/data?session_hash=`), routed by event_id: estimation -> rank/ETA,
process_starts -> started, process_generating -> outputs, process_completed -> done. Heartbeats are
ignored, close_stream ends the stream (a later job in the session opens a new one), a 503 on join is
`queue_full`. On timeout the event is cancelled on the server (`POST /gradio_api/cancel`).

Sessions: `per_request` gives every request its own session_hash, and the request reads its stream
inline (no extra task). A pool of N sessions (browser tabs) shares one reader task per session.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.payloads import FileValue
from qbench.run.protocols.base import JSON_HEADERS, Clock, fail, status_kind
from qbench.run.protocols.sse import GradioSession, apply_message
from qbench.run.records import RequestRecord
from qbench.run.scenario import Scenario


class GradioProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        self.scenario = scenario
        self.base = target.rstrip("/")
        self.http = http
        self.clock = clock
        self.api = self.base + "/gradio_api"
        self.fn_index = -1
        self.input_slots: list[bool] = []  # per dependency input: True = an API input, False = State (null)
        self.endpoint_label = scenario.endpoint.api_name or f"fn_index={scenario.endpoint.fn_index}"
        pool = scenario.load.sessions
        self.pool: list[GradioSession] | None = None if pool == "per_request" else []
        self._pool_size = pool if isinstance(pool, int) else 0
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ discovery

    async def discover(self) -> dict[str, Any]:
        config = await self._get_json(self.base + "/config")
        protocol = str(config.get("protocol", ""))
        if not protocol.startswith("sse"):
            raise TargetError(f"{self.base}: Gradio protocol '{protocol}' is not supported (expected sse_v3)")
        self.api = self.base + str(config.get("api_prefix", "/gradio_api"))
        dep = self._find_dependency(config)
        self.fn_index = int(dep["id"])
        skip = {c["id"] for c in config.get("components", []) if c.get("skip_api")}
        self.input_slots = [cid not in skip for cid in dep.get("inputs", [])]
        wanted, given = sum(self.input_slots), len(self.scenario.payload.inputs)
        if wanted != given:
            raise TargetError(
                f"{self.base}: endpoint '{self.endpoint_label}' takes {wanted} input(s), "
                f"the scenario's payload.inputs has {given}"
            )
        info = await self._get_json(self.api + "/info", required=False)
        named = info.get("named_endpoints", {}) if isinstance(info, dict) else {}
        if self.pool is not None:
            self.pool = [self._new_session(shared=True) for _ in range(self._pool_size)]
        return {
            "config": config,
            "endpoint_info": named.get("/" + str(dep.get("api_name"))),
            "fn_index": self.fn_index,
        }

    def _find_dependency(self, config: dict[str, Any]) -> dict[str, Any]:
        ep = self.scenario.endpoint
        deps = [d for d in config.get("dependencies", []) if isinstance(d, dict)]
        for dep in deps:
            if ep.fn_index is not None and dep.get("id") == ep.fn_index:
                return dep
            if ep.api_name is not None and dep.get("api_name") == ep.api_name:
                return dep
        names = sorted(str(d["api_name"]) for d in deps if d.get("api_name"))
        raise TargetError(
            f"{self.base}: no endpoint '{self.endpoint_label}'; the server has: {', '.join(names)}"
        )

    async def _get_json(self, url: str, required: bool = True) -> Any:
        try:
            async with self.http.get(url) as resp:
                if resp.status != 200:
                    if not required:
                        return {}
                    raise TargetError(f"{url}: HTTP {resp.status}; is this a Gradio app?")
                return orjson.loads(await resp.read())
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if not required:
                return {}
            raise TargetError(f"{url}: cannot connect ({exc.__class__.__name__}: {exc})") from exc
        except orjson.JSONDecodeError as exc:
            raise TargetError(f"{url}: not JSON; is this a Gradio app?") from exc

    # ------------------------------------------------------------ one request

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        session = self._session(slot)
        record.session_id = session.hash
        record.sent_at_s = self.clock.now()
        try:
            data = await self._data(inputs, record)
            if data is None:
                return
            body = orjson.dumps({"data": data, "fn_index": self.fn_index, "session_hash": session.hash})
            record.bytes_sent += len(body)
            async with self.http.post(self.api + "/queue/join", data=body, headers=JSON_HEADERS) as resp:
                raw = await resp.read()
                record.http_status = resp.status
                record.bytes_received += len(raw)
        except (aiohttp.ClientError, OSError) as exc:
            fail(record, "connect", f"{exc.__class__.__name__}: {exc}", self.clock.now())
            return
        if record.http_status != 200:
            kind = "queue_full" if record.http_status == 503 else status_kind(record.http_status or 0)
            fail(record, kind, raw.decode(errors="replace"), self.clock.now())
            return
        record.joined_at_s = self.clock.now()
        record.event_id = str(orjson.loads(raw)["event_id"])
        await session.follow(record)

    async def _data(self, inputs: list[Any], record: RequestRecord) -> list[Any] | None:
        values = iter(inputs)
        data: list[Any] = []
        for is_api in self.input_slots:
            value = next(values) if is_api else None
            if isinstance(value, FileValue):
                value = await self._upload(value, record)
                if value is None:
                    return None
            data.append(value)
        return data

    async def _upload(self, file: FileValue, record: RequestRecord) -> dict[str, Any] | None:
        form = aiohttp.FormData()
        form.add_field("files", file.data, filename=file.name, content_type=file.mime)
        record.bytes_sent += len(file.data)
        async with self.http.post(self.api + "/upload", data=form) as resp:
            raw = await resp.read()
            if resp.status != 200:
                record.http_status = resp.status
                fail(
                    record,
                    status_kind(resp.status),
                    "upload: " + raw.decode(errors="replace"),
                    self.clock.now(),
                )
                return None
        path = orjson.loads(raw)[0]
        return {"path": path, "orig_name": file.name, "meta": {"_type": "gradio.FileData"}}

    def abandon(self, record: RequestRecord) -> None:
        """Timeout: forget the event locally and cancel it on the server (in the background)."""
        if record.event_id is None:
            return
        for session in self.pool or ():
            if session.hash == record.session_id:
                session.forget(record.event_id)
        self._spawn(self._cancel(record.session_id, record.event_id))

    async def _cancel(self, session_hash: str, event_id: str) -> None:
        body = orjson.dumps({"session_hash": session_hash, "fn_index": self.fn_index, "event_id": event_id})
        try:
            async with self.http.post(self.api + "/cancel", data=body, headers=JSON_HEADERS) as resp:
                await resp.read()
        except (aiohttp.ClientError, OSError):
            pass

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self.pool:
            for session in self.pool:
                await session.stop()

    # ------------------------------------------------------------ sessions

    def _new_session(self, shared: bool = False) -> GradioSession:
        url = self.api + "/queue/data"
        return GradioSession(uuid.uuid4().hex, self.http, url, self.clock, apply_message, shared=shared)

    def _session(self, slot: int) -> GradioSession:
        if self.pool is None:
            return self._new_session()
        return self.pool[slot % len(self.pool)]

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
