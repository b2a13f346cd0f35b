"""The plain HTTP front: `POST /predict/{api_name}`, one request -> one JSON answer.

The "pipeline for a webserver" pattern of transformers' docs, as a mode of the same server: each
request is an event in the shared queue, so a function's batching (`batch`, `max_batch_size`,
`batch_wait_ms`: the deadline to fill a batch) and concurrency limits apply, and `queue.max_size`
bounds the waiting requests: past it the answer is 503 with Retry-After.

The body follows the function's inputs: with one text input, the raw body as text (any content
type but JSON); with one image or audio input, the raw file bytes; otherwise (or for any function)
JSON: `{"inputs": value}` for one input, `{"data": [...]}` for several, or a bare JSON value. The
answer is the output (one output) or the list of outputs, as JSON; a bad input is 422 with the
reason, a failing function 500, a body over `max_file_size` 413. Each answer has its queue wait and
service on the server's clock in a `Server-Timing: queue;dur=..., service;dur=...` header (ms).
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reference_server.http.gradio_routes import JSONResponse, state_of
from reference_server.http.server_state import ServerState
from reference_server.queue.jobs import INPUT_ERROR_TITLE
from reference_server.queue.queue import QueueFullError
from reference_server.queue.runtime import Event, FunctionRuntime

RETRY_AFTER_S = "1"
FILE_KINDS = ("image", "audio")


def _error(status: int, message: str) -> Response:
    headers = {"Retry-After": RETRY_AFTER_S} if status == 503 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def inputs_of(fn: FunctionRuntime, body: bytes, content_type: str) -> list[Any] | str:
    """The event's data for this body, or the reason it cannot be (a string)."""
    kinds = [c.type for c in fn.workload.inputs]
    if len(kinds) == 1 and kinds[0] in FILE_KINDS and "json" not in content_type:
        kind = content_type or "application/octet-stream"
        url = f"data:{kind};base64,{base64.b64encode(body).decode()}"
        return [{"path": url, "meta": {"_type": "gradio.FileData"}}]
    if len(kinds) == 1 and kinds[0] == "text" and "json" not in content_type:
        try:
            return [body.decode()]
        except UnicodeDecodeError:
            return "the body is not UTF-8 text"
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return f"the body is not valid JSON: {exc}"
    if isinstance(value, dict) and "data" in value:
        data = value["data"]
    elif isinstance(value, dict) and "inputs" in value:
        data = [value["inputs"]]
    else:
        data = [value]
    if not isinstance(data, list) or len(data) != len(kinds):
        return f"function {fn.name!r} takes {len(kinds)} input(s): send {{'data': [...]}}, one value each"
    return data


async def predict(request: Request) -> Response:
    state = state_of(request)
    fn = next((f for f in state.functions if f.name == request.path_params["api_name"]), None)
    if fn is None:
        names = ", ".join(f.name for f in state.functions)
        return _error(404, f"no function {request.path_params['api_name']!r}; served: {names}")
    body = await bounded_body(request, state.settings.max_file_size)
    if isinstance(body, Response):
        return body
    data = inputs_of(fn, body, request.headers.get("content-type", "").split(";")[0].strip())
    if isinstance(data, str):
        return _error(422, data)
    return await run_queued(state, fn, data)


async def bounded_body(request: Request, limit: int | None) -> bytes | Response:
    """The request body, or a 413 naming the limit once it passes `max_file_size` bytes (declared or read:
    a client that lies about Content-Length, or sends chunks, is cut off as soon as it goes over)."""
    if limit is None:
        return await request.body()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _error(413, f"the body is {declared} bytes; max_file_size is {limit}")
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _error(413, f"the body passed max_file_size ({limit} bytes)")
        parts.append(chunk)
    return b"".join(parts)


async def run_queued(state: ServerState, fn: FunctionRuntime, data: list[Any]) -> Response:
    """Push one event through the queue and answer with its result (a generator: its last output)."""
    session = f"http-{uuid.uuid4().hex}"
    mailbox = state.queue.sessions.open(session).queue
    try:
        event = state.queue.push(session, fn, data, simple_format=True)
    except QueueFullError as exc:
        state.queue.sessions.drop(session)
        return _error(503, str(exc))
    try:
        while True:
            msg = await mailbox.get()
            if msg["msg"] == "process_completed":
                break
            if msg["msg"] in ("unexpected_error", "cancelled"):
                return _error(500, str(msg.get("message") or msg["msg"]))
    finally:
        state.queue.disconnect(session)  # a client gone before its turn leaves the queue
    output = msg["output"] or {}
    if not msg["success"]:
        status = 422 if msg.get("title") == INPUT_ERROR_TITLE else 500
        return _error(status, str(output.get("error") or "the function failed"))
    values = output.get("data") or []
    return JSONResponse(values[0] if len(values) == 1 else values, headers=server_timing(event))


def server_timing(event: Event) -> dict[str, str]:
    """The event's queue wait and service on the server's clock, as a Server-Timing header (ms): joined ->
    its job started (a batch's deadline included), started -> now."""
    job = event.job
    if job is None:
        return {}
    now = time.perf_counter()
    queued, served = (job.started_at - event.joined_at) * 1000, (now - job.started_at) * 1000
    return {"Server-Timing": f"queue;dur={queued:.3f}, service;dur={served:.3f}"}


ROUTES = [Route("/predict/{api_name}", predict, methods=["POST"])]
