"""`image-ideal`: the image preset's request path in front of an ideal accelerator (no GPU needed).

What a GPU server spends per image request outside the model shows only when the model is nearly
free. This workload keeps everything the image preset does per request, exactly as on CUDA (the
upload, reading it, decoding the PNG/JPEG, the decoded image -> a uint8 HxWx3 array, no resize: the
device resizes) and per batch on the host (stacking the arrays, as before the copy to the device), and
replaces the device's work (copy, resize, normalise, forward) with a wait of a known length that
releases the GIL, as a CUDA kernel does:

    wait = batch_ms + per_image_ms * batch size            (default 5 ms per batch: ~6,400 img/s at 32)

Everything a server spends beyond that wait is its own cost, measurable on a 2-core CPU box
(bench/server_cost.py). Outputs: a Label, like the image preset's (top_k classes, fixed confidences).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from reference_server.observe.profiling import batch_phase
from reference_server.workloads.base import Component, PixelPrep, Workload, WorkloadInputError
from reference_server.workloads.models.params import ParamReader
from reference_server.workloads.models.pixels import Pixels


class IdealAccelerator(Workload):
    kind = "image-ideal"
    prepares_rows = True

    def __init__(self, batch_ms: float, per_image_ms: float, top_k: int, num_labels: int) -> None:
        super().__init__(inputs=[Component("image", "image")], outputs=[Component("label", "label")])
        self.batch_ms, self.per_image_ms = batch_ms, per_image_ms
        self.top_k, self.num_labels = min(top_k, num_labels), num_labels

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "device": "ideal accelerator (a GIL-free wait)",
                "batch_ms": self.batch_ms, "per_image_ms": self.per_image_ms}

    def warmup(self) -> None:
        from reference_server.workloads.models.vision import _gradient_image

        self.run([_gradient_image(320, 240)])

    def pixel_prep(self) -> PixelPrep:
        return PixelPrep(None)  # no resize on the host: the device resizes

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        """Decoded image -> uint8 array (what the image preset does per request on CUDA)."""
        return [_pixels(inputs[0])]

    def run(self, inputs: list[Any]) -> list[Any]:
        return [column[0] for column in self.run_batch([[value] for value in inputs])]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        images = [v if isinstance(v, Pixels) else _pixels(v) for v in columns[0]]
        start = time.perf_counter()
        shapes: dict[tuple[int, ...], list[np.ndarray]] = {}
        for image in images:
            shapes.setdefault(image.array.shape, []).append(image.array)
        staged = [np.stack(group) for group in shapes.values()]  # the host staging before a copy
        stacked = time.perf_counter()
        batch_phase("batch_prepare", stacked - start)
        time.sleep((self.batch_ms + self.per_image_ms * len(images)) / 1000)  # the device: GIL released
        batch_phase("forward", time.perf_counter() - stacked)
        del staged
        return [[self._label() for _ in images]]

    def _label(self) -> dict[str, Any]:
        share = 1.0 / self.num_labels
        confidences = [{"label": f"LABEL_{i}", "confidence": share} for i in range(self.top_k)]
        return {"label": "LABEL_0", "confidences": confidences}


def _pixels(value: Any) -> Pixels:
    from PIL import Image

    if not isinstance(value, Image.Image) or value.width < 1 or value.height < 1:
        raise WorkloadInputError(f"image input: expected a non-empty image, got {value!r:.60}")
    rgb = value if value.mode == "RGB" else value.convert("RGB")
    return Pixels(np.asarray(rgb, dtype=np.uint8))


def image_ideal(params: dict[str, Any]) -> IdealAccelerator:
    """params: batch_ms (5.0), per_image_ms (0.0), top_k (5), num_labels (1000)."""
    reader = ParamReader("image-ideal", params)
    workload = IdealAccelerator(
        batch_ms=reader.number("batch_ms", 5.0, 0.0),
        per_image_ms=reader.number("per_image_ms", 0.0, 0.0),
        top_k=reader.integer("top_k", 5, 1),
        num_labels=reader.integer("num_labels", 1000, 1),
    )
    reader.finish()
    return workload
