"""Device, dtype, thread and memory helpers for the model workloads (torch is imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import WorkloadConfigError

if TYPE_CHECKING:
    import torch


def resolve_device(device: str) -> torch.device:
    """'cpu' | 'cuda' | 'cuda:N' -> torch.device; asking for CUDA without one is a config error."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise WorkloadConfigError(f"device {device!r}: CUDA is not available on this machine; use 'cpu'")
    if dev.type not in ("cpu", "cuda"):
        raise WorkloadConfigError(f"device {device!r}: expected 'cpu' or 'cuda'")
    return dev


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """'auto' | 'float32' | 'float16' | 'bfloat16' -> torch dtype (validated earlier by the params reader).

    auto: bfloat16 on a CUDA device that supports it (Ampere and later: ~5-9x the float32 throughput of
    ViT-B on an H100), else float32 (CPUs without bfloat16 units run it slower than float32).
    """
    import torch

    if name == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if bf16 else torch.float32
    dtype: torch.dtype = getattr(torch, name)
    return dtype


def compiled(model: torch.nn.Module, backend: str = "inductor") -> torch.nn.Module:
    """torch.compile with dynamic shapes (batch size and sequence length vary from call to call).

    The compiled module forwards attribute access (config, parameters) to the model it wraps."""
    import torch

    module: torch.nn.Module = torch.compile(model, dynamic=True, backend=backend)  # type: ignore[assignment]
    return module


def apply_threads(threads: int | None) -> None:
    """torch.set_num_threads is process-wide: the last model loaded with `threads` set wins."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)


def thread_count() -> int:
    import torch

    return int(torch.get_num_threads())


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def cuda_memory(device: torch.device) -> dict[str, int]:
    """Allocated, peak allocated and reserved CUDA bytes on `device` ({} on CPU)."""
    import torch

    if device.type != "cuda":
        return {}
    return {
        "cuda_allocated_bytes": int(torch.cuda.memory_allocated(device)),
        "cuda_peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "cuda_reserved_bytes": int(torch.cuda.memory_reserved(device)),
    }


def to_model_inputs(batch: Any, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Move a processor/tokenizer output to the device; floating tensors take the model dtype.

    On CUDA the host tensors go through pinned memory with non-blocking copies, so the copy overlaps
    the host's work until the forward pass needs the data (same stream: ordering is kept)."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in dict(batch).items():
        moved = to_device(tensor, device)
        out[key] = moved.to(dtype=dtype) if moved.is_floating_point() else moved
    return out


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`: pinned + non_blocking on CUDA, unchanged on CPU."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
