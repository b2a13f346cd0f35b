"""The `sse` family (Gradio 4.0-4.8): `GET <api>/queue/join` is each request's own stream, inputs by POST."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from qbench.run.protocols.base import JSON_HEADERS, Clock, fail, fail_http
from qbench.run.protocols.gradio_wire import (
    Background,
    GradioApp,
    apply_message,
    new_session_hash,
    pick_session,
    post_quietly,
    sse_messages,
)
from qbench.run.records.schema import RequestRecord


class JoinStreamWire:
    def __init__(self, app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int) -> None:
        self.app, self.http, self.clock = app, http, clock
        self.pool = [new_session_hash() for _ in range(pool)]
        self.background = Background()

    def session_hash(self, record: RequestRecord, slot: int) -> str:
        return pick_session(record, slot, self.pool)

    async def send(self, record: RequestRecord, data: list[Any], slot: int) -> None:
        record.session_id = self.session_hash(record, slot)
        url = self.app.api + "/queue/join"
        params = {"fn_index": str(self.app.fn_index), "session_hash": record.session_id}
        try:
            async with self.http.get(url, params=params) as resp:
                record.http_status = resp.status
                if resp.status != 200:
                    fail_http(record, "GET", url, resp.status, await resp.read(), self.clock.now())
                    return
                record.joined_at_s = self.clock.now()
                async for msg, nbytes, at in sse_messages(resp, self.clock):
                    if msg.get("msg") == "send_data":
                        record.bytes_received += nbytes
                        record.event_id = str(msg.get("event_id"))
                        if not await self._send_data(record, data):
                            return
                    elif apply_message(record, msg, nbytes, at):
                        return
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"GET {url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        message = f"GET {url}: the stream ended before process_completed"
        fail(record, "stream_broken", message, self.clock.now())

    async def _send_data(self, record: RequestRecord, data: list[Any]) -> bool:
        url = self.app.api + "/queue/data"
        body = orjson.dumps(
            {
                "data": data,
                "event_data": self.app.event_data,
                "fn_index": self.app.fn_index,
                "session_hash": record.session_id,
                "event_id": record.event_id,
            }
        )
        record.bytes_sent += len(body)
        async with self.http.post(url, data=body, headers=JSON_HEADERS) as resp:
            raw = await resp.read()
            if resp.status == 200:
                return True
            fail_http(record, "POST", url, resp.status, raw, self.clock.now())
            return False

    def abandon(self, record: RequestRecord) -> None:
        if record.event_id is not None:
            body = {"event_id": record.event_id}
            self.background.spawn(post_quietly(self.http, self.app.api + "/reset", body))

    async def close(self) -> None:
        self.background.cancel_all()
