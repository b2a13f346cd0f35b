"""The one interface every workload (synthetic or a real model) implements.

A workload is what a Gradio event listener's `fn` is: it declares its input and output components,
and the queue calls it. The server owns preprocessing and postprocessing of components, so a workload
sees Python values, never wire formats:

    component   workload receives (input)               workload returns (output)
    text        str                                     str
    number      float                                   float | int
    image       PIL.Image.Image (RGB)                   PIL.Image.Image (saved and served as a file)
    audio       (sample_rate: int, samples: np.ndarray)  (sample_rate, np.ndarray)
    json        any JSON value                          any JSON value
    label       -                                       {"label": str, "confidences": [...]}

Calling conventions (Gradio's):
    * unbatched:  run(inputs)            -> outputs          one value per component, in order
    * batched:    run_batch(columns)     -> output columns   one list per input / per output component
                  (the server transposes events into columns and back; a batch is one call, so one
                  exception fails the whole batch)
    * generator:  stream(inputs)         -> iterator of outputs (each item is a full list of outputs)
A workload whose `is_async` is True implements the `a`-prefixed coroutine versions instead and runs on
the event loop; otherwise the server calls the sync methods in its thread pool (capped by max_threads).

A workload module defines a factory, `factory(params) -> Workload`; registry.py lists each under its
kind name. Server configs name the kind and pass `params`, which the factory validates (raise
`WorkloadConfigError` with the key and value).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

ComponentType = Literal["text", "number", "image", "audio", "json", "label"]


@dataclass(frozen=True)
class PixelPrep:
    """What a workload wants from an image input, done in a decode worker (reference_server.io.decode_pool):
    resize to (width, height) with PIL's `resample` filter, or keep its size (None: the device resizes);
    `encoded`: keep a baseline RGB/greyscale JPEG's bytes (the device decodes the batch), decode others."""

    size: tuple[int, int] | None = None
    resample: int = 3
    encoded: bool = False


@dataclass(frozen=True)
class Component:
    """A Gradio-like component as a workload declares it."""

    type: ComponentType
    label: str
    example: Any = None  # example value for /info (wire form)


class WorkloadConfigError(ValueError):
    """A workload's params are invalid: the message names the key, the value and what was expected."""


class WorkloadInputError(ValueError):
    """An input this workload cannot process (corrupt image, empty text): fails that request only."""


#: The session_hash of the call being run, for workloads whose state is the session's (session_chat);
#: set by the server per non-batched job (None: no session, e.g. a /call request).
SESSION: ContextVar[str | None] = ContextVar("reference_server_session", default=None)


@dataclass
class Workload:
    """Base class. Subclasses override the methods that match their flags."""

    kind: ClassVar[str] = "abstract"
    inputs: list[Component] = field(default_factory=list)
    outputs: list[Component] = field(default_factory=list)
    is_generator: bool = False
    is_async: bool = False
    prepares_rows: ClassVar[bool] = False  # prepare_row does real work: run it in a thread

    def load(self, device: str) -> None:
        """Load expensive state (model weights) once, in the server's lifespan. device: 'cpu' | 'cuda'."""

    def warmup(self) -> None:
        """Run one representative call so the first measured request pays no one-off costs."""

    def describe(self) -> dict[str, Any]:
        """Facts for the status endpoint (model name, parameters, device, dtype...)."""
        return {"kind": self.kind}

    def pixel_prep(self) -> PixelPrep | None:
        """For a workload whose one input is an image: what its `prepare_row` does to the decoded
        image (resize or not), so a decode process does it and `prepare_row` is skipped; None: the
        decoded image goes through `prepare_row` as usual."""
        return None

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        """Per-request work on one input row before it joins a batch (e.g. an image to a uint8 array).

        The server calls it right after preprocessing each request, in a worker thread when
        `prepares_rows` is set, for all the requests of a batch at once; run/run_batch must still
        accept unprepared values (direct calls, warm-up). A WorkloadInputError fails only that request.
        """
        return inputs

    # ---- sync calling conventions
    def run(self, inputs: list[Any]) -> list[Any]:
        raise NotImplementedError(f"{self.kind} has no sync run()")

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        """Default batch: one run() per sample. Real models override with one forward pass."""
        size = len(columns[0]) if columns else 0
        rows = [self.run([col[i] for col in columns]) for i in range(size)]
        return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in self.outputs]

    def stream(self, inputs: list[Any]) -> Iterator[list[Any]]:
        raise NotImplementedError(f"{self.kind} is not a generator")

    # ---- async calling conventions (is_async=True)
    async def arun(self, inputs: list[Any]) -> list[Any]:
        raise NotImplementedError(f"{self.kind} has no async run()")

    async def arun_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        raise NotImplementedError(f"{self.kind} has no async run_batch()")

    def astream(self, inputs: list[Any]) -> AsyncIterator[list[Any]]:
        raise NotImplementedError(f"{self.kind} is not an async generator")


WorkloadFactory = Callable[[dict[str, Any]], Workload]
