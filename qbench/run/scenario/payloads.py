"""Request inputs from the scenario's `payload` section: `PayloadGenerator.inputs(request_id)` -> one value
per input spec (str, number, JSON value or `FileValue`), seeded, from `payload.variants` cached variants."""

from __future__ import annotations

import io
import struct
import time
import wave
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from qbench.errors import ScenarioError
from qbench.run.scenario.input_specs import (
    AudioSpec,
    ChatSpec,
    ChoiceSpec,
    FileSpec,
    FilesSpec,
    ImageSpec,
    InputSpec,
    NumberSpec,
    TextSpec,
)
from qbench.run.scenario.schema import Payload, is_file_ref

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven small birds sing in green trees near "
    "river stone bridge under bright morning light people walk slowly along narrow streets with old "
    "houses painted red blue yellow white children laugh play games run past tall windows open doors "
    "market sells fresh bread cheese apples oranges coffee tea warm soup cold water sweet honey salt "
    "model server queue request batch latency token image audio text signal noise photo picture sound "
    "voice music story letter number table chair garden window mountain ocean cloud rain snow wind"
).split()

MIME = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "webp": "image/webp",
        "wav": "audio/wav", "txt": "text/plain", "csv": "text/csv", "json": "application/json",
        "md": "text/markdown", "zip": "application/zip", "obj": "model/obj", "mp4": "video/mp4",
        "gif": "image/gif", "mp3": "audio/mpeg", "pdf": "application/pdf", "avi": "video/x-msvideo"}


SHARED_BYTES = 256 * 2**20  # the most a process keeps of generated variants across runs (least recent out)


class _Shared:
    """Generated variants by (payload JSON, variant), shared by a process's runs, bounded in bytes."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[str, int], tuple[list[Any], int]] = OrderedDict()
        self.total = 0  # the bytes `entries` holds

    def get(self, key: tuple[str, int]) -> list[Any] | None:
        hit = self.entries.get(key)
        if hit is None:
            return None
        self.entries.move_to_end(key)
        return hit[0]

    def put(self, key: tuple[str, int], values: list[Any]) -> None:
        size = sum(_size(v) for v in values)
        old = self.entries.pop(key, None)
        self.entries[key] = (values, size)
        self.total += size - (old[1] if old else 0)
        while self.total > SHARED_BYTES and len(self.entries) > 1:
            self.total -= self.entries.popitem(last=False)[1][1]


_shared = _Shared()


def _size(value: Any) -> int:
    if isinstance(value, FileValue):
        return len(value.data)
    if isinstance(value, list):
        return sum(_size(v) for v in value)
    return len(value) if isinstance(value, str | bytes) else 64


@dataclass(frozen=True)
class FileValue:
    """A file input: uploaded (gradio FileData) or base64-embedded (http)."""

    data: bytes
    name: str
    mime: str


class PayloadGenerator:
    """inputs(request_id) -> one value per input spec (variant request_id % variants); the same for a seed."""

    def __init__(self, payload: Payload, fixed: Callable[[int], list[Any] | None] | None = None) -> None:
        self.payload = payload
        self.fixed = fixed  # request id -> inputs given by a trace line (None: generate them)
        self._cache: dict[int, list[Any]] = {}
        self._prompts = [_read_prompts(s.text.file) for s in payload.inputs if s.text and s.text.file]
        self._files = [_list_files(s.files) for s in payload.inputs if s.files]
        self._tokenizers = {s.text.tokenizer: load_tokenizer(s.text.tokenizer)
                            for s in payload.inputs if s.text and s.text.tokenizer}
        self._examples = {i: [_example_value(v, i) for v in s.example.values]
                          for i, s in enumerate(payload.inputs) if s.example is not None}
        self.generation_s = 0.0  # CPU-ish wall time spent generating (reported in run.json)
        generated_only = not any(s.text and s.text.file or s.files or s.example is not None
                                 for s in payload.inputs)
        self._key = payload.model_dump_json() if generated_only else None  # shared across runs when set

    def inputs(self, request_id: int) -> list[Any]:
        if self.fixed is not None and (given := self.fixed(request_id)) is not None:
            return given
        variant = request_id % self.payload.variants
        values = self._cache.get(variant)
        if values is None and self._key is not None:
            values = _shared.get((self._key, variant))
        if values is None:
            start = time.perf_counter()
            values = self._generate(variant)
            self.generation_s += time.perf_counter() - start
            if self._key is not None:
                _shared.put((self._key, variant), values)
        if variant not in self._cache:
            self._cache[variant] = values
        return values

    def prepare(self, count: int) -> None:
        """Generate the first `count` variants now (before the clock starts)."""
        for i in range(min(count, self.payload.variants)):
            self.inputs(i)

    def _generate(self, variant: int) -> list[Any]:
        rng = np.random.default_rng([self.payload.seed, variant])
        prompts, files = iter(self._prompts), iter(self._files)
        values: list[Any] = []
        for i, spec in enumerate(self.payload.inputs):
            if spec.example is not None:  # rows of the app's examples stay together (not random)
                rows = self._examples[i]
                values.append(rows[variant % len(rows)])
                continue
            values.append(_one(spec, rng, f"{variant}-{i}", prompts, files, self._tokenizers))
        return values

    def stats(self) -> dict[str, Any]:
        return {"variants_generated": len(self._cache), "generation_s": self.generation_s}


def _one(spec: InputSpec, rng: np.random.Generator, tag: str, prompts: Any, files: Any,
         tokenizers: dict[str, Any]) -> Any:
    if spec.text is not None:
        return gen_text(spec.text, rng, next(prompts) if spec.text.file else None,
                        tokenizers.get(spec.text.tokenizer or ""))
    if spec.image is not None:
        return gen_image(spec.image, rng, tag)
    if spec.audio is not None:
        return gen_audio(spec.audio, rng, tag)
    if spec.number is not None:
        return gen_number(spec.number, rng)
    if spec.files is not None:
        return pick_file(next(files), rng)
    if spec.choice is not None:
        return gen_choice(spec.choice, rng)
    if spec.boolean is not None:
        return bool(rng.random() < spec.boolean.true_share)
    if spec.chat is not None:
        return gen_chat(spec.chat, rng)
    if spec.file is not None:
        return gen_files(spec.file, rng, tag)
    if spec.kind == "json":
        return fill_template(spec.json_, rng)
    return spec.value


def gen_text(spec: TextSpec, rng: np.random.Generator, prompts: list[str] | None = None,
             tokenizer: Any = None) -> str | list[dict[str, str]]:
    """One prompt; with `turns`, a chat: a list of {role, content} messages ending with the user's."""
    if prompts:
        return prompts[int(rng.integers(len(prompts)))]
    if spec.turns is None:
        return _words_or_tokens(spec, rng, tokenizer)
    users = int(rng.integers(spec.turns[0], spec.turns[1] + 1))
    roles = ["user", "assistant"] * (users - 1) + ["user"]
    return [{"role": role, "content": _words_or_tokens(spec, rng, tokenizer)} for role in roles]


def _words_or_tokens(spec: TextSpec, rng: np.random.Generator, tokenizer: Any) -> str:
    if spec.tokens is None:
        n = int(rng.integers(spec.words[0], spec.words[1] + 1))
        return " ".join(WORDS[int(i)] for i in rng.integers(len(WORDS), size=n))
    n = int(rng.integers(spec.tokens[0], spec.tokens[1] + 1))
    words: list[str] = []
    ids: list[int] = []
    while len(ids) < n:  # grow by the shortfall (words are >= 1 token each), then cut at n tokens
        words.extend(WORDS[int(i)] for i in rng.integers(len(WORDS), size=n - len(ids)))
        ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]
    return str(tokenizer.decode(ids[:n]))


def load_tokenizer(name: str) -> Any:
    """A tokenizer from a local folder or the local Hugging Face cache (never downloaded)."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ScenarioError(
            f"payload text tokenizer {name!r}: not a local tokenizer folder nor a model in the local Hugging "
            f"Face cache (qbench downloads nothing; save one with tokenizer.save_pretrained(DIR)): "
            f"{str(exc).splitlines()[0][:200]}"
        ) from None


def gen_image(spec: ImageSpec, rng: np.random.Generator, tag: str) -> FileValue:
    from PIL import Image

    pixels = _photo(spec, rng) if spec.content == "photo" else _noise(spec, rng)
    image = Image.fromarray(pixels, "RGB")
    buf = io.BytesIO()
    options = {"quality": spec.quality} if spec.format in ("jpeg", "webp") else {}
    image.save(buf, format=spec.format.upper(), **options)
    return FileValue(buf.getvalue(), f"image-{tag}.{spec.format}", MIME[spec.format])


def _noise(spec: ImageSpec, rng: np.random.Generator) -> np.ndarray:
    """A colour gradient under Gaussian noise (sigma 12): incompressible, the worst case."""
    y, x = np.mgrid[0 : spec.height, 0 : spec.width].astype(np.float32)
    base = rng.uniform(0, 255, size=3).astype(np.float32)
    slope = rng.uniform(-1, 1, size=(3, 2)).astype(np.float32)
    chans = [base[c] + slope[c, 0] * x + slope[c, 1] * y for c in range(3)]
    pixels = np.stack(chans, axis=-1) + rng.normal(0, 12, size=(spec.height, spec.width, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def _photo(spec: ImageSpec, rng: np.random.Generator) -> np.ndarray:
    """Photo-like statistics: a 1/f^1.4 random field, sharp-edged shapes over it, fine sensor noise."""
    from PIL import Image, ImageDraw

    w, h = spec.width, spec.height
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    amplitude = np.maximum(np.hypot(fx, fy), 1.0 / max(w, h)) ** -1.4
    channels = []
    for _ in range(3):
        phase = rng.uniform(0, 2 * np.pi, size=amplitude.shape)
        field = np.fft.irfft2(amplitude * np.exp(1j * phase), s=(h, w))
        channels.append(field / (field.std() or 1.0))
    mean = rng.uniform(60, 200, size=3)
    base = np.stack(channels, axis=-1) * 35 + mean
    image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(4, 10))):
        x0, x1 = sorted(rng.uniform(-0.2, 1.2, size=2) * w)
        y0, y1 = sorted(rng.uniform(-0.2, 1.2, size=2) * h)
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape([x0, y0, max(x1, x0 + 1), max(y1, y0 + 1)], outline=colour, width=max(1, w // 100))
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, 1.5, size=(h, w, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def gen_audio(spec: AudioSpec, rng: np.random.Generator, tag: str) -> FileValue:
    t = np.arange(int(spec.seconds * spec.sample_rate), dtype=np.float64) / spec.sample_rate
    freqs = rng.uniform(110, 1760, size=3)
    signal = sum(np.sin(2 * np.pi * f * t) for f in freqs) / 3 + rng.normal(0, 0.05, size=t.size)
    samples = (np.clip(signal, -1, 1) * 32767 * 0.8).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(spec.sample_rate)
        wav.writeframes(samples.tobytes())
    return FileValue(buf.getvalue(), f"audio-{tag}.wav", MIME["wav"])


def gen_number(spec: NumberSpec, rng: np.random.Generator) -> float | int:
    if spec.step is not None:
        steps = int((spec.max - spec.min) / spec.step + 1e-9)
        value = spec.min + int(rng.integers(steps + 1)) * spec.step
        value = min(round(value, 12), spec.max)  # 0.1 * 3 is 0.30000000000000004
        return int(round(value)) if spec.integer or _whole(spec.min, spec.step) else value
    if spec.integer:
        return int(rng.integers(int(spec.min), int(spec.max) + 1))
    return float(rng.uniform(spec.min, spec.max))


def _whole(*numbers: float) -> bool:
    return all(float(n).is_integer() for n in numbers)


def gen_choice(spec: ChoiceSpec, rng: np.random.Generator) -> Any:
    """One value, or with `pick` a list of distinct values in their declared order."""
    if spec.pick is None:
        return spec.values[int(rng.integers(len(spec.values)))]
    count = int(rng.integers(spec.pick[0], spec.pick[1] + 1))
    chosen = sorted(rng.choice(len(spec.values), size=count, replace=False).tolist())
    return [spec.values[i] for i in chosen]


def gen_chat(spec: ChatSpec, rng: np.random.Generator) -> list[Any]:
    """Earlier turns of a conversation: [{role, content}, ...] or [[user, assistant], ...]."""
    turns = int(rng.integers(spec.turns[0], spec.turns[1] + 1))
    text = TextSpec(words=spec.words)
    pairs = [(_words_or_tokens(text, rng, None), _words_or_tokens(text, rng, None)) for _ in range(turns)]
    if spec.format == "tuples":
        return [[user, bot] for user, bot in pairs]
    messages = [(role, text) for user, bot in pairs for role, text in (("user", user), ("assistant", bot))]
    if spec.format == "parts":
        return [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in messages]
    return [{"role": role, "content": text} for role, text in messages]


def gen_files(spec: FileSpec, rng: np.random.Generator, tag: str) -> FileValue | list[FileValue]:
    """A file of about `kb` KiB (or `count` of them) whose content fits its suffix (`FILE_CONTENT`)."""
    def one(n: int) -> FileValue:
        size = int(rng.uniform(spec.kb[0], spec.kb[1]) * 1024)
        suffix = spec.suffix.lower()
        data = file_bytes(suffix, size, rng)
        mime = MIME.get(suffix.lstrip("."), "application/octet-stream")
        return FileValue(data, f"file-{tag}-{n}{spec.suffix}", mime)

    if spec.count is None:
        return one(0)
    return [one(n) for n in range(int(rng.integers(spec.count[0], spec.count[1] + 1)))]


def _text_bytes(size: int, rng: np.random.Generator) -> bytes:
    words = " ".join(WORDS[int(i)] for i in rng.integers(len(WORDS), size=size // 4 + 1))
    return "\n".join(words[k : k + 79] for k in range(0, size, 80)).encode()[:size]


def _zip_bytes(size: int, rng: np.random.Generator) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(3):
            archive.writestr(f"file-{n}.txt", _text_bytes(max(size // 3, 1), rng))
    return buf.getvalue()


def _csv_bytes(size: int, rng: np.random.Generator) -> bytes:
    rows, total = ["name,value,count"], 0
    while total < size:
        word = WORDS[int(rng.integers(len(WORDS)))]
        rows.append(f"{word},{rng.uniform(0, 100):.3f},{int(rng.integers(0, 1000))}")
        total += len(rows[-1]) + 1
    return ("\n".join(rows) + "\n").encode()


def _json_bytes(size: int, rng: np.random.Generator) -> bytes:
    items, total = [], 0
    while total < size:
        word = WORDS[int(rng.integers(len(WORDS)))]
        items.append(orjson.dumps({"word": word, "value": int(rng.integers(1000))}))
        total += len(items[-1]) + 1
    return b"[" + b",".join(items) + b"]"


def _obj_bytes(size: int, rng: np.random.Generator) -> bytes:
    lines = []
    count = max(size // 120, 1)
    for n in range(count):
        for _ in range(3):
            x, y, z = rng.uniform(-1, 1, size=3)
            lines.append(f"v {x:.4f} {y:.4f} {z:.4f}")
        lines.append(f"f {3 * n + 1} {3 * n + 2} {3 * n + 3}")
    return ("\n".join(lines) + "\n").encode()


def _png_bytes(size: int, rng: np.random.Generator) -> bytes:
    return gen_image(ImageSpec.model_validate({"width": 64, "height": 64, "format": "png"}), rng, "f").data


def _jpeg_bytes(size: int, rng: np.random.Generator) -> bytes:
    return gen_image(ImageSpec.model_validate({"width": 64, "height": 64, "format": "jpeg"}), rng, "f").data


def _wav_bytes(size: int, rng: np.random.Generator) -> bytes:
    return gen_audio(AudioSpec.model_validate({"seconds": 0.5, "sample_rate": 16000}), rng, "f").data


def _avi_bytes(size: int, rng: np.random.Generator) -> bytes:
    """One second of 64x64 motion-JPEG at 10 frames/s in an AVI container."""
    frame = ImageSpec.model_validate({"width": 64, "height": 64, "format": "jpeg"})
    frames = [gen_image(frame, rng, "f").data for _ in range(10)]
    return avi_mjpeg(frames, width=64, height=64, fps=10)


def avi_mjpeg(frames: list[bytes], width: int, height: int, fps: int) -> bytes:
    """JPEG frames in an AVI 1.0 (RIFF) file."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return tag + struct.pack("<I", len(data)) + data + b"\0" * (len(data) % 2)

    def lst(kind: bytes, data: bytes) -> bytes:
        return chunk(b"LIST", kind + data)

    biggest = max(len(f) for f in frames)
    avih = struct.pack("<10I4I", 1_000_000 // fps, biggest * fps, 0, 0x10, len(frames), 0, 1, biggest,
                       width, height, 0, 0, 0, 0)
    strh = struct.pack("<4s4sIHHIIIIIIII4h", b"vids", b"MJPG", 0, 0, 0, 0, 1, fps, 0, len(frames), biggest,
                       0xFFFFFFFF, 0, 0, 0, width, height)
    strf = struct.pack("<IiiHH4sIiiII", 40, width, height, 1, 24, b"MJPG", width * height * 3, 0, 0, 0, 0)
    hdrl = lst(b"hdrl", chunk(b"avih", avih) + lst(b"strl", chunk(b"strh", strh) + chunk(b"strf", strf)))
    movi, index, offset = b"", b"", 4  # offsets count from the 'movi' fourcc
    for frame in frames:
        index += struct.pack("<4sIII", b"00dc", 0x10, offset, len(frame))  # 0x10: a key frame
        data = chunk(b"00dc", frame)
        movi += data
        offset += len(data)
    body = b"AVI " + hdrl + lst(b"movi", movi) + chunk(b"idx1", index)
    return b"RIFF" + struct.pack("<I", len(body)) + body


#: File content by suffix (others: lines of random words); an image or a sound ignores the size.
FILE_CONTENT: dict[str, Callable[[int, np.random.Generator], bytes]] = {
    ".zip": _zip_bytes, ".csv": _csv_bytes, ".json": _json_bytes, ".obj": _obj_bytes, ".png": _png_bytes,
    ".jpg": _jpeg_bytes, ".jpeg": _jpeg_bytes, ".wav": _wav_bytes, ".avi": _avi_bytes}


def file_bytes(suffix: str, size: int, rng: np.random.Generator) -> bytes:
    """About `size` bytes whose content fits `suffix` (lowercase, with its dot)."""
    return FILE_CONTENT.get(suffix, _text_bytes)(size, rng)


def pick_file(paths: list[Path], rng: np.random.Generator) -> FileValue:
    path = paths[int(rng.integers(len(paths)))]
    mime = MIME.get(path.suffix.lstrip(".").lower(), "application/octet-stream")
    return FileValue(path.read_bytes(), path.name, mime)


def fill_template(template: Any, rng: np.random.Generator) -> Any:
    """Copy a JSON template with "{word}", "{words}" (5 to 20), "{int}" and "{float}" filled in at random."""
    if isinstance(template, dict):
        return {k: fill_template(v, rng) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, rng) for v in template]
    if template == "{word}":
        return WORDS[int(rng.integers(len(WORDS)))]
    if template == "{words}":
        return " ".join(WORDS[int(i)] for i in rng.integers(len(WORDS), size=int(rng.integers(5, 21))))
    if template == "{int}":
        return int(rng.integers(0, 1000))
    if template == "{float}":
        return float(rng.random())
    return template


def _example_value(value: Any, index: int) -> Any:
    """An `example` value as sent: `{file: PATH}` is that file's bytes (an upload), the rest as is."""
    if not is_file_ref(value):
        return value
    path = Path(value["file"])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"payload.inputs.{index}.example.values: value {{file: '{path}'}}: cannot read "
                            f"({exc.strerror})") from None
    return FileValue(data, path.name, MIME.get(path.suffix.lstrip(".").lower(), "application/octet-stream"))


def _read_prompts(path: Path | None) -> list[str]:
    assert path is not None
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except OSError as exc:
        raise ScenarioError(f"payload text file {path}: cannot read ({exc.strerror})") from exc
    except ValueError as exc:  # not UTF-8 text, or a NUL in the path
        raise ScenarioError(f"payload text file {path!r}: cannot read ({exc})") from None
    prompts = [ln for ln in lines if ln]
    if not prompts:
        raise ScenarioError(f"payload text file {path}: expected one prompt per line, found none")
    return prompts


def _list_files(spec: FilesSpec) -> list[Path]:
    try:
        paths = sorted(p for p in spec.dir.glob(spec.pattern) if p.is_file())
    except (ValueError, NotImplementedError, OSError) as exc:  # '' or an absolute pattern, a NUL...
        raise ScenarioError(
            f"payload files: key 'pattern': value {spec.pattern!r}: expected a relative glob ({exc})"
        ) from None
    if not paths:
        raise ScenarioError(f"payload files: key 'dir': value '{spec.dir}': no files match '{spec.pattern}'")
    return paths
