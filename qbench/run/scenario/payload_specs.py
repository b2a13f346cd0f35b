"""Payload generators for a form's inputs: `choice`, `boolean`, `chat`, `file` and `example` (the app's
own example rows); the other kinds are in qbench.run.scenario.scenario. `qbench init` writes them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_CHOICES = 10_000
MAX_TURNS = 1_000
MAX_FILE_KB = 1_048_576  # 1 GiB


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
