"""JPEG bytes decoded as one batch on the model's device (`decode: device` of image-classification).

With `decode: device` the decode workers (reference_server/io/decode_pool.py) keep a baseline RGB or
greyscale JPEG encoded: they read its header only (that it is one, its size) and hand the batch its
bytes as a 1-D uint8 array in `Pixels`. Here the batch's JPEGs become C x H x W uint8 tensors on the
device in one call, then pixels.py resizes and normalises them as it does host-decoded arrays:

    cuda   torchvision.io.decode_jpeg(list of byte tensors, device="cuda"): nvJPEG, batched; needs
           the package torchvision built for the installed torch (the `gpu` extra; a clear
           WorkloadConfigError at load without it)
    cpu    torchvision's decode_jpeg on the CPU when it is installed, else PIL one image after another
           (the same interface, so the logic is tested on a machine without torchvision)

Other images (PNG, progressive or CMYK JPEGs) are decoded by the workers as before, so a batch may
mix both; pixels.py groups them. A JPEG whose header reads but whose data is corrupt fails its whole
batch (WorkloadInputError), as any bad input of a batch does.
"""

from __future__ import annotations

import importlib.util
import io
from typing import TYPE_CHECKING

import numpy as np

from reference_server.workloads.base import WorkloadConfigError, WorkloadInputError

if TYPE_CHECKING:
    import torch

PACKAGE = "torchvision"


def torchvision_error() -> str | None:
    """Why torchvision's decode_jpeg cannot run here (not installed, or built for another torch), or None."""
    if importlib.util.find_spec(PACKAGE) is None:
        return f"the package '{PACKAGE}' is not installed"
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a wheel built for another torch fails in many ways
        return f"the package '{PACKAGE}' does not load with this torch ({type(exc).__name__}: {exc})"
    return None


class JpegDecoder:
    """Decodes a batch of encoded JPEGs on one device; `name` says with what (for /status)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        problem = torchvision_error()
        if device.type == "cuda" and problem is not None:
            import torch

            raise WorkloadConfigError(
                f"workload 'image-classification': params.decode = 'device' on CUDA needs torchvision's "
                f"nvJPEG decode, but {problem}: install the torchvision that matches torch "
                f"{torch.__version__} (pip install 'qbench[gpu]'), or use decode: cpu"
            )
        self.torchvision = problem is None
        self.name = f"torchvision decode_jpeg on {device}" if self.torchvision else "PIL (no torchvision)"

    def decode(self, encoded: list[np.ndarray]) -> list[torch.Tensor]:
        """1-D uint8 arrays of JPEG bytes -> 3 x H x W uint8 RGB tensors on the device, in order. A JPEG
        whose header read but whose data does not decode fails the batch with WorkloadInputError."""
        try:
            if self.torchvision:
                return self._torchvision(encoded)
            return [self._pil(data) for data in encoded]
        except (RuntimeError, OSError, ValueError) as exc:
            raise WorkloadInputError(f"image input: a JPEG did not decode ({self.name}): {exc}") from None

    def _torchvision(self, encoded: list[np.ndarray]) -> list[torch.Tensor]:
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        datas = [torch.from_numpy(data) for data in encoded]
        device = str(self.device)
        out: list[torch.Tensor] = decode_jpeg(datas, mode=ImageReadMode.RGB, device=device)
        return out

    def _pil(self, data: np.ndarray) -> torch.Tensor:
        import torch
        from PIL import Image

        image = Image.open(io.BytesIO(data.tobytes()))
        rgb = image.convert("RGB") if image.mode != "RGB" else image
        return torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).to(self.device)
