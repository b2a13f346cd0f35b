"""What a point's server used: the peak RSS of its process tree, and the memory it reports in its /status."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil


@dataclass
class ResourceSampler:
    """The peak RSS (MB) of a process tree, sampled in a background thread while the `with` block runs."""

    pid: int
    interval_s: float = 0.25
    list_every_s: float = 2.0
    peak_rss_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _tree: list[psutil.Process] = field(default_factory=list, repr=False)
    _listed_at: float = field(default=-math.inf, repr=False)

    def _processes(self) -> list[psutil.Process]:
        now = time.monotonic()
        if now - self._listed_at >= self.list_every_s:
            root = psutil.Process(self.pid)
            self._tree, self._listed_at = [root, *root.children(recursive=True)], now
        return self._tree

    def sample(self) -> float:
        try:
            procs = self._processes()
        except psutil.Error:
            return 0.0
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_rss_mb = max(self.peak_rss_mb, self.sample())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> ResourceSampler:
        self._thread = threading.Thread(target=self._run, name="qbench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)


def status_memory(status: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(peak RSS MB, peak CUDA memory MB) from the reference server's `/status` JSON (None if absent)."""
    rss = status.get("peak_rss_bytes")
    cuda = status.get("torch_cuda_memory") or {}
    gpu = cuda.get("peak_allocated_bytes") if isinstance(cuda, Mapping) else None
    return (
        rss / 2**20 if isinstance(rss, int | float) else None,
        gpu / 2**20 if isinstance(gpu, int | float) else None,
    )
