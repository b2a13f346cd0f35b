"""How far the served rate was from the device: the forward passes' own rate (from the server's forward
phases) beside the served rate, and the GPU's busy share. Fields: docs/design/records-and-results.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from qbench.run.json_values import Readable
from qbench.run.records.columns import Columns


@dataclass
class DeviceStats(Readable, tolerant=True):
    """The forward passes' rate beside the served rate (docs/design/records-and-results.md); to_dict()."""

    records: int = 0  # measured ok records with a forward phase
    batch_size: float | None = None
    forward_ms: float | None = None
    forward_rps: float | None = None
    served_rps: float | None = None
    served_share: float | None = None
    gpu_busy: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """'device: served 473 req/s, 46% of what its forward passes could serve back to back (1,031
        req/s at batches of 32.0, 31.0 ms each); GPU busy 31%'."""
        parts = []
        if self.served_share is not None and self.forward_rps is not None and self.served_rps is not None:
            parts.append(
                f"served {self.served_rps:,.1f} req/s, {self.served_share:.0%} of what its forward passes "
                f"could serve back to back ({self.forward_rps:,.1f} req/s at batches of "
                f"{self.batch_size or 1:.1f}, {self.forward_ms or 0:.1f} ms each)")
        if self.gpu_busy is not None:
            parts.append("GPU busy " + ", ".join(f"{b:.0%}" for b in self.gpu_busy))
        return "device: " + "; ".join(parts) if parts else ""


def device_stats(ok: Columns, window_s: float) -> DeviceStats | None:
    """DeviceStats of the measured ok records over `window_s` seconds; None when none has a forward phase."""
    forward = ok.floats("server_forward_s")
    has = ~np.isnan(forward)
    if not has.any():
        return None
    forward = forward[has]
    size = np.nan_to_num(ok.floats("server_batch_size")[has])
    size = np.where(size < 1, 1.0, size)  # none and 0 alike: a batch of one
    n = int(has.sum())
    batches = float(np.sum(1.0 / size))
    forward_time = float(np.sum(forward / size))
    served = n / window_s if window_s > 0 else None
    rate = n / forward_time if forward_time > 0 else None
    return DeviceStats(
        records=n,
        batch_size=n / batches,
        forward_ms=_median_per_batch(forward, size) * 1000,
        forward_rps=rate,
        served_rps=served,
        served_share=None if served is None or rate is None else served / rate,
    )


def with_gpu_busy(device: DeviceStats | None, gpu_busy: list[float] | None) -> DeviceStats | None:
    """`device` with the GPU's busy share over the run (the server's /status: NVML), when it has one."""
    if gpu_busy is None:
        return device
    return replace(device or DeviceStats(), gpu_busy=gpu_busy)


def _median_per_batch(forward: np.ndarray, size: np.ndarray) -> float:
    """The median forward pass over batches (each record of a batch of b weighs 1/b)."""
    order = np.argsort(forward, kind="stable")
    cumulative = np.cumsum((1.0 / size)[order])
    middle = int(np.searchsorted(cumulative, cumulative[-1] / 2))
    return float(forward[order][min(middle, len(order) - 1)])
