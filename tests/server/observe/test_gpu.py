"""GPU telemetry with a fake NVML: /status and /metrics carry it; without a GPU the fields are absent."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reference_server.observe.gpu import GpuSampler
from reference_server.settings import synthetic_settings
from reference_server.testing import serve_in_thread


def fake_nvml(util: float = 75.0) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    calls = {"n": 0}

    def utilization(handle: Any) -> Any:
        calls["n"] += 1
        return types.SimpleNamespace(gpu=util)

    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"gpu{i}"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = utilization  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2**30, total=80 * 2**30)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPowerUsage = lambda h: 350_000  # type: ignore[attr-defined]
    return nvml


@pytest.fixture
def with_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    yield


def test_the_sampler_integrates_utilisation(with_gpu: None) -> None:
    sampler = GpuSampler()
    assert sampler.available
    sampler.sample(2.0)
    sampler.sample(2.0)
    (reading,) = sampler.snapshot()
    assert reading["name"] == "NVIDIA H100 80GB HBM3" and reading["utilization_percent"] == 75.0
    assert reading["busy_s"] == pytest.approx(3.0) and reading["sampled_s"] == pytest.approx(4.0)
    assert reading["power_w"] == 350.0 and reading["memory_total_bytes"] == 80 * 2**30
    sampler.stop()


def test_status_and_metrics_report_the_gpu(with_gpu: None) -> None:
    with serve_in_thread(synthetic_settings()) as server:
        server.state.gpu.sample(1.0)  # type: ignore[union-attr]
        status = httpx.get(server.url + "/status").json()
        metrics = httpx.get(server.url + "/metrics").text
    assert status["gpu"][0]["utilization_percent"] == 75.0 and status["gpu"][0]["busy_s"] > 0
    assert 'qbench_gpu_utilization_percent{gpu="0"} 75.0' in metrics
    assert "qbench_gpu_power_watts" in metrics


def test_without_nvml_the_fields_are_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as on a machine without the library
    assert not GpuSampler().available
    with serve_in_thread(synthetic_settings()) as server:
        status = httpx.get(server.url + "/status").json()
        metrics = httpx.get(server.url + "/metrics").text
    assert "gpu" not in status and status["cpu_s"] > 0 and "qbench_gpu" not in metrics
