"""Component wire formats: what /config and /info say about each component, and (pre|post)processing.

Workloads see Python values (str, float, PIL image, (sr, ndarray), JSON values); the wire carries
strings, numbers and FileData dicts `{"path", "url", "orig_name", "meta": {"_type": "gradio.FileData"}}`.
`preprocess` turns a wire value into the workload value and raises WorkloadInputError for anything it
cannot use (that request fails, the server keeps serving); `postprocess` does the reverse.
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import os
import re
import threading
import uuid
import wave
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reference_server.io.ids import random_hex
from reference_server.workloads.base import Component, ComponentType, WorkloadInputError

FILE_META = {"_type": "gradio.FileData"}
MAX_NAME_BYTES = 200  # gradio_client.utils.strip_invalid_filename_characters' limit
_FORBIDDEN = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f`$!{}]')  # Gradio's set: separators, NUL, controls, shell

_OPT_STR = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
FILE_DATA_SCHEMA: dict[str, Any] = {
    "title": "FileData",
    "type": "object",
    "properties": {
        "path": {"type": "string", "title": "Path", "description": "server path returned by /upload"},
        "url": {**_OPT_STR, "title": "Url"},
        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "Size"},
        "orig_name": {**_OPT_STR, "title": "Orig Name"},
        "mime_type": {**_OPT_STR, "title": "Mime Type"},
        "is_stream": {"type": "boolean", "default": False, "title": "Is Stream"},
        "meta": {"type": "object", "default": FILE_META, "title": "Meta", "additionalProperties": True},
    },
    "required": ["path"],
}
LABEL_SCHEMA: dict[str, Any] = {
    "title": "LabelData",
    "type": "object",
    "properties": {
        "label": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}], "default": None},
        "confidences": {
            "anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}],
            "default": None,
        },
    },
}


@dataclass(frozen=True)
class WireType:
    """How one component kind appears in /config and /info."""

    gradio_type: str  # config components[].type
    class_name: str  # /info "component"
    api_info: dict[str, Any]
    python_type: str
    example: Any


WIRE_TYPES: dict[ComponentType, WireType] = {
    "text": WireType("textbox", "Textbox", {"type": "string"}, "str", "Hello!!"),
    "number": WireType("number", "Number", {"type": "number"}, "float", 3),
    "image": WireType("image", "Image", FILE_DATA_SCHEMA, "filepath", None),
    "audio": WireType("audio", "Audio", FILE_DATA_SCHEMA, "filepath", None),
    "json": WireType("json", "Json", {"type": {}, "description": "any valid json"}, "Any", {"foo": "bar"}),
    "label": WireType("label", "Label", LABEL_SCHEMA, "Dict(label: str, confidences: list)", None),
}


def component_config(comp_id: int, comp: Component) -> dict[str, Any]:
    """One entry of /config `components[]`."""
    wire = WIRE_TYPES[comp.type]
    return {
        "id": comp_id,
        "type": wire.gradio_type,
        "props": {"label": comp.label, "show_label": True, "visible": True, "name": wire.gradio_type},
        "skip_api": False,
        "key": None,
        "api_info": wire.api_info,
        "api_info_as_input": wire.api_info,
        "api_info_as_output": wire.api_info,
        "example_inputs": comp.example if comp.example is not None else wire.example,
    }


def parameter_info(comp: Component, position: int) -> dict[str, Any]:
    """One entry of /info `parameters[]`."""
    wire = WIRE_TYPES[comp.type]
    name = comp.label.lower().replace(" ", "_") or f"param_{position}"
    return {
        "label": comp.label,
        "parameter_name": name if name.isidentifier() else f"param_{position}",
        "parameter_has_default": False,
        "parameter_default": None,
        "type": wire.api_info,
        "python_type": {"type": wire.python_type, "description": ""},
        "component": wire.class_name,
        "example_input": comp.example if comp.example is not None else wire.example,
    }


def return_info(comp: Component) -> dict[str, Any]:
    """One entry of /info `returns[]`."""
    wire = WIRE_TYPES[comp.type]
    return {
        "label": comp.label,
        "type": wire.api_info,
        "python_type": {"type": wire.python_type, "description": ""},
        "component": wire.class_name,
    }


def needs_thread(comps: list[Component]) -> bool:
    """True if (pre|post)processing does file I/O or decoding worth moving off the event loop."""
    return any(c.type in ("image", "audio") for c in comps)


class FileStore:
    """Where uploads and outputs live; the only places /file= serves from.

    Uploads are kept in memory, up to `memory_budget` bytes in all: a request's image is uploaded,
    then read once by its event, and a write and read-back of a file per request cost the server's
    process more than the rest of the upload. Each keeps the path Gradio would give it (`uploads/<hex>/
    <name>`, what the client sends back); beyond the budget the oldest are written to that path, so
    nothing is lost and /file= serves both. A budget of 0 writes every upload (Gradio's behaviour).
    """

    def __init__(self, root: Path, memory_budget: int = 0) -> None:
        self.root = root.resolve()
        self.uploads = self.root / "uploads"
        self.outputs = self.root / "outputs"
        self.uploads.mkdir(parents=True, exist_ok=True)
        self.outputs.mkdir(parents=True, exist_ok=True)
        self.memory_budget = memory_budget
        self.memory: OrderedDict[str, bytes] = OrderedDict()  # upload path -> bytes, oldest first
        self.memory_bytes = 0
        self.decoded: OrderedDict[str, Any] = OrderedDict()  # upload path -> its image, decoded ahead
        self.decoded_bytes = 0
        self._lock = threading.Lock()

    def keep_decoded(self, path: str, decoded: Any, size: int) -> None:
        """An upload's image decoded ahead (decode_pool.parse_upload), until its event takes it; the
        oldest are dropped beyond the memory budget (their bytes stay: they decode again when used)."""
        with self._lock:
            self.decoded[path] = (decoded, size)
            self.decoded_bytes += size
            while self.decoded_bytes > self.memory_budget and self.decoded:
                _, (_, dropped) = self.decoded.popitem(last=False)
                self.decoded_bytes -= dropped

    def take_decoded(self, path_or_url: str) -> Any:
        """The upload's image decoded ahead, once (None if it was not, or was taken already)."""
        text = path_or_url.split("/file=", 1)[1] if "/file=" in path_or_url else path_or_url
        with self._lock:
            entry = self.decoded.pop(os.path.normpath(text), None) if text else None
            if entry is None:
                return None
            self.decoded_bytes -= entry[1]
            return entry[0]

    def put_upload(self, filename: str, data: bytes) -> str:
        """Keep one uploaded file (in memory when it fits the budget); its path. ValueError for a name
        that is only `..` (Gradio: 400)."""
        name = upload_name(filename)
        if name == "..":
            raise ValueError(f"invalid file name: {filename!r:.120}")
        path = os.path.join(self.uploads, random_hex(), name)  # str(Path / ...): os.path is cheaper
        if not self.memory_budget or len(data) > self.memory_budget:
            _write(Path(path), data)
            return path
        with self._lock:
            self.memory[path] = data
            self.memory_bytes += len(data)
            spill = []
            while self.memory_bytes > self.memory_budget:
                old_path, old = self.memory.popitem(last=False)
                self.memory_bytes -= len(old)
                spill.append((old_path, old))
        for old_path, old in spill:
            _write(Path(old_path), old)
        return path

    def in_memory(self, path_or_url: str) -> bytes | None:
        """An upload's bytes while they are kept in memory, else None."""
        text = path_or_url.split("/file=", 1)[1] if "/file=" in path_or_url else path_or_url
        with self._lock:
            return self.memory.get(os.path.normpath(text)) if text else None

    def read(self, path_or_url: str) -> bytes | None:
        """The bytes of an upload or output of this store (memory first), else None."""
        data = self.in_memory(path_or_url)
        if data is not None:
            return data
        path = self.resolve(path_or_url)
        return None if path is None else path.read_bytes()

    def new_upload_path(self, filename: str) -> Path:
        """A fresh `uploads/<hex>/<name>`; ValueError for a name that is only `..` (Gradio: 400)."""
        name = upload_name(filename)
        if name == "..":
            raise ValueError(f"invalid file name: {filename!r:.120}")
        folder = self.uploads / uuid.uuid4().hex
        folder.mkdir()
        return folder / name

    def resolve(self, path_or_url: str) -> Path | None:
        """Map a FileData path (absolute, or a /file= URL) to a file inside the store, else None."""
        text = path_or_url.split("/file=", 1)[1] if "/file=" in path_or_url else path_or_url
        try:
            path = Path(text).resolve()
            inside = path.is_relative_to(self.root) and path.is_file()
        except (OSError, ValueError):  # a NUL, a name too long for the file system...
            return None
        return path if inside else None

    def save_output(self, data: bytes, suffix: str) -> dict[str, Any]:
        folder = self.outputs / uuid.uuid4().hex
        folder.mkdir()
        path = folder / f"output{suffix}"
        path.write_bytes(data)
        return {
            "path": str(path),
            "url": f"/gradio_api/file={path}",
            "size": len(data),
            "orig_name": path.name,
            "mime_type": None,
            "is_stream": False,
            "meta": FILE_META,
        }


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@functools.lru_cache(maxsize=1024)  # a pure function of the name; clients send the same few names
def upload_name(filename: str) -> str:
    """The stored name of an uploaded file, as Gradio builds it: the last path segment without forbidden
    characters (separators, NUL, controls), trailing dots and spaces stripped, cut to 200 UTF-8 bytes
    keeping the extension when it fits; `file` when nothing is left. Only `..` survives as a bad name."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    base = base.encode("utf-8", "replace").decode()  # lone surrogates cannot name a file
    stem, ext = os.path.splitext(base)
    stem, ext = _FORBIDDEN.sub("", stem), _FORBIDDEN.sub("", ext)
    if stem + ext == "..":
        return ".."
    name = (stem + ext).rstrip(" .") or "file"
    stem, ext = os.path.splitext(name)
    while len(name.encode()) > MAX_NAME_BYTES and stem:
        stem = stem[:-1]
        name = stem + ext
    if not stem:  # the extension alone is too long: keep a stem, cut the extension
        name = ("file" + ext).encode()[:MAX_NAME_BYTES].decode("utf-8", "ignore")
    return name or "file"


def file_bytes(value: Any, store: FileStore, label: str) -> bytes:
    """The bytes behind a FileData dict, a server path, or a base64 data: URL."""
    ref = file_ref(value, label)
    if ref.startswith("data:"):
        try:
            return base64.b64decode(ref.split(",", 1)[1], validate=False)
        except (IndexError, binascii.Error) as exc:
            raise WorkloadInputError(f"input {label!r}: malformed data: URL ({exc})") from None
    data = store.read(ref)
    if data is None:
        raise WorkloadInputError(f"input {label!r}: file {ref!r:.120} was not uploaded to this server")
    return data


def file_ref(value: Any, label: str) -> str:
    """The path or URL a FileData dict (or a bare string) names; WorkloadInputError if none."""
    ref = value.get("path") or value.get("url") if isinstance(value, dict) else value
    if not isinstance(ref, str) or not ref:
        raise WorkloadInputError(f"input {label!r}: expected FileData with a 'path', got {value!r:.80}")
    return ref


def _decode_image(raw: bytes, label: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(raw))
        img.load()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise WorkloadInputError(f"input {label!r}: not a readable image ({exc})") from None
    return img.convert("RGB")


def _decode_wav(raw: bytes, label: str) -> tuple[int, np.ndarray]:
    try:
        with wave.open(io.BytesIO(raw)) as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise WorkloadInputError(f"input {label!r}: not a readable WAV file ({exc})") from None
    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}.get(width)
    if dtype is None:
        raise WorkloadInputError(f"input {label!r}: unsupported WAV sample width {width} bytes")
    samples = np.frombuffer(frames, dtype=dtype).astype(np.float32)
    if width == 1:
        samples = (samples - 128.0) / 128.0
    else:
        samples /= float(2 ** (8 * width - 1))
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return rate, samples


def preprocess(comp: Component, value: Any, store: FileStore) -> Any:
    """Wire value -> workload value; WorkloadInputError on anything unusable."""
    if comp.type == "text":
        if not isinstance(value, str):
            raise WorkloadInputError(f"input {comp.label!r}: expected a string, got {type(value).__name__}")
        return value
    if comp.type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise WorkloadInputError(f"input {comp.label!r}: expected a number, got {value!r:.80}")
        return float(value)
    if comp.type == "image":
        return _decode_image(file_bytes(value, store, comp.label), comp.label)
    if comp.type == "audio":
        return _decode_wav(file_bytes(value, store, comp.label), comp.label)
    return value


def _encode_wav(value: Any) -> bytes:
    rate, samples = value
    pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767).astype(np.int16)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(rate))
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def postprocess(comp: Component, value: Any, store: FileStore) -> Any:
    """Workload value -> wire value (files are saved in the store and returned as FileData)."""
    if value is None:
        return None
    if comp.type == "image":
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return store.save_output(buf.getvalue(), ".png")
    if comp.type == "audio":
        return store.save_output(_encode_wav(value), ".wav")
    if comp.type == "number" and isinstance(value, (np.integer, np.floating)):
        return value.item()
    if comp.type == "label":
        return label_value(value)
    return value


def label_value(value: Any) -> dict[str, Any]:
    """Gradio's Label format from a ready dict, a {class: confidence} mapping, or a bare class name."""
    if isinstance(value, dict) and set(value) <= {"label", "confidences"}:
        return value
    if isinstance(value, dict):
        ranked = sorted(value.items(), key=lambda kv: float(kv[1]), reverse=True)
        confidences = [{"label": str(k), "confidence": float(v)} for k, v in ranked]
        return {"label": confidences[0]["label"] if confidences else None, "confidences": confidences}
    return {"label": str(value)}
