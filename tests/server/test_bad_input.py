"""Client mistakes get a 4xx with a clear detail, and the server keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = synthetic_settings(
        functions=[{"api_name": "echo", "workload": "echo"}, {"api_name": "img", "workload": "imageop"}],
        max_file_size=100,
    )
    with serve_in_thread(settings) as running:
        yield running


JOIN = "/gradio_api/queue/join"
CASES: list[tuple[str, str, Any, int, str]] = [
    ("POST", JOIN, b"{not json", 422, "not valid JSON"),
    ("POST", JOIN, b"[1, 2]", 422, "must be a JSON object"),
    ("POST", JOIN, {"fn_index": 0, "session_hash": "s"}, 422, "Field required"),
    ("POST", JOIN, {"data": ["x"], "fn_index": 0}, 400, "Session hash not found."),
    ("POST", JOIN, {"data": ["x"], "session_hash": "s"}, 400, "No function index provided."),
    ("POST", JOIN, {"data": ["x"], "fn_index": 9, "session_hash": "s"}, 422, "unknown fn_index 9"),
    ("POST", JOIN, {"data": ["x"], "fn_index": "0", "session_hash": "s"}, 422, "unknown fn_index '0'"),
    ("POST", JOIN, {"data": "x", "fn_index": 0, "session_hash": "s"}, 422, "'data' must be a list"),
    ("POST", JOIN, {"data": [], "fn_index": 0, "session_hash": "s"}, 422, "takes 1 input(s), got 0"),
    ("POST", "/gradio_api/cancel", {"event_id": "e"}, 422, "missing: session_hash, fn_index"),
    ("POST", "/gradio_api/call/nope", {"data": ["x"]}, 404, "unknown api_name 'nope'"),
    ("POST", "/gradio_api/call/echo", {"data": ["x", "y"]}, 422, "takes 1 input(s), got 2"),
    ("GET", "/gradio_api/queue/data", None, 400, "session_hash"),
    ("GET", "/gradio_api/file=/etc/passwd", None, 404, "file not found"),
    ("POST", "/gradio_api/run/echo", {"data": [12]}, 422, "expected a string, got int"),
    ("POST", "/gradio_api/run/img", {"data": ["/etc/hostname"]}, 422, "was not uploaded to this server"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "detail"), CASES)
def test_bad_requests_get_4xx(server: RunningServer, method: str, path: str, body: Any, status: int,
                              detail: str) -> None:
    kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
    r = httpx.request(method, server.url + path, **({} if body is None else kwargs))
    assert r.status_code == status, r.text
    body = r.json()
    assert detail in str(body["detail"] if "detail" in body else body["error"])


def test_oversized_and_empty_uploads(server: RunningServer) -> None:
    r = httpx.post(f"{server.url}/gradio_api/upload", files={"files": ("big.bin", b"x" * 500)})
    assert r.status_code == 413 and "max_file_size is 100" in r.json()["detail"]
    r = httpx.post(f"{server.url}/gradio_api/upload", files={"files": ("huge.bin", b"x" * 200_000)})
    assert r.status_code == 413 and "exceeds max_file_size" in r.json()["detail"]
    r = httpx.post(f"{server.url}/gradio_api/upload", data={"other": "1"})
    assert r.status_code == 422


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("a" * 300 + ".png", "a" * 196 + ".png"),  # cut to 200 bytes, extension kept (as Gradio does)
        ("x." + "e" * 300, "file." + "e" * 195),
        ("../../outside.txt", "outside.txt"),
        ("a\x00b<>|?*.txt", "ab.txt"),
        ("\u00e9" * 150, "\u00e9" * 100),  # 2 bytes each
        (" . ", "file"),
    ],
    ids=["long", "long-extension", "traversal", "forbidden-chars", "multibyte", "dots-only"],
)
def test_upload_names_are_sanitised_like_gradio(server: RunningServer, name: str, stored: str) -> None:
    r = upload_raw(server, name.encode())
    assert r.status_code == 200, r.text
    (path,) = map(Path, r.json())
    assert path.name == stored and path.parent.parent == server.state.store.uploads
    assert server.state.store.read(str(path)) == b"data"  # kept in memory (FileStore)


def upload_raw(server: RunningServer, filename: bytes, data: bytes = b"data") -> httpx.Response:
    """A multipart upload with the file name's bytes as given (httpx would percent-encode some)."""
    body = b"".join([
        b'--B\r\nContent-Disposition: form-data; name="files"; filename="', filename, b'"\r\n',
        b"Content-Type: application/octet-stream\r\n\r\n", data, b"\r\n--B--\r\n",
    ])
    headers = {"content-type": "multipart/form-data; boundary=B"}
    return httpx.post(f"{server.url}/gradio_api/upload", content=body, headers=headers)


def test_a_parent_directory_name_is_refused(server: RunningServer) -> None:
    r = httpx.post(f"{server.url}/gradio_api/upload", files={"files": ("a/..", b"data")})
    assert r.status_code == 400 and "invalid file name" in r.json()["detail"]


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ({"path": "/etc/hostname", "meta": {"_type": "gradio.FileData"}}, "was not uploaded to this server"),
        ({"meta": {}}, "expected FileData with a 'path'"),
        ("data:image/png;base64,AAAA", "not a readable image"),
    ],
)
def test_bad_file_inputs_fail_only_that_request(server: RunningServer, value: Any, detail: str) -> None:
    session = "bad-file"
    r = httpx.post(server.url + JOIN, json={"data": [value], "fn_index": 1, "session_hash": session})
    assert r.status_code == 200
    with httpx.stream("GET", f"{server.url}/gradio_api/queue/data", params={"session_hash": session}) as s:
        raw = s.read().decode()
    assert '"success":false' in raw and detail in raw
    assert_still_serving(server)


def assert_still_serving(server: RunningServer) -> None:
    r = httpx.post(f"{server.url}/gradio_api/call/echo", json={"data": ["alive"]})
    eid = r.json()["event_id"]
    assert "alive" in httpx.get(f"{server.url}/gradio_api/call/echo/{eid}").text


def test_server_survives_the_table(server: RunningServer) -> None:
    for method, path, body, _, _ in CASES:
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
        httpx.request(method, server.url + path, **({} if body is None else kwargs))
    assert_still_serving(server)
