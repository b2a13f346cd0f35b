"""Payload generators for the inputs of a form: choices, booleans, chat history, generated files and the
app's own example rows (the rest, text, image, audio, number, json, files and value, are in
qbench.run.scenario.scenario). `qbench init` writes them from an app's components (qbench.run.init).

    - choice: {values: [fast, slow]}                 # a Dropdown or Radio: one of the values
    - choice: {values: [a, b, c], pick: [1, 2]}      # a multiselect / CheckboxGroup: a list of 1-2
    - boolean: {true_share: 0.5}                     # a Checkbox: true in half the requests
    - chat: {turns: [0, 3], words: [5, 20]}          # a Chatbot input: earlier turns of a conversation
    - file: {kb: [4, 64], suffix: .txt}              # a File input: a generated text file of that size
    - example: {values: ["a cat", "a dog"]}          # the app's examples: variant k sends values[k % n]
    - example: {values: [{file: app-examples/cat.jpg}]}   # example files (relative to the scenario file)

`example` columns of one scenario line up: every `example` input of request variant k takes row
k % n of its own list, so the inputs of one example row are sent together.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_CHOICES = 10_000
MAX_TURNS = 1_000
MAX_FILE_KB = 1_048_576  # 1 GiB


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ChoiceSpec(_Model):
    """One of `values` (uniformly), or with `pick: [min, max]` a list of that many distinct values."""

    values: list[Any] = Field(min_length=1, max_length=MAX_CHOICES)
    pick: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _pick_fits(self) -> ChoiceSpec:
        if self.pick is not None and not 0 <= self.pick[0] <= self.pick[1] <= len(self.values):
            raise ValueError(f"pick: expected [min, max] with 0 <= min <= max <= {len(self.values)} "
                             f"(the number of values), got {list(self.pick)}")
        return self


class BooleanSpec(_Model):
    """true in `true_share` of the requests (0: always false, 1: always true)."""

    true_share: float = Field(0.5, ge=0, le=1)


class ChatSpec(_Model):
    """A chat history: a number of earlier (user, assistant) turns drawn in `turns`, each message
    `words` long. `format: messages` sends [{role, content: "..."}, ...] (Gradio 4.x and 5.x
    `type="messages"`, OpenAI-style); `parts` sends [{role, content: [{type: text, text: "..."}]}, ...]
    (every Chatbot of Gradio 6.x); `tuples` sends [[user, assistant], ...] (Gradio 3.x, and the default
    Chatbot of 4.x and 5.x)."""

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
    """A generated text file (random words) of a size drawn in `kb` (KiB), named `file-<n><suffix>`;
    `count: [min, max]` sends a list of that many (a File input with file_count="multiple")."""

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
    """The app's own example values for this input, sent in order: request variant k sends
    values[k % len(values)], so the `example` inputs of one row go together. A value `{file: PATH}`
    sends that file (an upload), its path relative to the scenario file."""

    values: list[Any] = Field(min_length=1, max_length=MAX_CHOICES)
