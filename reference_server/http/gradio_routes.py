"""Gradio's HTTP API under /gradio_api (plus /config): handlers only validate, admit and stream.

Client mistakes get a 4xx with a clear `detail` (Gradio answers 500 to an unknown fn_index, and
/run/ answers 500 to a wrong-typed input; this server answers 422), and never disturb other requests.
Uploaded files are stored as `uploads/<hex>/<name>` with Gradio's name sanitising (components.upload_name).
"""

from __future__ import annotations

import mimetypes
import time
import uuid
from typing import Any

import anyio.to_thread
import orjson
from starlette.datastructures import QueryParams, UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from reference_server.http.api_config import build_info
from reference_server.http.front_ends import PARSED_UPLOAD, header_value
from reference_server.http.server_state import ServerState
from reference_server.io import uploads
from reference_server.io.decode_pool import Failed, UploadPart, parse_upload
from reference_server.queue import messages as m
from reference_server.queue.jobs import INPUT_ERROR_TITLE
from reference_server.queue.queue import QueueFullError
from reference_server.queue.runtime import Event, FunctionRuntime, Job
from reference_server.queue.sessions import Session
from reference_server.queue.streams import CallStream, HeartbeatStream, QueueDataStream

MULTIPART_OVERHEAD = 64 * 1024  # headers and boundaries a multipart body may add to a file


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ClientError(Exception):
    """A 4xx answer: raised by the helpers below, turned into `{"detail": ...}` by the app."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


async def json_body(request: Request) -> dict[str, Any]:
    return json_object(await request.body())


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientError(422, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ClientError(422, f"request body must be a JSON object, got {type(body).__name__}")
    return body


def _function(state: ServerState, fn_index: Any) -> FunctionRuntime:
    if fn_index is None:
        raise ClientError(400, "No function index provided.")
    n = len(state.functions)
    if isinstance(fn_index, bool) or not isinstance(fn_index, int) or not 0 <= fn_index < n:
        raise ClientError(422, f"unknown fn_index {fn_index!r}: this server has fn_index 0..{n - 1}")
    return state.functions[fn_index]


def _by_api_name(state: ServerState, api_name: str) -> FunctionRuntime:
    for fn in state.functions:
        if fn.name == api_name:
            return fn
    names = ", ".join(f.name for f in state.functions)
    raise ClientError(404, f"unknown api_name {api_name!r}; this server has: {names}")


def _check_data(fn: FunctionRuntime, data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise ClientError(422, f"'data' must be a list with one value per input, got {type(data).__name__}")
    expected = len(fn.workload.inputs)
    if len(data) != expected:
        raise ClientError(422, f"function {fn.name!r} takes {expected} input(s), got {len(data)} in 'data'")
    return data


def _admit(state: ServerState, session: str, fn: FunctionRuntime, data: list[Any], simple: bool,
           event_id: str | None = None, owner: str | None = None) -> str:
    try:
        return state.queue.push(session, fn, data, simple, event_id, owner).id
    except QueueFullError as exc:
        raise ClientError(503, str(exc)) from None


async def queue_join(request: Request) -> Response:
    return JSONResponse(join(state_of(request), await request.body()))


def join(state: ServerState, raw: bytes) -> dict[str, str]:
    """`/queue/join`'s answer to a raw body (or a ClientError)."""
    body = json_object(raw)
    if "data" not in body:
        raise ClientError(422, [{"type": "missing", "loc": ["body", "data"], "msg": "Field required"}])
    session = body.get("session_hash")
    if session is None:
        raise ClientError(400, "Session hash not found.")
    if not isinstance(session, str) or not session:
        raise ClientError(422, "'session_hash' must be a non-empty string")
    fn = _function(state, body.get("fn_index"))
    data = _check_data(fn, body["data"])
    return {"event_id": _admit(state, session, fn, data, bool(body.get("simple_format")))}


async def queue_data(request: Request) -> Response:
    session = request.query_params.get("session_hash")
    if not session:
        raise ClientError(400, "missing query parameter 'session_hash'")
    state = state_of(request)
    return QueueDataStream(state.queue, session, state.settings.heartbeat_interval_s)


async def cancel(request: Request) -> Response:
    body = await json_body(request)
    missing = [k for k in ("session_hash", "fn_index", "event_id") if k not in body]
    if missing:
        detail = f"cancel needs session_hash, fn_index and event_id; missing: {', '.join(missing)}"
        raise ClientError(422, detail)
    state_of(request).queue.cancel(str(body["session_hash"]), str(body["event_id"]))
    return JSONResponse({"success": True})


async def reset(request: Request) -> Response:
    return JSONResponse({"success": True})


async def queue_status(request: Request) -> Response:
    return JSONResponse(m.estimation(None, None, state_of(request).queue.waiting_count, None))


async def heartbeat(request: Request) -> Response:
    return HeartbeatStream(state_of(request).settings.heartbeat_interval_s)


async def config(request: Request) -> Response:
    state = state_of(request)
    root = str(request.base_url).rstrip("/")
    return JSONResponse({**state.config, "root": root})


async def info(request: Request) -> Response:
    all_endpoints = bool(request.query_params.get("all_endpoints"))
    return JSONResponse(build_info(state_of(request).functions, all_endpoints))


async def call_post(request: Request) -> Response:
    state = state_of(request)
    fn = _by_api_name(state, request.path_params["api_name"])
    body = await json_body(request)
    data = _check_data(fn, body.get("data"))
    event_id = uuid.uuid4().hex
    # Each /call event streams from a mailbox of its own, keyed by its id: with the client's session_hash
    # as the key, an event that finished before its GET was looked up under the wrong key (the session
    # stayed behind for good), and two calls sharing a hash read each other's messages. The hash is kept
    # as the event's owner, so a /cancel naming it still matches.
    owner = body.get("session_hash")
    owner = str(owner) if owner else None
    return JSONResponse({"event_id": _admit(state, event_id, fn, data, True, event_id, owner)})


async def call_get(request: Request) -> Response:
    state = state_of(request)
    _by_api_name(state, request.path_params["api_name"])
    event_id = request.path_params["event_id"]
    return CallStream(state.queue, event_id, event_id, state.settings.heartbeat_interval_s)


async def run_direct(request: Request) -> Response:
    """`POST /gradio_api/run/{api_name}`: call the function now, outside the queue (plain HTTP).

    Like Gradio it bypasses concurrency limits and max_size; unlike Gradio, a generator returns its
    final value (Gradio returns the first one).
    """
    state = state_of(request)
    body = await json_body(request)
    fn_index = body.get("fn_index")
    api_name = request.path_params["api_name"]
    fn = _function(state, fn_index) if fn_index is not None else _by_api_name(state, api_name)
    event = Event(uuid.uuid4().hex, f"run-{uuid.uuid4().hex}", fn, _check_data(fn, body.get("data")), True)
    session = state.queue.sessions.open(event.session)
    try:
        job = Job([event], fn)
        await (state.queue.runner.stream(job) if fn.workload.is_generator else state.queue.runner.run(job))
        done = [msg for msg in drain(session) if msg["msg"] == "process_completed"][-1]
    finally:
        state.queue.sessions.drop(event.session)
    if done["success"]:
        return JSONResponse(done["output"])
    # An input the function cannot take (wrong type, unreadable file) is the client's mistake: 422 with
    # the reason (Gradio answers 500 to every failure here); a failing workload stays a 500.
    return JSONResponse(done["output"], status_code=422 if done["title"] == INPUT_ERROR_TITLE else 500)


def drain(session: Session) -> list[m.Message]:
    out = []
    while not session.queue.empty():
        out.append(session.queue.get_nowait())
    return out


async def upload(request: Request) -> Response:
    """Uploads are parsed and written in a worker thread (reference_server.io.uploads says why)."""
    state = state_of(request)
    start = time.perf_counter()
    limit = state.settings.max_file_size
    declared = int(request.headers.get("content-length") or 0)
    if limit is not None and declared > limit + MULTIPART_OVERHEAD:
        raise ClientError(413, f"upload of {declared} bytes exceeds max_file_size ({limit} bytes)")
    try:
        parsed = request.scope.get(PARSED_UPLOAD)  # by a front-end process (front_ends.py)
        if parsed is not None or 0 < declared <= uploads.IN_MEMORY_LIMIT:
            paths = await _upload_in_memory(request, state, limit, parsed)
        else:
            paths = await _upload_streamed(request, state, limit)
    except uploads.UploadError as exc:
        raise ClientError(exc.status, exc.detail) from None
    state.queue.traces.upload(request.headers.get("session_hash"), time.perf_counter() - start)
    return JSONResponse(paths)


async def _upload_in_memory(request: Request, state: ServerState, limit: int | None,
                            parsed: list[UploadPart] | Failed | None) -> list[str]:
    """A body of known size: parsed (and its images decoded) by a front end or a decode worker and kept
    in memory, else parsed and stored in a worker thread."""
    body = await request.body()
    kind = request.headers.get("content-type", "")
    if parsed is None and state.pool is None:
        return await anyio.to_thread.run_sync(uploads.save_uploads, body, kind, state.store, limit)
    if parsed is None:
        assert state.pool is not None
        parsed = await state.pool.run(parse_upload, body, kind, state.pool.upload_prep)
    return store_parsed(state, parsed, limit)


def store_parsed(state: ServerState, parsed: list[UploadPart] | Failed, limit: int | None) -> list[str]:
    """Keep a parsed upload's files (and their images decoded ahead) in the store; their paths."""
    if isinstance(parsed, Failed):
        raise uploads.UploadError(parsed.status, parsed.detail)
    paths = uploads.store_parts([(p.name, p.filename, p.data) for p in parsed], state.store, limit)
    for path, part in zip(paths, (p for p in parsed if p.name == "files"), strict=True):
        if part.decoded is not None:
            state.store.keep_decoded(path, part.decoded, part.decoded.array.nbytes)
    return paths


async def _upload_streamed(request: Request, state: ServerState, limit: int | None) -> list[str]:
    """A large (or unsized) body: starlette's streaming parser spools it to disk."""
    form = await request.form()
    paths = []
    for item in form.getlist("files"):
        if not isinstance(item, UploadFile):
            raise uploads.UploadError(422, "field 'files' must be a file upload")
        data = await item.read()
        store = uploads.store_file
        paths.append(await anyio.to_thread.run_sync(store, state.store, item.filename, data, limit))
    if not paths:
        raise uploads.UploadError(422, "no files in the multipart field 'files'")
    return paths


# ---------------------------------------------------------------- the hot routes, behind front ends
Answer = tuple[int, bytes]  # status, JSON body


def answer(status: int, content: Any) -> Answer:
    return status, orjson.dumps(content)


def fast_join(state: ServerState, scope: dict[str, Any], body: bytes) -> Answer | None:
    """`queue_join` for a request a front end forwarded, without Starlette's request and response."""
    try:
        return answer(200, join(state, body))
    except ClientError as exc:
        return answer(exc.status, {"detail": exc.detail})


def fast_upload(state: ServerState, scope: dict[str, Any], body: bytes) -> Answer | None:
    """`upload` for an upload a front end parsed (None for any other: `upload` takes it)."""
    parsed = scope.get(PARSED_UPLOAD)
    if parsed is None:
        return None
    start = time.perf_counter()
    limit = state.settings.max_file_size
    declared = int(header_value(scope, b"content-length") or 0)
    if limit is not None and declared > limit + MULTIPART_OVERHEAD:
        return answer(413, {"detail": f"upload of {declared} bytes exceeds max_file_size ({limit} bytes)"})
    try:
        paths = store_parsed(state, parsed, limit)
    except uploads.UploadError as exc:
        return answer(exc.status, {"detail": exc.detail})
    session = header_value(scope, b"session_hash")
    state.queue.traces.upload(None if session is None else session.decode("latin-1"),
                              time.perf_counter() - start)
    return answer(200, paths)


def fast_queue_data(state: ServerState, scope: dict[str, Any], body: bytes) -> Answer | QueueDataStream:
    """`queue_data` for a request a front end forwarded: the stream, run without a task by the core."""
    session = query_value(scope["query_string"], "session_hash")
    if not session:
        return answer(400, {"detail": "missing query parameter 'session_hash'"})
    return QueueDataStream(state.queue, session, state.settings.heartbeat_interval_s)


def query_value(query: bytes, name: str) -> str | None:
    """`request.query_params.get(name)` (the last value; Starlette's parsing) without building the
    whole QueryParams where nothing in the query is escaped (a stream's `session_hash=...`)."""
    if b"%" in query or b"+" in query:
        return QueryParams(query).get(name)
    found = None
    for pair in query.decode("latin-1").split("&"):
        key, _, value = pair.partition("=")
        if key == name:
            found = value
    return found


FAST = {queue_join: fast_join, upload: fast_upload, queue_data: fast_queue_data}  # endpoint -> forwarded form


async def file(request: Request) -> Response:
    store = state_of(request).store
    data = store.in_memory(request.path_params["path"])
    if data is not None:
        kind = mimetypes.guess_type(request.path_params["path"])[0] or "application/octet-stream"
        return Response(data, media_type=kind)
    path = store.resolve(request.path_params["path"])
    if path is None:
        raise ClientError(404, "file not found (only uploads and outputs of this server are served)")
    return FileResponse(path)


def _last_n(request: Request) -> int | None:
    raw = request.query_params.get("last_n")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ClientError(422, f"last_n must be an integer, got {raw!r:.40}") from None


async def profiling_traces(request: Request) -> Response:
    """Gradio's `/profiling/traces` (reference_server.observe.profiling): the last traces, oldest first."""
    content = state_of(request).queue.traces.get_all_json(_last_n(request))
    return Response(content, media_type="application/json")


async def profiling_summary(request: Request) -> Response:
    return JSONResponse(state_of(request).queue.traces.summary())


async def profiling_clear(request: Request) -> Response:
    state_of(request).queue.traces.clear()
    return JSONResponse({"status": "cleared"})


ROUTES = [
    Route("/config", config, methods=["GET"]),
    Route("/config/", config, methods=["GET"]),
    Route("/gradio_api/info", info, methods=["GET"]),
    Route("/gradio_api/queue/join", queue_join, methods=["POST"]),
    Route("/gradio_api/queue/data", queue_data, methods=["GET"]),
    Route("/gradio_api/queue/status", queue_status, methods=["GET"]),
    Route("/gradio_api/cancel", cancel, methods=["POST"]),
    Route("/gradio_api/reset", reset, methods=["POST"]),
    Route("/gradio_api/heartbeat/{session_hash}", heartbeat, methods=["GET"]),
    Route("/gradio_api/call/{api_name}", call_post, methods=["POST"]),
    Route("/gradio_api/call/{api_name}/{event_id}", call_get, methods=["GET"]),
    Route("/gradio_api/run/{api_name}", run_direct, methods=["POST"]),
    Route("/gradio_api/upload", upload, methods=["POST"]),
    Route("/gradio_api/file={path:path}", file, methods=["GET", "HEAD"]),
    Route("/gradio_api/profiling/traces", profiling_traces, methods=["GET"]),
    Route("/gradio_api/profiling/summary", profiling_summary, methods=["GET"]),
    Route("/gradio_api/profiling/clear", profiling_clear, methods=["POST"]),
]
