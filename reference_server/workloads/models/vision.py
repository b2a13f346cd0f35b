"""`image-classification`: a ViT (ViT-B/16 by default) answering PIL images with a top-k label."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, PixelPrep, WorkloadInputError
from reference_server.workloads.models.common import ModelWorkload, label_config, label_values
from reference_server.workloads.models.loading import build_config, pretrained_part, random_model
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader
from reference_server.workloads.models.phase_clock import PhaseClock
from reference_server.workloads.models.pixels import Pixels, PixelSpec, pixel_batch, pixel_spec, to_pixels

if TYPE_CHECKING:
    import torch
    from PIL import Image


class ImageClassification(ModelWorkload):
    """Resize + rescale + normalise, one forward pass per batch.

    preprocess: auto (default) - when the model's image processor only resizes, rescales and
    normalises, each request's image becomes a uint8 array in its own worker thread and the batch is
    resized and normalised as tensor operations on the model's device (pixels.py); `processor`, or a
    processor that crops or pads - the processor, on the whole batch, in the model's thread.
    """

    kind = "image-classification"
    family = "vit"
    prepares_rows = True

    def __init__(self, common: CommonParams, labels: LabelParams, preprocess: str = "auto") -> None:
        super().__init__(common, [Component("image", "image")], [Component("label", "label")])
        self.labels = labels
        self.preprocess = preprocess
        self._processor: Any = None
        self._spec: PixelSpec | None = None

    def random_model(self) -> torch.nn.Module:
        from transformers import ViTConfig, ViTForImageClassification

        config = build_config(
            ViTConfig, self.family, self.common.size, self.common.config, label_config(self.labels)
        )
        return random_model(ViTForImageClassification, config, self.common.seed)

    def auto_class(self) -> Any:
        from transformers import AutoModelForImageClassification

        return AutoModelForImageClassification

    def load_preprocessor(self) -> None:
        from transformers import AutoImageProcessor
        from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

        self._processor = None
        if self.common.model is not None:
            self._processor = pretrained_part(AutoImageProcessor, self.common.model)
            if self._processor is not None:
                self.preprocessor_source = f"{type(self._processor).__name__} from {self.common.model}"
        if self._processor is None:
            side = int(getattr(self.config, "image_size", 224))
            self._processor = ViTImageProcessorPil(size={"height": side, "width": side})
            self.preprocessor_source = f"ViTImageProcessorPil (resize {side}x{side}, normalise mean/std 0.5)"
        self._spec = pixel_spec(self._processor) if self.preprocess == "auto" else None
        if self._spec is not None:
            where = "on the GPU" if self.device.type == "cuda" else "with PIL in the request threads"
            self.preprocessor_source += f"; per batch as tensor ops on {self.device}, resized {where}"

    def warmup_inputs(self) -> list[Any]:
        return [_gradient_image(320, 240)]

    def pixel_prep(self) -> PixelPrep | None:
        """Resized to the spec on a CPU (PIL's SIMD resize), kept whole on CUDA (resized there)."""
        if self._spec is None:
            return None
        size = None if self.device.type == "cuda" else (self._spec.width, self._spec.height)
        return PixelPrep(size, self._spec.resample)

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        """A usable image -> Pixels, in the request's worker thread (anything else is left for run_batch
        to reject, so one bad input still fails the whole batch, as in Gradio)."""
        value = inputs[0]
        if self._spec is None or not _usable(value):
            return inputs
        return [self._pixels(value)]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        import torch

        values = columns[0]
        clock = PhaseClock(self.device)
        with torch.inference_mode():
            if self._spec is not None:
                pixels = [v if isinstance(v, Pixels) else self._pixels(v) for v in values]
                inputs = {"pixel_values": pixel_batch(pixels, self._spec, self.device, self.dtype, clock)}
            else:
                images = [_as_rgb(v) for v in values]
                inputs = self.model_inputs(self._processor(images=images, return_tensors="pt"))
                clock.lap("batch_prepare")
            logits = self.model(**inputs).logits
            clock.lap("forward")
        labels = label_values(logits, self.config.id2label, self.labels.top_k)
        clock.report()
        return [labels]


    def _pixels(self, value: Any) -> Pixels:
        assert self._spec is not None
        return to_pixels(_as_rgb(value), self._spec, resize=self.device.type != "cuda")


def _usable(value: Any) -> bool:
    from PIL import Image

    return isinstance(value, Image.Image) and value.width >= 1 and value.height >= 1


def _as_rgb(value: Any) -> Image.Image:
    from PIL import Image

    if not isinstance(value, Image.Image):
        raise WorkloadInputError(f"image input: expected an image, got {type(value).__name__}")
    if value.width < 1 or value.height < 1:
        raise WorkloadInputError(f"image input: empty image ({value.width}x{value.height})")
    return value if value.mode == "RGB" else value.convert("RGB")


def _gradient_image(width: int, height: int) -> Image.Image:
    import numpy as np
    from PIL import Image

    x = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None, None]
    rgb = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2).astype(np.uint8)
    return Image.fromarray(rgb)


def image_classification(params: dict[str, Any]) -> ImageClassification:
    """params: common keys + top_k (5), num_labels (1000, ImageNet-sized head), labels,
    preprocess (auto | processor)."""
    reader = ParamReader("image-classification", params)
    common, labels = reader.common(), reader.labels(default_count=1000)
    workload = ImageClassification(common, labels, reader.choice("preprocess", ("auto", "processor"), "auto"))
    reader.finish()
    return workload
