"""HTTP front-end processes before the one queue (reference_server.http.front_ends, `launch.front_ends`)."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import psutil
import pytest
from gradio_client import Client, handle_file

from qbench.tune.servers.server_process import ServerHandle, reference_server_process
from reference_server.http import gradio_routes
from reference_server.http.app import build_app
from reference_server.http.front_ends import (
    HEADER_BLOB,
    CoreLink,
    Link,
    direct_routes,
    encode,
    header_blob,
    header_value,
    json_headers,
    request_scope,
    request_wire,
    resolve_front_ends,
    split_headers,
)
from reference_server.io.decode_pool import Decoded, Failed, UploadPart
from reference_server.settings import ServerSettings, SettingsError, load_settings
from tests.server.io.test_decode_pool import multipart, png

IMAGE_FN = {"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 2}, "batch": True,
            "max_batch_size": 8, "concurrency_limit": 1}


def settings(front_ends: int = 2, decode_workers: int = 1, **extra: Any) -> dict[str, Any]:
    short, long = {"chunks": 5, "interval_ms": 20}, {"chunks": 400, "interval_ms": 50}
    return {"functions": [IMAGE_FN, {"api_name": "count", "workload": "stream", "params": short},
                          {"api_name": "long", "workload": "stream", "params": long}],
            "device": "cpu", "launch": {"front_ends": front_ends, "decode_workers": decode_workers}, **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with reference_server_process(settings(), work_dir=tmp_path_factory.mktemp("fronts")) as handle:
        yield handle


def front_end_pids(handle: ServerHandle) -> list[int]:
    core = psutil.Process(handle.process.pid)
    children = core.children(recursive=True)
    return [p.pid for p in children if "reference_server.http.front_ends" in " ".join(p.cmdline())]


# ---------------------------------------------------------------- the link's frames
def test_frames_survive_any_split_of_the_byte_stream() -> None:
    """Messages small and large (read in place), arrays out of band (writable on arrival) and in band."""
    got: list[tuple[Any, ...]] = []
    link = Link(got.append, lambda: None)
    image = np.arange(224 * 224 * 3, dtype=np.uint32).reshape(224, 224, 3).astype(np.uint8)
    frames = [("r", 1, {"path": "/x"}, b"body", None), ("g", 1), ("b", 2, b"\x00" * 70_000, False),
              ("r", 3, {"path": "/u"}, b"", [image, np.arange(10)[::2]]), ("g", 4)]
    lists = [frames[:2], frames[2:3], frames[3:4], frames[4:]]  # a loop turn's frames travel as one list
    stream = b"".join(encode(f) for f in lists)
    for size in (1, 3, 4096, 100_000, len(stream)):
        got.clear()
        for i in range(0, len(stream), size):
            link.data_received(stream[i:i + size])
        assert [f[:3] for f in got] == [f[:3] for f in frames] and got[2] == frames[2]
        arrays = got[3][4]
        assert np.array_equal(arrays[0], image) and arrays[0].flags.writeable
        assert list(arrays[1]) == [0, 2, 4, 6, 8]


def test_a_request_travels_as_a_tuple_with_its_headers_in_one_bytes() -> None:
    """The scope's request keys back in the core; header values with colons, repeated names and empty
    values kept in order; the first value of a header read without splitting them."""
    headers = [(b"host", b"127.0.0.1:7861"), (b"x-empty", b""), (b"cookie", b"a=1"), (b"cookie", b"b=2"),
               (b"session_hash", b"s:1")]
    scope = {"type": "http", "method": "POST", "path": "/p", "raw_path": b"/p", "query_string": b"q=1",
             "headers": headers, "client": ("127.0.0.1", 5), "http_version": "1.1", "state": {}}
    request = request_scope(pickle.loads(pickle.dumps(request_wire(scope))))
    assert split_headers(request.pop(HEADER_BLOB)) == headers
    assert request == {k: scope[k] for k in ("method", "path", "raw_path", "query_string", "client",
                                              "http_version")}
    blob_scope = {HEADER_BLOB: header_blob(headers)}
    for name, first in [(b"host", b"127.0.0.1:7861"), (b"x-empty", b""), (b"cookie", b"a=1"),
                        (b"session_hash", b"s:1"), (b"session", None), (b"ost", None)]:
        assert header_value(blob_scope, name) == header_value(scope, name) == first
    assert split_headers(header_blob([])) == [] and header_value({HEADER_BLOB: b""}, b"host") is None
    no_raw_path = request_scope(request_wire({**scope, "raw_path": None}))
    assert "raw_path" not in no_raw_path


def test_frames_sent_before_the_connection_leave_once_it_is_made() -> None:
    class Transport:
        def __init__(self) -> None:
            self.written = b""

        def write(self, data: bytes) -> None:
            self.written += data

    async def scenario() -> bytes:
        link = Link(lambda frame: None, lambda: None)
        link.send(("hello", (True, None)))
        transport = Transport()
        link.connection_made(transport)  # type: ignore[arg-type]
        link.send(("g", 7))
        await asyncio.sleep(0)
        return transport.written

    written = asyncio.run(scenario())
    got: list[tuple[Any, ...]] = []
    Link(got.append, lambda: None).data_received(written)
    assert got == [("hello", (True, None)), ("g", 7)]


# ---------------------------------------------------------------- settings
def test_auto_is_off_everywhere_until_measured_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto turns no front ends on, a 16-core CUDA box included: they are measured on a CPU box only."""
    monkeypatch.setattr(os, "cpu_count", lambda: 16)

    def never() -> str:
        raise AssertionError("the device is not asked (resolving it may import torch)")

    for gradio in (3, 4, 6):
        assert resolve_front_ends("auto", never, gradio) == 0
    assert resolve_front_ends(2, never, 6) == 2


def test_bad_front_end_settings_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    for launch, gradio, fragment in (({"front_ends": -1}, 6, "launch.front_ends = -1"),
                                     ({"front_ends": 2}, 3, "launch.front_ends needs the SSE queue")):
        path.write_text(
            f"gradio: {gradio}\nfunctions: [{{api_name: e, workload: echo}}]\nlaunch: {launch}\n")
        with pytest.raises(SettingsError, match=fragment):
            load_settings(path)
    assert isinstance(ServerSettings.model_validate(settings()), ServerSettings)


# ---------------------------------------------------------------- a server behind front ends
def test_the_server_runs_as_a_core_and_its_front_ends(server: ServerHandle) -> None:
    assert len(front_end_pids(server)) == 2
    assert "(2 front-end processes)" in server.log_path.read_text()
    config = httpx.get(f"{server.base_url}/config", timeout=10).json()  # any route reaches the core
    assert config["root"].startswith("http://")
    assert httpx.get(f"{server.base_url}/healthz", timeout=10).json() == {"ready": True}
    status = httpx.get(f"{server.base_url}/status", timeout=10).json()
    assert status["children_cpu_s"] > 0  # the front ends' (and the decode worker's) CPU, beside the core's


def test_gradio_client_uploads_and_streams_through_the_front_ends(server: ServerHandle, tmp_path: Path
                                                                   ) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(png(64, 48))
    client = Client(server.base_url, verbose=False)
    label = client.predict(handle_file(str(image)), api_name="/classify")
    assert label["label"] == "LABEL_0"
    chunks = list(client.submit("a", api_name="/count"))  # a generator: every chunk through one stream
    assert len(chunks) >= 2
    client.close()


def test_an_upload_parsed_by_a_front_end_is_decoded_ahead_and_a_bad_one_is_a_4xx(server: ServerHandle
                                                                                 ) -> None:
    url = f"{server.base_url}/gradio_api/upload"
    form = {"content-type": "multipart/form-data; boundary=B"}
    paths = httpx.post(url, content=multipart((b"a.png", png())), headers=form, timeout=10).json()
    assert len(paths) == 1
    served = httpx.get(f"{server.base_url}/gradio_api/file={paths[0]}", timeout=10)
    assert served.status_code == 200 and served.content == png()  # kept by the core, served back
    bad = httpx.post(url, content=b"--B\r\nnot a part", headers=form, timeout=10)
    assert 400 <= bad.status_code < 500 and "detail" in bad.json()
    assert httpx.get(f"{server.base_url}/healthz", timeout=10).status_code == 200


def test_a_client_that_leaves_a_stream_is_noticed_and_the_server_goes_on(server: ServerHandle) -> None:
    session = "leaver"
    join = httpx.post(f"{server.base_url}/gradio_api/queue/join", timeout=10,
                      json={"data": ["x"], "fn_index": 2, "session_hash": session})  # 20 s of chunks
    assert join.status_code == 200
    with httpx.stream("GET", f"{server.base_url}/gradio_api/queue/data",
                      params={"session_hash": session}, timeout=10) as stream:
        for line in stream.iter_lines():
            if "process_generating" in line:
                break  # leave mid-stream
    deadline = time.monotonic() + 15
    running = 1
    while running and time.monotonic() < deadline:  # the core stops the generator whose reader left
        running = httpx.get(f"{server.base_url}/status", timeout=10).json()["jobs_running"]
        time.sleep(0.2)
    assert running == 0
    client = Client(server.base_url, verbose=False)
    assert list(client.submit("b", api_name="/count"))
    client.close()


def test_front_ends_exit_with_the_core(tmp_path: Path) -> None:
    with reference_server_process(settings(front_ends=1, decode_workers=0), work_dir=tmp_path) as handle:
        pids = front_end_pids(handle)
        assert len(pids) == 1
        os.kill(handle.process.pid, signal.SIGTERM)
        handle.process.wait(timeout=20)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() !=
                                              psutil.STATUS_ZOMBIE for p in pids):
        time.sleep(0.1)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_a_frame_that_cannot_be_pickled_does_not_take_its_loop_turn_with_it() -> None:
    class Transport:
        written = b""

        def write(self, data: bytes) -> None:
            self.written += data

    async def scenario() -> bytes:
        link, transport = Link(lambda frame: None, lambda: None), Transport()
        link.connection_made(transport)  # type: ignore[arg-type]
        link.send(("b", 1, b"one", False))
        link.send(("b", 2, lambda: None, False))
        link.send(("g", 3))
        await asyncio.sleep(0)
        return transport.written

    got: list[tuple[Any, ...]] = []
    Link(got.append, lambda: None).data_received(asyncio.run(scenario()))
    assert got == [("b", 1, b"one", False), ("g", 3)]


def test_soon_callbacks_run_once_before_the_turns_write_and_their_frames_leave_with_it() -> None:
    class Transport:
        writes: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.writes.append(data)

    def broken() -> None:
        raise RuntimeError("a stream's bug")

    async def scenario() -> list[bytes]:
        link, transport = Link(lambda frame: None, lambda: None), Transport()
        link.connection_made(transport)  # type: ignore[arg-type]
        link.soon(lambda: link.send(("b", 2, b"late", True)))
        link.soon(broken)
        link.send(("b", 1, b"first", True))
        link.soon(lambda: link.soon(lambda: link.send(("g", 3))))  # a callback's own soon: same write
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return transport.writes

    writes = asyncio.run(scenario())
    got: list[tuple[Any, ...]] = []
    Link(got.append, lambda: None).data_received(b"".join(writes))
    assert len(writes) == 1 and got == [("b", 1, b"first", True), ("b", 2, b"late", True), ("g", 3)]


# ---------------------------------------------------------------- the core's shortcuts
def echo_app(**extra: Any) -> Any:
    fn = {"api_name": "echo", "workload": "echo"}
    return build_app(ServerSettings.model_validate({"functions": [fn], "device": "cpu", **extra}))


def test_direct_routes_are_the_routers_own_choice_and_none_behind_auth() -> None:
    app = echo_app()
    table = direct_routes(app)
    assert table[("POST", "/gradio_api/queue/join")] is gradio_routes.queue_join
    assert table[("GET", "/gradio_api/queue/data")] is gradio_routes.queue_data
    assert not any("{" in path for _, path in table)  # routes with path parameters go through the router
    guarded = echo_app(auth={"users": {"u": "p"}})
    assert direct_routes(guarded) == {}  # the auth middleware must see every request


FORWARDED = [  # (method, path, body): hot routes (fast forms), plain ones (direct) and the router's 404/405
    ("POST", "/gradio_api/queue/join", b"not json"),
    ("POST", "/gradio_api/queue/join", b'{"data": ["hi"], "fn_index": 0}'),
    ("POST", "/gradio_api/queue/join", b'{"data": ["hi"], "fn_index": 7, "session_hash": "s"}'),
    ("POST", "/gradio_api/queue/join", b'{"data": ["hi"], "fn_index": 0, "session_hash": "s"}'),
    ("GET", "/gradio_api/queue/status", b""),
    ("POST", "/gradio_api/cancel", b"{}"),
    ("POST", "/gradio_api/upload", b""),
    ("GET", "/gradio_api/nowhere", b""),
    ("DELETE", "/gradio_api/queue/join", b""),
]


def test_a_forwarded_request_gets_the_answer_the_whole_app_gives() -> None:
    """Through the core's link (fast forms, direct routes, the whole app) and through the app itself:
    the same status, content type and body (an event id aside)."""

    async def through_link() -> list[tuple[int, bytes | None, bytes]]:
        core = CoreLink(echo_app(), ("127.0.0.1", 80), lambda _core: None)
        sent: list[tuple[Any, ...]] = []
        core.link.send = sent.append  # type: ignore[method-assign]
        core.link.loop = asyncio.get_running_loop()
        for rid, (method, path, body) in enumerate(FORWARDED):
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            request = {"method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
                       "headers": headers, "http_version": "1.1", "client": ("127.0.0.1", 1)}
            core._frame(("r", rid, request_wire(request), body, None))  # as a front end sends it
        for _ in range(50):
            await asyncio.sleep(0.01)
        frames = [g for f in sent for g in as_start_and_body(f)]
        starts = {f[1]: f for f in frames if f[0] == "s"}
        bodies = {f[1]: f[2] for f in frames if f[0] == "b"}
        return [(starts[i][2], dict(starts[i][3]).get(b"content-type"), bodies[i])
                for i in range(len(FORWARDED))]

    async def through_app() -> list[tuple[int, bytes | None, bytes]]:
        transport = httpx.ASGITransport(app=echo_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            got = []
            for method, path, body in FORWARDED:
                kind = {"content-type": "application/json"}
                r = await client.request(method, path, content=body, headers=kind)
                got.append((r.status_code, r.headers.get("content-type", "").encode() or None, r.content))
            return got

    forwarded, direct = asyncio.run(through_link()), asyncio.run(through_app())
    for (method, path, _), one, other in zip(FORWARDED, forwarded, direct, strict=True):
        assert one[:2] == other[:2], (method, path, one, other)
        if b"event_id" not in one[2]:
            assert one[2] == other[2], (method, path)
    assert [s for s, _, _ in forwarded] == [422, 400, 422, 200, 200, 422, 422, 404, 405]


def test_an_upload_a_front_end_parsed_is_stored_or_refused_in_the_core_frame_callback() -> None:
    """The upload's fast form: the parts kept (their decoded images too), a malformed body's reason
    and an oversized upload answered as `upload` answers them, with no task."""
    app = echo_app(max_file_size=1000)
    core = CoreLink(app, ("127.0.0.1", 80), lambda _core: None)
    sent: list[tuple[Any, ...]] = []
    core.link.send = sent.append  # type: ignore[method-assign]
    decoded = Decoded(np.zeros((2, 2, 3), np.uint8), 0.001, 0.0)

    def forward(length: int, parsed: Any) -> tuple[int, Any]:
        sent.clear()
        headers = [(b"content-length", str(length).encode()), (b"session_hash", b"s1")]
        request = {"method": "POST", "path": "/gradio_api/upload", "headers": headers, "query_string": b""}
        core._frame(("r", 1, request_wire(request), b"", parsed))  # no loop running: a task would fail here
        assert [f[0] for f in sent] == ["j"]  # the whole answer in one frame
        start, body = as_start_and_body(sent[0])
        assert start[3][1] == (b"content-type", b"application/json")
        return start[2], orjson.loads(body[2])

    status, paths = forward(300, [UploadPart("files", "a b/c.png", b"\x89PNG", decoded)])
    store = app.state.server.store
    assert status == 200 and paths[0].endswith("/c.png") and store.in_memory(paths[0]) == b"\x89PNG"
    assert store.take_decoded(paths[0]) is decoded
    assert forward(300, Failed(400, "malformed multipart body: x")) == (
        400, {"detail": "malformed multipart body: x"})
    too_big = 1000 + gradio_routes.MULTIPART_OVERHEAD + 1
    assert forward(too_big, [])[0] == 413
    assert forward(300, [UploadPart("files", "big.png", b"x" * 1001)])[0] == 413
    no_files = (422, {"detail": "no files in the multipart field 'files'"})
    assert forward(300, [UploadPart("other", None, b"x")]) == no_files


def test_a_forwarded_session_stream_runs_without_a_task_and_ends_as_the_apps_does() -> None:
    """`/queue/data` through the core's link: its messages of one loop turn in one piece, close_stream
    at the end, no task; a missing session and a missing session_hash answered as the app answers."""

    async def scenario() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
        app = echo_app()
        async with app.router.lifespan_context(app):
            return await forward(CoreLink(app, ("127.0.0.1", 80), lambda _core: None))

    async def forward(core: CoreLink) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
        sent: list[tuple[Any, ...]] = []
        reader = Link(sent.append, lambda: None)  # the front end's side of the link
        core.link.connection_made(type("T", (), {"write": lambda _self, data: reader.data_received(data)})())
        join = b'{"data": ["hi"], "fn_index": 0, "session_hash": "s"}'
        core._frame(("r", 1, request("POST", "/gradio_api/queue/join"), join, None))
        core._frame(("r", 2, request("GET", "/gradio_api/queue/data", b"session_hash=s"), b"", None))
        tasks = len(core.tasks)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if any(f[0] == "b" and f[1] == 2 and not f[3] for f in sent):
                break
        stream = [f for f in sent if f[1] == 2]
        sent.clear()
        core._frame(("r", 3, request("GET", "/gradio_api/queue/data", b"session_hash=nobody"), b"", None))
        core._frame(("r", 4, request("GET", "/gradio_api/queue/data"), b"", None))
        await asyncio.sleep(0.01)
        return stream, sent, tasks

    stream, others, tasks = asyncio.run(scenario())
    assert tasks == 0
    assert stream[0][:3] == ("s", 2, 200) and dict(stream[0][3])[b"content-type"].startswith(b"text/event")
    body = b"".join(f[2] for f in stream[1:])
    kinds = [orjson.loads(line[6:])["msg"] for line in body.split(b"\n\n") if line]
    assert kinds == ["estimation", "process_starts", "process_completed", "close_stream"]
    assert [f[3] for f in stream[1:]][-1] is False and all(f[3] for f in stream[1:-1])
    missing = b"".join(f[2] for f in others if f[0] == "b" and f[1] == 3)
    assert orjson.loads(missing[6:])["session_not_found"] is True
    assert [(f[2], orjson.loads(f[3])) for f in others if f[1] == 4] == [
        (400, {"detail": "missing query parameter 'session_hash'"})]


def test_a_forwarded_stream_whose_client_leaves_drops_its_waiting_events() -> None:
    """The front end's `g` frame (or the loss of the front end) is the stream's leaving: the session and
    its waiting events go, as when a task's stream hears `http.disconnect`."""

    async def scenario(how: str) -> tuple[bool, int, bool]:
        app = echo_app(functions=[{"api_name": "echo", "workload": "sleep", "params": {"base_ms": 5000}}])
        async with app.router.lifespan_context(app):
            return await leave(app, how)

    async def leave(app: Any, how: str) -> tuple[bool, int, bool]:
        core = CoreLink(app, ("127.0.0.1", 80), lambda _core: None)
        core.link.loop = asyncio.get_running_loop()
        core.link.send = lambda frame: None  # type: ignore[method-assign]
        queue = app.state.server.queue
        for i, session in enumerate(["running", "s"]):  # the first occupies the only slot
            join = orjson.dumps({"data": ["x"], "fn_index": 0, "session_hash": session})
            core._frame(("r", 10 + i, request("POST", "/gradio_api/queue/join"), join, None))
        core._frame(("r", 2, request("GET", "/gradio_api/queue/data", b"session_hash=s"), b"", None))
        await asyncio.sleep(0.05)
        reading = queue.sessions.get("s").readers == 1
        core._frame(("g", 2)) if how == "g" else core.lost()
        waiting = queue.waiting_count
        gone = queue.sessions.get("s") is None
        return reading, waiting, gone

    for how in ("g", "lost"):
        assert asyncio.run(scenario(how)) == (True, 0, True), how


def as_start_and_body(frame: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """A whole JSON answer's `j` frame as the `s` and `b` frames the front end turns it into."""
    if frame[0] != "j":
        return [frame]
    return [("s", frame[1], frame[2], json_headers(frame[3])), ("b", frame[1], frame[3], False)]


def request(method: str, path: str, query: bytes = b"") -> dict[str, Any]:
    return {"method": method, "path": path, "raw_path": path.encode(), "query_string": query,
            "headers": [(b"content-type", b"application/json")], "http_version": "1.1",
            "client": ("127.0.0.1", 1)}
