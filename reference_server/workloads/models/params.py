"""Validated params for the model workloads (the `params:` mapping of a server config function).

Every model workload accepts the common keys:

    model:   null | hub id | local directory   null = build the architecture from its config, random init
    size:    base | small | tiny                 architecture size of the random-init model (tiny for tests)
    config:  {key: value}                        overrides of the transformers config (e.g. num_hidden_layers)
    dtype:   auto | float32 | float16 | bfloat16 weights and activations dtype; auto = bfloat16 on a GPU
                                                 that supports it, else float32 (the GPU presets use auto)
    compile: false | true | BACKEND              torch.compile the model (dynamic shapes) before warm-up;
                                                 true = inductor, or a backend by name (aot_eager: the
                                                 graph captured, no code generated; eager, cudagraphs)
    threads: null | int >= 1                     torch.set_num_threads (process-wide), null = torch's default
    seed:    int                                 seed of the random initialisation (same seed, same weights)

and the kind-specific keys that each factory reads (top_k, labels, max_length, max_new_tokens...).
A bad value raises WorkloadConfigError naming the workload, the key, the value and the expectation;
unknown keys are errors too, so a typo never silently falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference_server.workloads.base import WorkloadConfigError

SIZES = ("base", "small", "tiny")
COMPILE_BACKENDS = ("inductor", "aot_eager", "eager", "cudagraphs")  # torch.compile(backend=...)
DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class CommonParams:
    """The keys every model workload accepts (see the module docstring)."""

    model: str | None = None
    size: str = "base"
    config: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    threads: int | None = None
    seed: int = 0
    compile: bool = False
    compile_backend: str = "inductor"  # torch.compile's backend when `compile`


@dataclass(frozen=True)
class LabelParams:
    """Classifier head of a random-init model and how many classes a label output shows."""

    top_k: int = 5
    num_labels: int = 2
    labels: tuple[str, ...] | None = None  # names for id2label; their count sets num_labels

    def id2label(self) -> dict[int, str] | None:
        return dict(enumerate(self.labels)) if self.labels else None

    def label_count(self) -> int:
        return len(self.labels) if self.labels else self.num_labels


class ParamReader:
    """Reads typed keys out of a params mapping; `finish()` rejects keys nobody read."""

    def __init__(self, kind: str, params: dict[str, Any]) -> None:
        self.kind = kind
        self._params = dict(params)
        self._known: list[str] = []

    def _error(self, key: str, expected: str) -> WorkloadConfigError:
        value = self._params.get(key)
        return WorkloadConfigError(f"workload {self.kind!r}: params.{key} = {value!r}: expected {expected}")

    def _take(self, key: str, default: Any) -> Any:
        self._known.append(key)
        return self._params.get(key, default)

    def opt_str(self, key: str) -> str | None:
        value = self._take(key, None)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self._error(key, "a non-empty string or null")
        return value

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        value = self._take(key, default)
        if value not in options:
            raise self._error(key, f"one of {', '.join(options)}")
        return str(value)

    def integer(self, key: str, default: int, minimum: int) -> int:
        value = self._take(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._error(key, f"an integer >= {minimum}")
        return value

    def opt_integer(self, key: str, minimum: int) -> int | None:
        if self._params.get(key) is None:
            self._known.append(key)
            return None
        return self.integer(key, minimum, minimum)

    def number(self, key: str, default: float, minimum: float) -> float:
        value = self._take(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
            raise self._error(key, f"a number >= {minimum}")  # `not >=` also refuses NaN
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self._take(key, default)
        if not isinstance(value, bool):
            raise self._error(key, "true or false")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self._take(key, None)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise self._error(key, "a mapping of transformers config keys to values")
        return dict(value)

    def str_list(self, key: str) -> tuple[str, ...] | None:
        value = self._take(key, None)
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self._error(key, "a non-empty list of label names")
        return tuple(value)

    def common(self) -> CommonParams:
        return CommonParams(
            model=self.opt_str("model"),
            size=self.choice("size", SIZES, "base"),
            config=self.mapping("config"),
            dtype=self.choice("dtype", DTYPES, "float32"),
            threads=self.opt_integer("threads", 1),
            seed=self.integer("seed", 0, 0),
            **self.compile_choice(),
        )

    def compile_choice(self) -> dict[str, Any]:
        """`compile`: true or false, or a backend's name (which compiles with it)."""
        value = self._take("compile", False)
        if isinstance(value, bool):
            return {"compile": value}
        if value in COMPILE_BACKENDS:
            return {"compile": True, "compile_backend": value}
        backends = ", ".join(COMPILE_BACKENDS)
        raise self._error("compile", f"true, false or a torch.compile backend ({backends})")

    def labels(self, default_count: int) -> LabelParams:
        return LabelParams(
            top_k=self.integer("top_k", 5, 1),
            num_labels=self.integer("num_labels", default_count, 1),
            labels=self.str_list("labels"),
        )

    def finish(self) -> None:
        unknown = sorted(set(self._params) - set(self._known))
        if unknown:
            raise WorkloadConfigError(
                f"workload {self.kind!r}: unknown params {', '.join(unknown)}; "
                f"expected some of: {', '.join(sorted(set(self._known)))}"
            )
