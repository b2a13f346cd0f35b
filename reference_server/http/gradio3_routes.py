"""The routes of each emulated Gradio release (`gradio: 3 | 4 | 5 | 6`), and Gradio 3.x's own.

    gradio 5, 6   gradio_routes.ROUTES: sse_v3 under /gradio_api (/config at the root)
    gradio 4      the same handlers at the root (Gradio 4.44: no /gradio_api)
    gradio 3      Gradio 3.50: the websocket queue at the root, `WS /queue/join`, plus /config, /info,
                  /queue/status, /reset, /upload and /file=

One websocket per event (reference_server.queue.gradio3 has the messages):

    server {"msg": "send_hash"}          client {"fn_index", "session_hash"}
    server estimation | queue_full (then close)
    server {"msg": "send_data"}          client {"data", "event_data", "fn_index", "session_hash"}
    server process_starts, process_generating..., process_completed, then close (code 1000)

Sessions: a 3.x client may run several events under one session_hash at once, each on its own socket,
so each socket gets its own internal session (`<session_hash>:<socket id>`). `POST /reset
{session_hash, fn_index}` stops that session's running generators of fn_index (Gradio 3.50 resets the
iterator instead, which restarts a running generator from its first value); a plain function runs to
its end, as in Gradio. A client that leaves drops its waiting event; its running job finishes unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from reference_server.http import gradio_routes
from reference_server.http.api_config import API_PREFIX
from reference_server.http.gradio_routes import ClientError, JSONResponse, json_body, state_of
from reference_server.http.server_state import ServerState
from reference_server.queue import gradio3
from reference_server.queue.queue import QueueFullError
from reference_server.queue.runtime import Event
from reference_server.queue.sessions import DISCONNECTED, Session

HASH_TIMEOUT_S = 5.0  # Gradio 3.x waits this long for the session hash


async def queue_join(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.server
    await ws.accept()
    try:
        await ws.send_json({"msg": "send_hash"})
        hash_ = await asyncio.wait_for(ws.receive_json(), HASH_TIMEOUT_S)
    except (asyncio.TimeoutError, WebSocketDisconnect, ValueError):
        return
    problem, event = _join(state, hash_)
    if event is None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await ws.send_json(problem)
            await ws.close(1000)
        return
    await _follow(state, ws, event)


def _join(state: ServerState, hash_: Any) -> tuple[dict[str, Any], Event | None]:
    """Queue the event the hash names: (message to send and close with, None) when that fails."""
    fn_index = hash_.get("fn_index") if isinstance(hash_, dict) else None
    session_hash = hash_.get("session_hash") if isinstance(hash_, dict) else None
    n = len(state.functions)
    if isinstance(fn_index, bool) or not isinstance(fn_index, int) or not 0 <= fn_index < n:
        error = f"unknown fn_index {fn_index!r}: this server has fn_index 0..{n - 1}"
        return {"msg": "process_completed", "output": {"error": error}, "success": False}, None
    if not isinstance(session_hash, str) or not session_hash:
        error = "'session_hash' must be a non-empty string"
        return {"msg": "process_completed", "output": {"error": error}, "success": False}, None
    try:
        session = f"{session_hash}:{uuid.uuid4().hex[:12]}"
        event = state.queue.push(session, state.functions[fn_index], [], True)
    except QueueFullError:
        return {"msg": "queue_full"}, None
    event.data_waiter = asyncio.get_running_loop().create_future()
    return {}, event


async def _follow(state: ServerState, ws: WebSocket, event: Event) -> None:
    """Forward the event's messages (3.x-shaped) until process_completed; feed the client's data in."""
    session = state.queue.sessions.get(event.session)
    if session is None:  # cannot happen right after push; kept for the type checker
        return
    reader = asyncio.create_task(_read(ws, event, session))
    completed = False
    try:
        completed = await _pump(ws, event, session)
        if completed:
            await ws.close(1000)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    finally:
        reader.cancel()
        if event.data_waiter is not None and not event.data_waiter.done():
            event.data_waiter.cancel()
        if completed:
            state.queue.sessions.drop(event.session)
        else:
            state.queue.disconnect(event.session)


async def _pump(ws: WebSocket, event: Event, session: Session) -> bool:
    """True after sending process_completed, False when the client left first."""
    generator, last = event.fn.workload.is_generator, None
    while True:
        msg = await session.queue.get()
        if msg is DISCONNECTED:
            return False
        out = gradio3.message(msg, generator, last)
        if out is None:
            continue
        if out["msg"] == "process_generating":
            last = out["output"]
        await ws.send_json(out)
        if out["msg"] == "process_completed":
            return True


async def _read(ws: WebSocket, event: Event, session: Session) -> None:
    """The client's data (the answer to send_data); a disconnect wakes the pump."""
    try:
        while True:
            try:
                body = await ws.receive_json()
            except ValueError:  # not JSON: ignored, as the data it should have been never comes
                continue
            waiter = event.data_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(body.get("data") if isinstance(body, dict) else None)
    except (WebSocketDisconnect, RuntimeError):
        session.queue.put_nowait(DISCONNECTED)


async def reset(request: Request) -> Response:
    """`POST /reset {session_hash, fn_index}`: stop the session's running generators of fn_index."""
    body = await json_body(request)
    if "session_hash" not in body or "fn_index" not in body:
        raise ClientError(422, "reset needs session_hash and fn_index")
    queue = state_of(request).queue
    prefix = f"{body['session_hash']}:"
    hits = [e for e in list(queue.events.values())
            if e.session.startswith(prefix) and e.fn.index == body["fn_index"] and e.job is not None
            and e.fn.workload.is_generator]
    for event in hits:
        queue.cancel(event.session, event.id)
    return JSONResponse({"success": bool(hits)})


async def queue_status(request: Request) -> Response:
    queue = state_of(request).queue
    return JSONResponse(queue.stats3.estimation(None, queue.waiting_count, None))


ROUTES3: list[BaseRoute] = [
    Route("/config", gradio_routes.config, methods=["GET"]),
    Route("/config/", gradio_routes.config, methods=["GET"]),
    Route("/info", gradio_routes.info, methods=["GET"]),
    WebSocketRoute("/queue/join", queue_join),
    Route("/queue/status", queue_status, methods=["GET"]),
    Route("/reset", reset, methods=["POST"]),
    Route("/upload", gradio_routes.upload, methods=["POST"]),
    Route("/file={path:path}", gradio_routes.file, methods=["GET", "HEAD"]),
]


def routes_for(gradio: int) -> list[BaseRoute]:
    """The Gradio routes of the release `gradio` emulates (module docstring)."""
    if gradio == 3:
        return ROUTES3
    if gradio == 4:
        return [Route(r.path.removeprefix(API_PREFIX), r.endpoint, methods=list(r.methods or ()))
                for r in gradio_routes.ROUTES if isinstance(r, Route)]
    return list(gradio_routes.ROUTES)
