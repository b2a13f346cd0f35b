"""One input's generator, as a scenario's `payload.inputs` entry names it: `{text: {words: [5, 20]}}`,
`{image: ...}`, `{choice: ...}`, one kind per input (`InputSpec`); qbench.run.scenario.payloads makes
the values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

MAX_WORDS = 100_000  # per generated text
MAX_CHOICES = 10_000
MAX_TURNS = 1_000
MAX_FILE_KB = 1_048_576  # 1 GiB
INPUT_KINDS = ("text", "image", "audio", "number", "json", "files", "value",
               "choice", "boolean", "chat", "file", "example")


class _Model(BaseModel):
    # No inf/nan anywhere: every float is a duration, rate, size or bound that must be a real number.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TextSpec(_Model):
    """Random words (a count in `words`), a `file`'s lines, or `tokens` under a `tokenizer`; `turns`: chat."""

    words: tuple[int, int] = (5, 20)
    file: Path | None = None
    tokens: tuple[int, int] | None = None
    tokenizer: str | None = None
    turns: tuple[int, int] | None = None

    @field_validator("words", "tokens", "turns")
    @classmethod
    def _range(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None and (v[0] < 1 or v[1] < v[0] or v[1] > MAX_WORDS):
            raise ValueError(f"expected [min, max] counts with 1 <= min <= max <= {MAX_WORDS:,}")
        return v

    @model_validator(mode="after")
    def _tokens_need_a_tokenizer(self) -> TextSpec:
        if self.tokens is not None and self.tokenizer is None:
            raise ValueError("tokens: [min, max] needs tokenizer: a local tokenizer folder or a cached "
                             "model name (e.g. the served model's); use words: [min, max] for an "
                             "untokenized length")
        if self.file is not None and (self.tokens is not None or self.turns is not None):
            raise ValueError("file: sends the file's lines as they are; drop tokens/turns, or drop file")
        return self


class ImageSpec(_Model):
    """A generated `photo` (compresses like one) or `noise` (incompressible) in `format`, at `quality`."""

    width: int = Field(224, ge=1, le=8192)
    height: int = Field(224, ge=1, le=8192)
    format: Literal["png", "jpeg", "webp"] = "png"
    content: Literal["photo", "noise"] = "photo"
    quality: int = Field(85, ge=1, le=100)


class AudioSpec(_Model):
    """A generated waveform (a few sine tones plus noise), WAV 16-bit mono."""

    seconds: float = Field(1.0, gt=0, le=600)
    sample_rate: int = Field(16000, ge=1000, le=192000)


class NumberSpec(_Model):
    """Uniform in [min, max]; `integer`: whole numbers; `step`: min + k * step <= max."""

    min: float = 0.0
    max: float = 1.0
    integer: bool = False
    step: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _range(self) -> NumberSpec:
        if not self.min <= self.max or not math.isfinite(self.max - self.min):
            raise ValueError(f"expected min <= max, a finite range; got min {self.min:g}, max {self.max:g}")
        if self.step is not None and (self.max - self.min) / self.step > 2**53:
            raise ValueError(f"step: {self.step:g} is too small for the range [{self.min:g}, {self.max:g}]")
        if self.integer and not -(2**62) <= self.min <= self.max <= 2**62:
            raise ValueError("integer: expected min and max within +-2**62")
        return self


class FilesSpec(_Model):
    """Files from a folder, picked at random; sent as uploads (gradio) or base64 (http)."""

    dir: Path
    pattern: str = "*"


class ChoiceSpec(_Model):
    """One of `values`, or with `pick: [min, max]` a list of that many distinct values."""

    values: list[Any] = Field(min_length=1, max_length=MAX_CHOICES)
    pick: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _pick_fits(self) -> ChoiceSpec:
        if self.pick is not None and not 0 <= self.pick[0] <= self.pick[1] <= len(self.values):
            raise ValueError(f"pick: expected [min, max] with 0 <= min <= max <= {len(self.values)} "
                             f"(the number of values), got {list(self.pick)}")
        return self


class BooleanSpec(_Model):
    """true in `true_share` of the requests (0: never, 1: always)."""

    true_share: float = Field(0.5, ge=0, le=1)


class ChatSpec(_Model):
    """Earlier (user, assistant) turns, `turns` of them, `words` long, as tuples, messages or parts."""

    turns: tuple[int, int] = (0, 3)
    words: tuple[int, int] = (5, 20)
    format: Literal["messages", "parts", "tuples"] = "messages"

    @field_validator("turns", "words")
    @classmethod
    def _range(cls, v: tuple[int, int], info: Any) -> tuple[int, int]:
        low = 0 if info.field_name == "turns" else 1
        if not low <= v[0] <= v[1] <= MAX_TURNS * 100:
            raise ValueError(f"expected [min, max] with {low} <= min <= max")
        if info.field_name == "turns" and v[1] > MAX_TURNS:
            raise ValueError(f"expected at most {MAX_TURNS} turns")
        return v


class FileSpec(_Model):
    """A generated file of `kb` KiB named `file-<n><suffix>`; `count: [min, max]` sends a list of them."""

    kb: tuple[float, float] = (4.0, 64.0)
    suffix: str = Field(".txt", pattern=r"^(\.[A-Za-z0-9]{1,10}){1,3}$")  # .csv, .nii.gz
    count: tuple[int, int] | None = None

    @field_validator("kb")
    @classmethod
    def _sizes(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= v[1] <= MAX_FILE_KB:
            raise ValueError(f"expected [min, max] KiB with 0 < min <= max <= {MAX_FILE_KB}")
        return v

    @field_validator("count")
    @classmethod
    def _count(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None and not 1 <= v[0] <= v[1] <= 100:
            raise ValueError("expected [min, max] files with 1 <= min <= max <= 100")
        return v


class ExampleSpec(_Model):
    """The app's example values, variant k sending values[k % len(values)]; `{file: PATH}` uploads a file."""

    values: list[Any] = Field(min_length=1, max_length=MAX_CHOICES)


class InputSpec(_Model):
    """Exactly one generator per input, e.g. `{text: {words: [5, 20]}}` or `{value: 3}`."""

    text: TextSpec | None = None
    image: ImageSpec | None = None
    audio: AudioSpec | None = None
    number: NumberSpec | None = None
    json_: Any = Field(None, alias="json")  # a JSON template; strings "{word}" / "{int}" are filled in
    files: FilesSpec | None = None
    value: Any = None  # a constant sent as is
    choice: ChoiceSpec | None = None
    boolean: BooleanSpec | None = None
    chat: ChatSpec | None = None
    file: FileSpec | None = None
    example: ExampleSpec | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in INPUT_KINDS:
            raise ValueError(f"expected a mapping with exactly one of {', '.join(INPUT_KINDS)}")
        return data

    @property
    def kind(self) -> str:
        return next(k for k in INPUT_KINDS if k in self.model_fields_set or f"{k}_" in self.model_fields_set)

    @model_serializer(mode="wrap")
    def _only_the_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dump as written ({kind: spec}), so a dumped scenario validates again."""
        data = handler(self)
        kind = self.kind
        value = data.get(kind, data.get("json_")) if kind == "json" else data.get(kind)
        return {kind: value}
