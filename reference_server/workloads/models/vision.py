"""`image-classification`: a ViT (ViT-B/16 by default) answering PIL images with a top-k label."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, PixelPrep, WorkloadConfigError, WorkloadInputError
from reference_server.workloads.models.common import ModelWorkload, label_config, label_values
from reference_server.workloads.models.graphs import BucketedForward
from reference_server.workloads.models.jpeg import JpegDecoder
from reference_server.workloads.models.loading import build_config, pretrained_part, random_model
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader
from reference_server.workloads.models.phase_clock import PhaseClock
from reference_server.workloads.models.pixels import Pixels, PixelSpec, pixel_batch, pixel_spec, to_pixels

if TYPE_CHECKING:
    import numpy as np
    import torch
    from PIL import Image


class ImageClassification(ModelWorkload):
    """Resize + rescale + normalise, one forward pass per batch.

    preprocess: auto (default) - when the model's image processor only resizes, rescales and
    normalises, each request's image becomes a uint8 array in its own worker thread and the batch is
    resized and normalised as tensor operations on the model's device (pixels.py); `processor`, or a
    processor that crops or pads - the processor, on the whole batch, in the model's thread.

    decode: cpu (default) - images are decoded on the host (decode workers or request threads);
    device - where uploads go through decode workers, a baseline JPEG stays encoded and the batch's
    JPEGs are decoded on the model's device in one call (jpeg.py; needs torchvision on CUDA).
    cuda_graphs: 0 (default, off) | N - the forward pass over padded batch-size buckets (powers of two
    up to N), captured as CUDA graphs at warm-up on a GPU (graphs.py); on a CPU padded, not captured.
    """

    kind = "image-classification"
    family = "vit"
    prepares_rows = True

    def __init__(self, common: CommonParams, labels: LabelParams, preprocess: str = "auto",
                 decode: str = "cpu", cuda_graphs: int = 0) -> None:
        super().__init__(common, [Component("image", "image")], [Component("label", "label")])
        self.labels = labels
        self.preprocess = preprocess
        self.decode = decode
        self.cuda_graphs = cuda_graphs
        self._processor: Any = None
        self._spec: PixelSpec | None = None
        self._decoder: JpegDecoder | None = None
        self._buckets: BucketedForward | None = None

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
        self._decoder = None
        if self.decode == "device":
            if self._spec is None:
                raise WorkloadConfigError(
                    f"workload {self.kind!r}: params.decode = 'device' needs a processor that only resizes, "
                    f"rescales and normalises ({self.preprocessor_source} does more): use decode: cpu"
                )
            self._decoder = JpegDecoder(self.device)
        self._buckets = BucketedForward(self._forward, self.cuda_graphs) if self.cuda_graphs else None

    def _forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(pixel_values=pixel_values).logits
        return logits

    def warmup(self) -> None:
        """The base warm-up; with `decode: device`, a batch of one encoded JPEG too (the decoder's own
        start-up); with `cuda_graphs` on CUDA, one graph captured per bucket."""
        super().warmup()
        if self._decoder is not None:
            self.run_batch([[Pixels(_jpeg_bytes(_gradient_image(320, 240)))]])
        if self._buckets is not None and self.device.type == "cuda":
            side = int(getattr(self.config, "image_size", 224))
            channels = int(getattr(self.config, "num_channels", 3))
            self._buckets.capture((channels, side, side), self.dtype, self.device)

    def describe(self) -> dict[str, Any]:
        facts = super().describe()
        if self._device is not None:
            facts["decode"] = self._decoder.name if self._decoder is not None else "host (decode: cpu)"
            if self._buckets is not None:
                captured = "captured as CUDA graphs" if self._buckets.graphs else "padded, not captured"
                facts["cuda_graphs"] = f"buckets {list(self._buckets.sizes)}, {captured}"
                facts["cuda_graph_padding_rows"] = self._buckets.padding_rows
        return facts

    def warmup_inputs(self) -> list[Any]:
        return [_gradient_image(320, 240)]

    def pixel_prep(self) -> PixelPrep | None:
        """Resized to the spec on a CPU (PIL's SIMD resize), kept whole on CUDA (resized there); with
        `decode: device`, a JPEG kept encoded and any other image kept whole (the device resizes)."""
        if self._spec is None:
            return None
        if self._decoder is not None:
            return PixelPrep(None, self._spec.resample, encoded=True)
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
                batch = pixel_batch(pixels, self._spec, self.device, self.dtype, clock, self._decoder)
            else:
                images = [_as_rgb(v) for v in values]
                batch = self.model_inputs(self._processor(images=images, return_tensors="pt"))["pixel_values"]
                clock.lap("batch_prepare")
            logits = self._buckets(batch) if self._buckets is not None else self._forward(batch)
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


def _jpeg_bytes(image: Image.Image) -> np.ndarray:
    """An image as baseline JPEG bytes in a 1-D uint8 array (a row that `decode: device` decodes)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy()


def _gradient_image(width: int, height: int) -> Image.Image:
    import numpy as np
    from PIL import Image

    x = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None, None]
    rgb = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2).astype(np.uint8)
    return Image.fromarray(rgb)


def image_classification(params: dict[str, Any]) -> ImageClassification:
    """params: common keys + top_k (5), num_labels (1000, ImageNet-sized head), labels,
    preprocess (auto | processor), decode (cpu | device), cuda_graphs (0 = off, or the largest bucket)."""
    reader = ParamReader("image-classification", params)
    common, labels = reader.common(), reader.labels(default_count=1000)
    preprocess = reader.choice("preprocess", ("auto", "processor"), "auto")
    decode = reader.choice("decode", ("cpu", "device"), "cpu")
    cuda_graphs = reader.integer("cuda_graphs", 0, 0)
    reader.finish()
    if decode == "device" and preprocess == "processor":
        raise WorkloadConfigError("workload 'image-classification': params.decode = 'device' needs "
                                  "preprocess: auto (the processor path decodes on the host)")
    if cuda_graphs and common.compile:
        raise WorkloadConfigError("workload 'image-classification': params.cuda_graphs and compile: true "
                                  "are either-or (a compiled model is not captured here)")
    return ImageClassification(common, labels, preprocess, decode, cuda_graphs)
