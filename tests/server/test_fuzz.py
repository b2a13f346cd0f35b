"""Property-based fuzzing of every reference-server route (hypothesis; bounded, ~20 s on 2 cores).

Whatever the request (malformed or oversized JSON, wrong types, unicode and NUL in names, huge numbers,
unknown fields, traversal paths), the invariants are:
* never a 5xx;
* no file outside the server's file store is opened, created or moved (an audit hook watches the test's
  folder, where a secret file sits beside the store), and the secret never comes back in a body;
* every accepted event reaches its terminal message (its stream ends);
* afterwards (last test) the server serves a normal job and holds no running job, waiting event, stream
  reader or /run/ session.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

TOKEN = "fuzz-admin-token"
SECRET = "qbench-fuzz-secret-6b1f0c"
FUNCTIONS: list[dict[str, Any]] = [
    {"api_name": "echo", "workload": "echo"},
    {"api_name": "num", "workload": "echo", "params": {"type": "number"}},
    {"api_name": "img", "workload": "imageop", "params": {"size": 8}},
    {"api_name": "batch", "workload": "sleep", "params": {"base_ms": 1}, "batch": True, "max_batch_size": 4},
    {"api_name": "gen", "workload": "stream", "params": {"chunks": 3, "interval_ms": 1}},
    {"api_name": "slow", "workload": "sleep", "params": {"base_ms": 30}},
]
API_NAMES = [f["api_name"] for f in FUNCTIONS]
EXAMPLES = int(os.environ.get("QBENCH_FUZZ_EXAMPLES", "100"))  # per test; raise it for a longer hunt
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STREAM_DEADLINE_S = 10.0


# ---------------------------------------------------------------- the server and a file-access watch


class Watch:
    """Records file opens/creations under `base` but outside `store` (set while the server runs)."""

    base = ""
    store = ""
    outside: list[tuple[str, str]] = []

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if not cls.base or event not in ("open", "os.mkdir", "os.rename", "os.replace", "os.symlink"):
            return
        try:
            for arg in args[:2] if event in ("os.rename", "os.replace", "os.symlink") else args[:1]:
                if isinstance(arg, str | bytes | os.PathLike):
                    path = os.path.abspath(os.fsdecode(arg))
                    inside_base = path == cls.base or path.startswith(cls.base + os.sep)
                    if (inside_base and not path.startswith(cls.store + os.sep)) or SECRET in path:
                        cls.outside.append((event, path))
        except Exception:  # an audit hook must never break the operation it watches
            pass


sys.addaudithook(Watch.hook)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("fuzz").resolve()
    (base / "secret.txt").write_text(SECRET)
    settings_ = synthetic_settings(
        functions=FUNCTIONS, heartbeat_interval_s=0.2, max_file_size=4096, admin_token=TOKEN
    )
    with serve_in_thread(settings_, file_dir=base / "store") as running:
        Watch.base, Watch.store = str(base), str(base / "store")
        try:
            yield running
        finally:
            Watch.base = Watch.store = ""


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=STREAM_DEADLINE_S) as c:
        yield c


@pytest.fixture(autouse=True)
def no_file_outside_the_store() -> Iterator[None]:
    Watch.outside.clear()
    yield
    assert Watch.outside == []


# ---------------------------------------------------------------- strategies

def repeated(text: str, times: int) -> st.SearchStrategy[str]:
    return st.just(times).map(lambda n: text * n)  # (a strategy's repr stays short, unlike a long literal)


names = st.text(max_size=40) | st.sampled_from(["", "\x00", "a\x00b"])
names |= repeated("é", 200) | repeated("x", 300)
huge = st.integers(2**63 - 2, 2**200) | st.integers(-(2**200), -(2**63))
leaves = st.none() | st.booleans() | st.integers() | huge | st.floats() | names
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
    max_leaves=10,
)
segments = st.sampled_from(["..", ".", "", "secret.txt", "store", "uploads", "outputs", "\x00", "é"])
segments |= repeated("x", 300)
traversals = st.lists(segments, max_size=8).map("/".join)


@st.composite
def file_paths(draw: st.DrawFn) -> str:
    """Paths aimed at the secret beside the store (absolute, relative, through the store) or anywhere."""
    root = Path(Watch.base or "/tmp")
    prefix = draw(st.sampled_from(["", "/", f"{root}/", f"{root}/store/", f"{root}/store/uploads/", "/etc/"]))
    return prefix + draw(traversals | names | st.just("passwd"))


file_data = st.fixed_dictionaries(
    {}, optional={"path": file_paths() | json_values, "url": file_paths() | json_values, "meta": json_values}
)
data_values = st.lists(names | json_values | file_data | file_paths(), max_size=3) | json_values
extras = st.dictionaries(st.text(max_size=12), json_values, max_size=2)


def with_extras(fixed: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda body, extra: {**extra, **body}, st.fixed_dictionaries({}, optional=fixed), extras)


@dataclass(frozen=True)
class Oversized:
    """A large but valid join-like body, built only when sent (a short repr for hypothesis' reports)."""

    chars: int
    fn_index: int

    def render(self) -> bytes:
        body = {"data": ["x" * self.chars], "fn_index": self.fn_index, "session_hash": "big"}
        return json.dumps(body).encode()


def bodies(fixed: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A JSON object with (some of) the route's fields and unknown ones, any JSON value, or raw bytes."""
    nested = repeated("[", 5000).map(str.encode)
    raw = st.binary(max_size=200) | st.sampled_from([b"", b"{", b'{"data": 1e999}']) | nested
    oversized = st.builds(Oversized, st.integers(100_000, 400_000), st.integers(0, len(FUNCTIONS)))
    return with_extras(fixed) | json_values | raw | oversized


join_fields = {
    "data": data_values,
    "fn_index": st.integers(-2, len(FUNCTIONS) + 1) | json_values,
    "session_hash": names | json_values,
    "event_data": json_values,
    "trigger_id": json_values,
    "simple_format": json_values,
}
api_names = st.sampled_from(API_NAMES) | st.sampled_from(API_NAMES) | names  # (weights: 2/3 real names)


# ---------------------------------------------------------------- helpers


def check(r: httpx.Response) -> httpx.Response:
    if currently_in_test_context():  # the answers' mix: pytest --hypothesis-show-statistics
        route = "/".join(r.request.url.path.split("/")[:3]).split("=")[0]
        event(f"{r.request.method} {route} {r.status_code}")
    assert r.status_code < 500, f"{r.request.method} {r.request.url} -> {r.status_code}: {r.text[:300]}"
    assert SECRET not in r.text
    return r


def send(client: httpx.Client, method: str, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
    if isinstance(body, Oversized):
        body = body.render()
    if isinstance(body, bytes):
        kwargs["content"] = body
    elif body is not None:
        kwargs["content"] = json.dumps(body).encode()
        kwargs["headers"] = {"content-type": "application/json", **kwargs.get("headers", {})}
    return check(client.request(method, path, **kwargs))


def first_bytes(client: httpx.Client, path: str, **kwargs: Any) -> None:
    """Open a stream (it may never end: heartbeats), check its status and first chunk, then leave."""
    with client.stream("GET", path, **kwargs) as r:
        assert r.status_code < 500, f"GET {r.request.url} -> {r.status_code}"
        chunk = next(r.iter_raw(), b"")
        assert SECRET.encode() not in chunk


def read_to_end(client: httpx.Client, path: str, **kwargs: Any) -> str:
    """Read a stream that must end (an accepted event's), within STREAM_DEADLINE_S."""
    deadline = time.monotonic() + STREAM_DEADLINE_S
    out = []
    with client.stream("GET", path, **kwargs) as r:
        assert r.status_code == 200
        for chunk in r.iter_text():
            out.append(chunk)
            assert time.monotonic() < deadline, f"stream {path} {kwargs} did not end: {''.join(out)[-300:]}"
    text = "".join(out)
    assert SECRET not in text
    return text


def encoded(path: str) -> str:
    """Percent-encode all of it, dots included, so no client normalises `..` away before the server."""
    return quote(path, safe="").replace(".", "%2E")


# ---------------------------------------------------------------- routes


@FUZZ
@given(body=bodies(join_fields))
def test_queue_join(client: httpx.Client, body: Any) -> None:
    r = send(client, "POST", "/gradio_api/queue/join", body)
    if r.status_code == 200:  # accepted: its stream must deliver the completion and close
        session = "big" if isinstance(body, Oversized) else body["session_hash"]
        text = read_to_end(client, "/gradio_api/queue/data", params={"session_hash": session})
        assert r.json()["event_id"] in text and "close_stream" in text


@FUZZ
@given(session=names, fields=with_extras({k: json_values for k in ("session_hash", "fn_index", "event_id")}))
def test_queue_data_heartbeat_and_cancel(client: httpx.Client, session: str, fields: dict[str, Any]) -> None:
    first_bytes(client, "/gradio_api/queue/data", params={"session_hash": session})
    first_bytes(client, "/gradio_api/heartbeat/" + encoded(session))
    send(client, "POST", "/gradio_api/cancel", fields)
    send(client, "POST", "/gradio_api/reset", fields)


@FUZZ
@given(
    session=names.filter(bool), data=st.sampled_from([["a"], [1]]), extra=extras, cancel_twice=st.booleans()
)
def test_cancel_of_real_events_frees_their_slots(
    client: httpx.Client, session: str, data: list[Any], extra: dict[str, Any], cancel_twice: bool
) -> None:
    fn_index = API_NAMES.index("slow")
    body = {"data": data, "fn_index": fn_index, "session_hash": session}
    event_id = send(client, "POST", "/gradio_api/queue/join", body).json()["event_id"]
    for _ in range(2 if cancel_twice else 1):
        send(client, "POST", "/gradio_api/cancel", {**extra, **body, "event_id": event_id})
    read_to_end(client, "/gradio_api/queue/data", params={"session_hash": session})


@FUZZ
@given(api=api_names, body=bodies(join_fields), event_id=names)
def test_call(client: httpx.Client, api: str, body: Any, event_id: str) -> None:
    r = send(client, "POST", "/gradio_api/call/" + encoded(api), body)
    if r.status_code == 200:
        text = read_to_end(client, f"/gradio_api/call/{encoded(api)}/{r.json()['event_id']}")
        assert "event: complete" in text or "event: error" in text
    first_bytes(client, f"/gradio_api/call/{encoded(api)}/{encoded(event_id)}")


@FUZZ
@given(api=api_names, body=bodies(join_fields))
def test_run(client: httpx.Client, api: str, body: Any) -> None:
    send(client, "POST", "/gradio_api/run/" + encoded(api), body)


def multipart(field: bytes, filename: bytes, data: bytes) -> bytes:
    return b"".join([
        b'--B\r\nContent-Disposition: form-data; name="', field, b'"; filename="', filename, b'"\r\n',
        b"Content-Type: application/octet-stream\r\n\r\n", data, b"\r\n--B--\r\n",
    ])


@FUZZ
@given(
    field=st.sampled_from([b"files", b"files", b"files", b"file", b""]) | st.binary(max_size=8),
    filename=names.map(lambda n: n.encode()) | st.binary(max_size=300) | traversals.map(str.encode),
    data=st.binary(max_size=5000),
    raw=st.sampled_from([False, False, False, True]),
)
def test_upload_and_read_back(
    client: httpx.Client, server: RunningServer, field: bytes, filename: bytes, data: bytes, raw: bool
) -> None:
    headers = {"content-type": "multipart/form-data; boundary=B"}
    body = data if raw else multipart(field, filename, data)
    r = send(client, "POST", "/gradio_api/upload", body, headers=headers)
    if r.status_code == 200:
        for path in map(Path, r.json()):
            assert path.resolve().parent.parent == server.state.store.uploads
            assert send(client, "GET", "/gradio_api/file=" + encoded(str(path))).content == data


@FUZZ
@given(path=file_paths(), method=st.sampled_from(["GET", "HEAD"]))
def test_file_route_serves_only_the_store(client: httpx.Client, path: str, method: str) -> None:
    send(client, method, "/gradio_api/file=" + encoded(path))
    send(client, method, "/gradio_api/file=" + quote(path, safe="/"))


@FUZZ
@given(
    path=st.sampled_from(["/config", "/config/", "/gradio_api/info", "/gradio_api/queue/status", "/metrics",
                          "/status", "/healthz"]),
    query=st.dictionaries(names, names, max_size=3),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
    body=bodies({}),
)
def test_plain_routes(client: httpx.Client, path: str, query: dict[str, str], method: str, body: Any) -> None:
    send(client, method, path, None if method == "GET" else body, params=query)


FUNCTION_KNOBS = ("concurrency_limit", "batch", "max_batch_size", "batch_wait_ms")
knob_values = st.integers(-5, 50) | st.sampled_from(["auto", "default", None, True, 1e-9, 1e300])
knob_values |= json_values
admin_fields = {
    "queue": st.dictionaries(
        st.sampled_from(["default_concurrency_limit", "max_size", "status_update_rate"]) | names,
        knob_values, max_size=3,
    ) | json_values,
    "launch": st.dictionaries(st.just("max_threads") | names, knob_values, max_size=2) | json_values,
    "show_error": json_values,
    "functions": st.dictionaries(
        api_names,
        st.dictionaries(
            st.sampled_from(FUNCTION_KNOBS) | names,
            knob_values, max_size=3,
        ) | json_values,
        max_size=2,
    ) | json_values,
}
printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
auth_headers = st.sampled_from([None, "Bearer wrong", "Bearer", TOKEN, f"Bearer {TOKEN}x"]) | printable.map(
    str.strip  # h11 refuses header values with surrounding spaces before they leave the client
)


def restore(client: httpx.Client, server: RunningServer) -> None:
    s = synthetic_settings(functions=FUNCTIONS)
    body = {
        "queue": s.queue.model_dump(), "launch": {"max_threads": s.launch.max_threads},
        "show_error": s.show_error,
        "functions": {
            f.api_name: {k: getattr(f, k) for k in FUNCTION_KNOBS}
            for f in s.functions
        },
    }
    r = client.post("/admin/config", json=body, headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text


@FUZZ
@given(auth=auth_headers, body=bodies(admin_fields))
def test_admin_config_refuses_without_the_token(client: httpx.Client, auth: str | None, body: Any) -> None:
    r = send(client, "POST", "/admin/config", body, headers={"authorization": auth} if auth else {})
    assert r.status_code in (401, 403)


@FUZZ
@given(body=st.fixed_dictionaries({}, optional=admin_fields) | bodies(admin_fields))
def test_admin_config(client: httpx.Client, server: RunningServer, body: Any) -> None:
    r = send(client, "POST", "/admin/config", body, headers={"authorization": f"Bearer {TOKEN}"})
    if r.status_code == 200:  # a valid reconfiguration: put the original settings back
        restore(client, server)


# ---------------------------------------------------------------- afterwards


def test_afterwards_the_server_is_clean_and_serving(client: httpx.Client, server: RunningServer) -> None:
    deadline = time.monotonic() + STREAM_DEADLINE_S
    while True:
        status = send(client, "GET", "/status").json()
        if status["jobs_running"] == 0 and status["events_waiting"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert (status["jobs_running"], status["events_waiting"]) == (0, 0)
    assert "qbench_running_jobs 0.0" in send(client, "GET", "/metrics").text
    queue = server.state.queue
    assert not queue.events and all(not g.running and not g.waiting for g in queue.groups.values())
    sessions = dict(queue.sessions._by_hash)
    assert not [h for h, s in sessions.items() if s.readers or h.startswith("run-")]
    event_id = send(client, "POST", "/gradio_api/call/echo", {"data": ["alive"]}).json()["event_id"]
    assert "alive" in read_to_end(client, f"/gradio_api/call/echo/{event_id}")
    store = server.state.store.root
    assert sorted(p.name for p in store.parent.iterdir()) == ["secret.txt", "store"]
    for path in store.rglob("*"):
        parts = path.relative_to(store).parts
        assert parts[0] in ("uploads", "outputs") and len(parts) <= 3, path
