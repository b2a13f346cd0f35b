"""Image preprocessing as tensor operations: a batch is resized and normalised at once, on the model's device.

The model's image processor (transformers) resizes, rescales and normalises each PIL image in numpy,
one after another, in the thread that then runs the forward pass. For a processor that does only that
(resize to a fixed height x width, rescale, normalise: ViT's, DeiT's, most classifiers without a crop),
`pixel_spec` reads its numbers and the work is split:

    per request (worker threads, in parallel):  decoded RGB image -> uint8 HxWx3 array (`Pixels`),
                                                resized there with PIL when the model is on the CPU
    per batch (the model's thread):             stack same-sized arrays -> one uint8 tensor
                                                -> pinned memory, non_blocking copy (CUDA)
                                                -> NCHW float -> resize (CUDA: antialiased, as PIL)
                                                -> rescale and normalise (one fused affine) -> model dtype

so on a GPU only uint8 bytes cross the bus (4x less than float32) and the arithmetic runs there; on a
CPU, PIL's SIMD resize in the request threads beats torch's antialiased interpolate several-fold.
With `decode: device` the JPEGs arrive encoded and are decoded on the device in one call (jpeg.py),
then take the same resize and normalise. Same-sized images (the usual case) are one group; mixed sizes
(or a batch of JPEGs kept encoded and images decoded on the host) make one group per size. The result is
the processor's exactly on the CPU, and within one uint8 step (PIL rounds after its resize) when
torch resizes (tests/models/test_pixels.py). Processors that crop, pad or resize by shortest edge
keep the processor path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from reference_server.workloads.models.phase_clock import PhaseClock

if TYPE_CHECKING:
    import torch
    from PIL import Image

    from reference_server.workloads.models.jpeg import JpegDecoder

RESAMPLE_MODES = {2: "bilinear", 3: "bicubic"}  # PIL's BILINEAR, BICUBIC -> torch interpolate modes


@dataclass(frozen=True)
class PixelSpec:
    """What a plain resize + rescale + normalise processor does, as numbers."""

    height: int
    width: int
    resample: int  # PIL resampling filter (2 bilinear, 3 bicubic)
    mode: str  # the same filter as a torch interpolate mode (antialiased)
    scale: float  # rescale factor (1/255), 1.0 when the processor does not rescale
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


@dataclass(frozen=True)
class Pixels:
    """A decoded RGB image as a contiguous uint8 HxWx3 array, made in a request's worker thread."""

    array: np.ndarray


def _size(processor: Any) -> tuple[int, int] | None:
    """(height, width) from the processor's `size` (a dict, or transformers' SizeDict object)."""
    size = getattr(processor, "size", None)
    if isinstance(size, dict):
        height, width = size.get("height"), size.get("width")
    else:
        height, width = getattr(size, "height", None), getattr(size, "width", None)
    return (int(height), int(width)) if height and width else None


def pixel_spec(processor: Any) -> PixelSpec | None:
    """The tensor equivalent of `processor`, or None when it does more than resize/rescale/normalise."""
    if getattr(processor, "do_center_crop", None) or getattr(processor, "do_pad", None):
        return None
    size = _size(processor)
    mode = RESAMPLE_MODES.get(int(getattr(processor, "resample", -1) or -1))
    if not getattr(processor, "do_resize", False) or size is None or mode is None:
        return None
    scale = float(processor.rescale_factor) if getattr(processor, "do_rescale", False) else 1.0
    mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    if getattr(processor, "do_normalize", False):
        mean, std = _triple(processor.image_mean), _triple(processor.image_std)
    resample = int(processor.resample)
    return PixelSpec(size[0], size[1], resample, mode, scale, mean, std)


def _triple(value: Any) -> tuple[float, float, float]:
    values = [float(v) for v in (value if isinstance(value, (list, tuple)) else [value] * 3)]
    if len(values) != 3:
        raise ValueError(f"expected 3 channel values, got {values}")
    return values[0], values[1], values[2]


def to_pixels(image: Image.Image, spec: PixelSpec, resize: bool) -> Pixels:
    """A decoded, non-empty RGB image -> Pixels, resized to the spec with PIL when `resize`."""
    if resize and image.size != (spec.width, spec.height):
        image = image.resize((spec.width, spec.height), resample=spec.resample)
    return Pixels(np.asarray(image, dtype=np.uint8))


def pixel_batch(images: list[Pixels], spec: PixelSpec, device: torch.device, dtype: torch.dtype,
                clock: PhaseClock | None = None, decoder: JpegDecoder | None = None) -> torch.Tensor:
    """N images -> the model's N x 3 x H x W `pixel_values` on `device` in `dtype`.

    An image whose array is 1-D is a JPEG kept encoded (`decode: device`): `decoder` decodes all of
    them on the device in one call. With a clock, laps: `batch_prepare` (host stacking, or the device
    decode), `h2d` (the copy), `batch_prepare` (resize and normalise on the device); a mixed-size batch
    laps once per size group."""
    import torch

    clock = clock or PhaseClock(torch.device("cpu"))
    groups = _device_groups(images, device, clock, decoder) + _host_groups(images, device, clock)
    if len(groups) == 1:
        batch = _normalise(groups[0][1], spec).to(dtype)
        clock.lap("batch_prepare")
        return batch
    out = torch.empty((len(images), 3, spec.height, spec.width), device=device, dtype=dtype)
    for indices, group in groups:
        out[torch.tensor(indices, device=device)] = _normalise(group, spec).to(dtype)
        clock.lap("batch_prepare")
    return out


Group = tuple[list[int], "torch.Tensor"]  # row indices, and their images as one uint8 NCHW tensor


def _host_groups(images: list[Pixels], device: torch.device, clock: PhaseClock) -> list[Group]:
    """The decoded arrays, stacked per size and moved to the device."""
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for i, image in enumerate(images):
        if image.array.ndim == 3:
            by_shape.setdefault(image.array.shape, []).append(i)
    return [(indices, _stacked([images[i] for i in indices], device, clock).permute(0, 3, 1, 2))
            for indices in by_shape.values()]


def _device_groups(images: list[Pixels], device: torch.device, clock: PhaseClock,
                   decoder: JpegDecoder | None) -> list[Group]:
    """The JPEGs kept encoded, decoded on the device in one call, stacked per size."""
    import torch

    encoded = [i for i, image in enumerate(images) if image.array.ndim == 1]
    if not encoded:
        return []
    if decoder is None:
        raise ValueError("encoded JPEG rows need a JpegDecoder (decode: device)")
    decoded = decoder.decode([images[i].array for i in encoded])
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for position, tensor in enumerate(decoded):
        by_shape.setdefault(tuple(tensor.shape), []).append(position)
    clock.lap("batch_prepare")
    return [([encoded[p] for p in positions], torch.stack([decoded[p] for p in positions]))
            for positions in by_shape.values()]


def _stacked(images: list[Pixels], device: torch.device, clock: PhaseClock) -> torch.Tensor:
    """The batch as one uint8 NHWC tensor on `device`. On CUDA the arrays are stacked straight into
    pinned memory (the caching host allocator reuses it), so the batch is copied once on the host
    instead of twice (stack, then pin_memory), and the copy to the device does not block."""
    import torch

    arrays = [image.array for image in images]
    if device.type != "cuda":
        host = torch.from_numpy(np.stack(arrays))
        clock.host_lap("batch_prepare")
        return host
    host = torch.empty((len(arrays), *arrays[0].shape), dtype=torch.uint8, pin_memory=True)
    np.stack(arrays, out=host.numpy())
    clock.host_lap("batch_prepare")
    on_device = host.to(device, non_blocking=True)
    clock.lap("h2d")
    return on_device


def _normalise(batch: torch.Tensor, spec: PixelSpec) -> torch.Tensor:
    """uint8 NCHW (any strides) -> float32 NCHW, resized to the spec if needed (antialiased, like PIL),
    then (x * scale - mean) / std as one in-place affine per channel."""
    import torch
    import torch.nn.functional as F

    x = batch.to(torch.float32, memory_format=torch.contiguous_format)
    if x.shape[-2:] != (spec.height, spec.width):
        x = F.interpolate(x, size=(spec.height, spec.width), mode=spec.mode, antialias=True,
                          align_corners=False)
        x = x.round_().clamp_(0, 255)  # PIL resizes in uint8: the processor sees rounded values
    gain = torch.tensor([spec.scale / s for s in spec.std], device=x.device).view(1, 3, 1, 1)
    bias = torch.tensor([m / s for m, s in zip(spec.mean, spec.std, strict=True)], device=x.device)
    return x.mul_(gain).sub_(bias.view(1, 3, 1, 1))
