"""The `ws` family (Gradio 3.x; qbench.run.protocols.gradio_3x_ws) against a fake websocket: the URL,
the hash and data it sends when asked, how the join and the messages fill the record, a handshake
refusal, a socket closed early, and the /reset of a running generator on timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import aiohttp
import orjson
import pytest

from qbench.run.protocols import gradio_3x_ws
from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_3x_ws import WebSocketWire
from qbench.run.protocols.gradio_wire import GradioApp
from qbench.run.records.schema import RequestRecord


def app(api: str = "http://h:7860") -> GradioApp:
    return GradioApp(base=api, api=api, family="ws", version=(3, 50, 2), fn_index=2,
                     event_data={"index": 0})


class Frame:
    def __init__(self, data: Any, kind: aiohttp.WSMsgType = aiohttp.WSMsgType.TEXT) -> None:
        self.type, self.data = kind, data if isinstance(data, str) else orjson.dumps(data).decode()


class FakeSocket:
    """Plays the server's messages; a message may wait for the client's answer to the previous one."""

    def __init__(self, frames: list[Frame], close_code: int = 1000) -> None:
        self.frames, self.sent, self.close_code = frames, list[Any](), close_code

    async def send_str(self, text: str) -> None:
        self.sent.append(orjson.loads(text))

    def __aiter__(self) -> AsyncIterator[Frame]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Frame]:
        for frame in self.frames:
            yield frame

    async def __aenter__(self) -> FakeSocket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    def __init__(self, socket: FakeSocket | Exception) -> None:
        self.socket, self.urls = socket, list[str]()

    def ws_connect(self, url: str, **kw: Any) -> FakeSocket:
        self.urls.append(url)
        if isinstance(self.socket, Exception):
            raise self.socket
        return self.socket


def record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="", endpoint="predict", warmup=False,
                         intended_at_s=0.0)


def send(wire_app: GradioApp, socket: FakeSocket | Exception) -> tuple[RequestRecord, FakeSession]:
    http = FakeSession(socket)
    session: Any = http
    wire = WebSocketWire(wire_app, session, Clock(), 0)
    r = record()
    asyncio.run(wire.send(r, ["hi"], slot=3))
    return r, http


@pytest.mark.parametrize(("api", "url"), [
    ("http://h:7860", "ws://h:7860/queue/join"), ("https://h/app", "wss://h/app/queue/join"),
])
def test_the_websocket_url(api: str, url: str) -> None:
    http: Any = None
    assert WebSocketWire(app(api), http, Clock(), 0).url == url


def test_a_whole_exchange_fills_the_record() -> None:
    socket = FakeSocket([
        Frame({"msg": "send_hash"}),
        Frame({"msg": "estimation", "rank": 1, "queue_size": 2, "rank_eta": 0.4}),
        Frame("binary", aiohttp.WSMsgType.BINARY),  # ignored
        Frame({"msg": "send_data"}),
        Frame({"msg": "process_starts"}),
        Frame({"msg": "process_generating", "output": {"data": ["h"]}}),
        Frame({"msg": "process_completed", "success": True, "output": {"data": ["hi"], "duration": 0.1}}),
        Frame({"msg": "never read"}),
    ])
    r, http = send(app(), socket)
    assert http.urls == ["ws://h:7860/queue/join"]
    hash_ = {"fn_index": 2, "session_hash": r.session_id}
    assert socket.sent == [hash_, {"data": ["hi"], "event_data": {"index": 0}, **hash_}]
    assert len(r.session_id) == 32 and r.http_status == 101
    assert r.outcome == "ok" and r.outputs == 1 and r.server_duration_s == 0.1 and r.rank == 1
    assert r.joined_at_s is not None and r.joined_at_s <= (r.estimation_at_s or 0)
    assert r.bytes_sent == sum(len(orjson.dumps(b)) for b in socket.sent)


def test_a_pool_slot_picks_its_session() -> None:
    http: Any = None
    wire = WebSocketWire(app(), http, Clock(), 2)
    socket = FakeSocket([Frame({"msg": "queue_full"})])
    r = record()
    wire.http = FakeSession(socket)  # type: ignore[assignment]
    asyncio.run(wire.send(r, [], slot=3))
    assert r.session_id == wire.pool[1] and r.error_kind == "queue_full" and r.joined_at_s is not None


def test_a_socket_closed_before_the_result_is_a_broken_stream() -> None:
    r, _ = send(app(), FakeSocket([Frame({"msg": "send_hash"})], close_code=1011))
    assert r.error_kind == "stream_broken"
    assert r.error_message == ("ws://h:7860/queue/join: the websocket closed (code 1011) "
                               "before process_completed")


def test_a_refused_handshake_keeps_its_status() -> None:
    refused = aiohttp.WSServerHandshakeError(None, (), status=403, message="Forbidden")  # type: ignore[arg-type]
    r, _ = send(app(), refused)
    assert (r.http_status, r.error_kind) == (403, "http_4xx")
    assert r.error_message == "GET ws://h:7860/queue/join (websocket): HTTP 403: Forbidden"


def test_no_connection_is_a_connect_error() -> None:
    r, _ = send(app(), aiohttp.ClientConnectionError("refused"))
    assert r.error_kind == "connect" and r.http_status is None
    assert r.error_message == "ws://h:7860/queue/join: ClientConnectionError: refused"


def test_abandon_resets_only_a_started_event(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, dict[str, Any]]] = []

    async def post(http: Any, url: str, body: dict[str, Any]) -> None:
        posted.append((url, body))

    monkeypatch.setattr(gradio_3x_ws, "post_quietly", post)

    async def run() -> None:
        http: Any = None
        wire = WebSocketWire(app(), http, Clock(), 0)
        queued, running = record(), record()
        queued.session_id, running.session_id, running.started_at_s = "q", "r", 1.0
        wire.abandon(queued)
        wire.abandon(running)
        await asyncio.sleep(0)
        await wire.close()

    asyncio.run(run())
    assert posted == [("http://h:7860/reset", {"session_hash": "r", "fn_index": 2})]


def test_close_cancels_pending_resets() -> None:
    async def run() -> bool:
        http: Any = None
        wire = WebSocketWire(app(), http, Clock(), 0)
        blocked = asyncio.Event()

        async def slow() -> None:
            await blocked.wait()

        coro: Coroutine[Any, Any, None] = slow()
        wire.background.spawn(coro)
        (task,) = wire.background._tasks
        await wire.close()
        await asyncio.gather(task, return_exceptions=True)
        return task.cancelled()

    assert asyncio.run(run())
