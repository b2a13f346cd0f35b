"""`image-classification`: a ViT (ViT-B/16 by default) answering PIL images with a top-k label."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, WorkloadInputError, register
from reference_server.workloads.models.common import ModelWorkload, label_config, label_values
from reference_server.workloads.models.loading import build_config, pretrained_part, random_model
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader

if TYPE_CHECKING:
    import torch
    from PIL import Image


class ImageClassification(ModelWorkload):
    """Resize + rescale + normalise (the model's image processor), one forward pass per batch."""

    kind = "image-classification"
    family = "vit"

    def __init__(self, common: CommonParams, labels: LabelParams) -> None:
        super().__init__(common, [Component("image", "image")], [Component("label", "label")])
        self.labels = labels
        self._processor: Any = None

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

        if self.common.model is not None:
            self._processor = pretrained_part(AutoImageProcessor, self.common.model)
            if self._processor is not None:
                self.preprocessor_source = f"{type(self._processor).__name__} from {self.common.model}"
                return
        side = int(getattr(self.config, "image_size", 224))
        self._processor = ViTImageProcessorPil(size={"height": side, "width": side})
        self.preprocessor_source = f"ViTImageProcessorPil (resize {side}x{side}, normalise mean/std 0.5)"

    def warmup_inputs(self) -> list[Any]:
        return [_gradient_image(320, 240)]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        import torch

        images = [_as_rgb(value) for value in columns[0]]
        pixels = self._processor(images=images, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**self.model_inputs(pixels)).logits
        return [label_values(logits, self.config.id2label, self.labels.top_k)]


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


@register("image-classification")
def image_classification(params: dict[str, Any]) -> ImageClassification:
    """params: common keys + top_k (5), num_labels (1000, ImageNet-sized head), labels."""
    reader = ParamReader("image-classification", params)
    workload = ImageClassification(reader.common(), reader.labels(default_count=1000))
    reader.finish()
    return workload
