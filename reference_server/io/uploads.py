"""`POST /gradio_api/upload` off the event loop: the body is read on the loop, parsed and written in a thread.

A py-spy profile of the image preset under load (tiny ViT, 224x224 PNG uploads, 2-core CPU) had the
upload handler at ~20% of the event-loop thread: starlette's form parser runs python-multipart's
callbacks on the loop, and the handler created the upload folder and wrote the file there too. Here
the loop only collects the body's chunks; `save_uploads` (multipart parsing, `mkdir`, `write`) runs in
a worker thread. Bodies above IN_MEMORY_LIMIT, or without a Content-Length, take starlette's streaming
parser (spooled to disk) so a large upload never sits in memory whole.

Answers, as before: 422 when there is no file in the field `files` or it is a plain field; 413 for a
file over max_file_size; 400 for a malformed body or a name that is only `..`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from reference_server.io.components import FileStore

IN_MEMORY_LIMIT = 16 * 1024 * 1024  # bytes of body parsed in memory; larger ones are streamed
MAX_PARTS = 1000  # starlette's default max_files / max_fields


class UploadError(Exception):
    """A 4xx answer to an upload; the route turns it into `{"detail": ...}`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass
class Part:
    """One multipart part: its headers while they arrive, then its name, file name and bytes."""

    headers: dict[str, bytes] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    chunks: list[bytes] = field(default_factory=list)
    _field: bytes = b""
    _value: bytes = b""


def _decode(raw: bytes) -> str:
    """Like starlette: UTF-8, else Latin-1 (a header's bytes are never an error)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class _Collector:
    """python-multipart callbacks that collect complete parts (an unterminated last part is dropped)."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.current = Part()

    def on_part_begin(self) -> None:
        self.current = Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.current._field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.current._value += data[start:end]

    def on_header_end(self) -> None:
        part = self.current
        part.headers[part._field.decode("latin-1").lower()] = part._value
        part._field, part._value = b"", b""

    def on_headers_finished(self) -> None:
        part = self.current
        _, options = parse_options_header(part.headers.get("content-disposition"))
        if b"name" not in options:
            raise UploadError(400, 'malformed multipart body: a part has no Content-Disposition "name"')
        part.name = _decode(options[b"name"])
        part.filename = _decode(options[b"filename"]) if b"filename" in options else None

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        self.current.chunks.append(data[start:end])

    def on_part_end(self) -> None:
        self.parts.append(self.current)
        if len(self.parts) > MAX_PARTS:
            raise UploadError(400, f"too many parts in the multipart body (at most {MAX_PARTS})")


def parse_parts(body: bytes, content_type: str) -> list[Part]:
    """The complete parts of a multipart/form-data body; [] for any other content type."""
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        return []
    boundary = options.get(b"boundary")
    if not boundary:
        raise UploadError(400, "malformed multipart body: the Content-Type has no boundary")
    collector = _Collector()
    callbacks = {name: getattr(collector, name) for name in dir(collector) if name.startswith("on_")}
    try:
        parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
        parser.write(body)
        parser.finalize()
    except MultipartParseError as exc:
        raise UploadError(400, f"malformed multipart body: {exc}") from None
    return collector.parts


def store_file(store: FileStore, filename: str | None, data: bytes, limit: int | None) -> str:
    """Write one uploaded file into the store (size and name checked first); its path."""
    if limit is not None and len(data) > limit:
        raise UploadError(413, f"file {filename!r} is {len(data)} bytes; max_file_size is {limit}")
    try:
        return store.put_upload(filename or "file", data)
    except ValueError as exc:
        raise UploadError(400, str(exc)) from None


def save_uploads(body: bytes, content_type: str, store: FileStore, limit: int | None) -> list[str]:
    """Parse a multipart body and store every file of the field `files` (runs in a worker thread)."""
    parts = [(p.name, p.filename, b"".join(p.chunks)) for p in parse_parts(body, content_type)]
    return store_parts(parts, store, limit)


def store_parts(parts: list[tuple[str, str | None, bytes]], store: FileStore, limit: int | None) -> list[str]:
    """Store every file of the field `files` among (field name, file name, bytes) parts; their paths."""
    paths = []
    for name, filename, data in parts:
        if name != "files":
            continue
        if filename is None:
            raise UploadError(422, "field 'files' must be a file upload")
        paths.append(store_file(store, filename, data, limit))
    if not paths:
        raise UploadError(422, "no files in the multipart field 'files'")
    return paths
