"""The `ws` family (Gradio 3.x): one websocket per request at `<api>/queue/join`."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from qbench.run.protocols.base import Clock, fail, status_kind
from qbench.run.protocols.gradio_wire import (
    Background,
    GradioApp,
    apply_message,
    new_session_hash,
    pick_session,
    post_quietly,
)
from qbench.run.records.schema import RequestRecord


class WebSocketWire:
    def __init__(self, app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int) -> None:
        self.app, self.http, self.clock = app, http, clock
        self.url = "ws" + app.api.removeprefix("http") + "/queue/join"  # http -> ws, https -> wss
        self.pool = [new_session_hash() for _ in range(pool)]
        self.background = Background()

    def session_hash(self, record: RequestRecord, slot: int) -> str:
        return pick_session(record, slot, self.pool)

    async def send(self, record: RequestRecord, data: list[Any], slot: int) -> None:
        record.session_id = self.session_hash(record, slot)
        hash_ = {"fn_index": self.app.fn_index, "session_hash": record.session_id}
        try:
            async with self.http.ws_connect(self.url, max_msg_size=0, autoping=True) as ws:
                record.http_status = 101
                async for frame in ws:
                    if frame.type != aiohttp.WSMsgType.TEXT:
                        continue
                    if await self._message(record, ws, frame.data, hash_, data):
                        return
                close = ws.close_code
        except aiohttp.WSServerHandshakeError as exc:
            record.http_status = exc.status
            message = f"GET {self.url} (websocket): HTTP {exc.status}: {exc.message}"
            fail(record, status_kind(exc.status), message, self.clock.now())
            return
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.http_status is None else "stream_broken"
            fail(record, kind, f"{self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        message = f"{self.url}: the websocket closed (code {close}) before process_completed"
        fail(record, "stream_broken", message, self.clock.now())

    async def _message(
        self,
        record: RequestRecord,
        ws: aiohttp.ClientWebSocketResponse,
        text: str,
        hash_: dict[str, Any],
        data: list[Any],
    ) -> bool:
        """Handle one server message; True when it is terminal for the request."""
        at = self.clock.now()
        msg = orjson.loads(text)
        kind = msg.get("msg") if isinstance(msg, dict) else None
        if kind == "send_hash":
            record.bytes_received += len(text)
            await self._send(record, ws, hash_)
            return False
        if record.joined_at_s is None:
            record.joined_at_s = at
        if kind == "send_data":
            record.bytes_received += len(text)
            await self._send(record, ws, {"data": data, "event_data": self.app.event_data, **hash_})
            return False
        return apply_message(record, msg, len(text), at)

    async def _send(self, record: RequestRecord, ws: aiohttp.ClientWebSocketResponse, body: Any) -> None:
        raw = orjson.dumps(body).decode()
        record.bytes_sent += len(raw)
        await ws.send_str(raw)

    def abandon(self, record: RequestRecord) -> None:
        if record.started_at_s is not None:
            body = {"session_hash": record.session_id, "fn_index": self.app.fn_index}
            self.background.spawn(post_quietly(self.http, self.app.base + "/reset", body))

    async def close(self) -> None:
        self.background.cancel_all()
