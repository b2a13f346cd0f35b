"""GPU telemetry through NVML (`nvidia-ml-py`, imported as `pynvml`): utilisation, memory, power.

A sampler thread reads every GPU each `interval_s` and keeps, per GPU, the latest figures and a running
integral of utilisation over time, so a client that reads `/status` at the start and at the end of a
run gets the mean busy share of exactly that window: (busy_s_end - busy_s_start) / (sampled_s_end -
sampled_s_start). NVML's utilisation is the share of the last sample period in which a kernel ran.

Absent NVML or a GPU (every CPU machine), `available` is False and nothing appears in `/status` or
`/metrics`: the fields are absent, never zero.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Gauge


@dataclass
class GpuReading:
    index: int
    name: str
    utilization_percent: float = 0.0  # latest sample
    memory_used_bytes: int = 0
    memory_total_bytes: int = 0
    power_w: float | None = None
    busy_s: float = 0.0  # integral of utilisation over time (s of kernel time, as NVML counts it)
    sampled_s: float = 0.0  # time covered by the samples


class GpuSampler:
    """Samples every GPU NVML sees; a no-op when there is none."""

    def __init__(self, registry: CollectorRegistry | None = None, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.readings: list[GpuReading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open()
        self._gauges = _gauges(registry) if registry is not None and self.available else None

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def _open(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = int(pynvml.nvmlDeviceGetCount())
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = [pynvml.nvmlDeviceGetName(h) for h in self._handles]
        except Exception:  # no library, no driver, no GPU: telemetry is simply absent
            self._handles = []
            return
        self._nvml = pynvml
        self.readings = [GpuReading(i, n.decode() if isinstance(n, bytes) else str(n))
                         for i, n in enumerate(names)]

    def start(self) -> None:
        if self.available and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self.interval_s):
            now = time.perf_counter()
            self.sample(now - last)
            last = now

    def sample(self, elapsed_s: float) -> None:
        """Read every GPU once; `elapsed_s` since the previous sample weights the busy integral."""
        nvml = self._nvml
        for reading, handle in zip(self.readings, self._handles, strict=True):
            try:
                util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                power = _power_w(nvml, handle)
            except Exception:  # a GPU that stops answering keeps its last figures
                continue
            with self._lock:
                reading.utilization_percent = util
                reading.memory_used_bytes, reading.memory_total_bytes = int(memory.used), int(memory.total)
                reading.power_w = power
                reading.busy_s += util / 100.0 * elapsed_s
                reading.sampled_s += elapsed_s
            if self._gauges is not None:
                self._publish(reading)

    def _publish(self, reading: GpuReading) -> None:
        assert self._gauges is not None
        util, memory, power = self._gauges
        label = str(reading.index)
        util.labels(label).set(reading.utilization_percent)
        memory.labels(label).set(reading.memory_used_bytes)
        if reading.power_w is not None:
            power.labels(label).set(reading.power_w)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(r) for r in self.readings]


def _power_w(nvml: Any, handle: Any) -> float | None:
    try:
        return float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # milliwatts
    except Exception:
        return None


def _gauges(registry: CollectorRegistry) -> tuple[Gauge, Gauge, Gauge]:
    return (
        Gauge("qbench_gpu_utilization_percent", "GPU busy share in NVML's last sample", ["gpu"],
              registry=registry),
        Gauge("qbench_gpu_memory_used_bytes", "GPU memory in use", ["gpu"], registry=registry),
        Gauge("qbench_gpu_power_watts", "GPU power draw", ["gpu"], registry=registry),
    )
