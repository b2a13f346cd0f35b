"""Uploads parsed off the event loop: the multipart parser as a unit, and both routes (sized, streamed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reference_server.io.components import FileStore
from reference_server.io.uploads import UploadError, parse_parts, save_uploads
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

FORM = "multipart/form-data; boundary=B"


def part(name: bytes, data: bytes, filename: bytes | None = None) -> bytes:
    disposition = b'form-data; name="' + name + b'"'
    if filename is not None:
        disposition += b'; filename="' + filename + b'"'
    return b"--B\r\nContent-Disposition: " + disposition + b"\r\nContent-Type: x/y\r\n\r\n" + data + b"\r\n"


def body(*parts: bytes) -> bytes:
    return b"".join(parts) + b"--B--\r\n"


def test_parts_are_collected_in_order_with_names_and_bytes() -> None:
    data = body(part(b"files", b"one", b"a.png"), part(b"note", b"hi"), part(b"files", b"\r\n--x", b"b.png"))
    parts = parse_parts(data, FORM)
    assert [(p.name, p.filename, b"".join(p.chunks)) for p in parts] == [
        ("files", "a.png", b"one"), ("note", None, b"hi"), ("files", "b.png", b"\r\n--x"),
    ]


def test_file_names_decode_as_utf8_else_latin1() -> None:
    parts = parse_parts(body(part(b"files", b"x", "é.png".encode()), part(b"files", b"x", b"\xe9.png")), FORM)
    assert [p.filename for p in parts] == ["é.png", "é.png"]


def test_an_unterminated_last_part_is_dropped() -> None:
    parts = parse_parts(part(b"files", b"one", b"a") + b"--B\r\nContent-Dis", FORM)
    assert [p.filename for p in parts] == ["a"]


@pytest.mark.parametrize(
    ("content_type", "data", "status", "detail"),
    [
        ("multipart/form-data", body(part(b"files", b"x", b"a")), 400, "no boundary"),
        (FORM, b"--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--\r\n", 400, "no Content-Disposition"),
        (FORM, b"--Bjunk\r\n\r\n", 400, "malformed multipart body"),
        (FORM, body(part(b"files", b"x")), 422, "must be a file upload"),
        (FORM, body(part(b"other", b"x", b"a")), 422, "no files"),
        ("application/x-www-form-urlencoded", b"files=x", 422, "no files"),
        (FORM, body(part(b"files", b"x" * 11, b"a")), 413, "max_file_size is 10"),
        (FORM, body(part(b"files", b"x", b"..")), 400, "invalid file name"),
    ],
    ids=["no-boundary", "no-name", "garbage", "plain-field", "other-field", "not-multipart", "too-big",
         "dotdot"],
)
def test_bad_uploads_raise_the_answer(tmp_path: Path, content_type: str, data: bytes, status: int,
                                      detail: str) -> None:
    with pytest.raises(UploadError) as info:
        save_uploads(data, content_type, FileStore(tmp_path), limit=10)
    assert info.value.status == status and detail in info.value.detail


def test_files_are_written_into_the_store(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    data = body(part(b"files", b"png!", b"../x.png"), part(b"files", b"", b"e"))
    paths = save_uploads(data, FORM, store, None)
    assert [Path(p).name for p in paths] == ["x.png", "e"]
    assert [Path(p).read_bytes() for p in paths] == [b"png!", b""]
    assert all(Path(p).parent.parent == store.uploads for p in paths)


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with serve_in_thread(synthetic_settings(max_file_size=1000)) as running:
        yield running


def test_sized_and_chunked_uploads_give_the_same_answers(server: RunningServer) -> None:
    """A body with a Content-Length is parsed in a thread; a chunked one streams through starlette."""
    url, headers = f"{server.url}/gradio_api/upload", {"content-type": FORM}
    data = body(part(b"files", b"abc", b"a.txt"), part(b"files", b"de", b"b.txt"))

    def chunked() -> Iterator[bytes]:
        yield data[:7]
        yield data[7:]

    for content in (data, chunked()):
        r = httpx.post(url, content=content, headers=headers)
        assert r.status_code == 200, r.text
        assert [server.state.store.read(p) for p in r.json()] == [b"abc", b"de"]  # memory or disk
    big = body(part(b"files", b"x" * 1001, b"a"))
    for content in (big, iter([big])):
        r = httpx.post(url, content=content, headers=headers)
        assert r.status_code == 413 and "max_file_size is 1000" in r.json()["detail"]
    r = httpx.post(url, content=iter([body(part(b"files", b"x"))]), headers=headers)
    assert r.status_code == 422 and "must be a file upload" in r.json()["detail"]
