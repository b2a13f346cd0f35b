"""Device, dtype and tensor helpers of the model workloads (reference_server.workloads.models.device),
on the CPU (the CUDA paths run where `torch.cuda.is_available()`: tests/models/test_pixels.py)."""

from __future__ import annotations

import pytest
import torch

from reference_server.workloads.base import WorkloadConfigError
from reference_server.workloads.models.device import (
    apply_threads,
    cuda_memory,
    parameter_count,
    resolve_device,
    resolve_dtype,
    thread_count,
    to_device,
    to_model_inputs,
)

CPU = torch.device("cpu")


def test_cpu_resolves_and_a_missing_or_unknown_device_is_a_config_error() -> None:
    assert resolve_device("cpu") == CPU
    if not torch.cuda.is_available():
        with pytest.raises(WorkloadConfigError, match="CUDA is not available on this machine; use 'cpu'"):
            resolve_device("cuda:0")
    with pytest.raises(WorkloadConfigError, match=r"device 'meta': expected 'cpu' or 'cuda'"):
        resolve_device("meta")


def test_auto_is_float32_on_a_cpu_and_names_are_torch_dtypes() -> None:
    assert resolve_dtype("auto", CPU) is torch.float32
    assert resolve_dtype("bfloat16", CPU) is torch.bfloat16
    assert resolve_dtype("float16", CPU) is torch.float16


def test_floating_inputs_take_the_model_dtype_and_integer_ids_stay() -> None:
    batch = {"pixel_values": torch.zeros(2, 3, dtype=torch.float32), "input_ids": torch.arange(4)}
    moved = to_model_inputs(batch, CPU, torch.bfloat16)
    assert moved["pixel_values"].dtype is torch.bfloat16 and moved["input_ids"].dtype is torch.int64
    assert torch.equal(moved["input_ids"], torch.arange(4))
    tensor = torch.ones(3)
    assert to_device(tensor, CPU) is tensor  # already there: no copy


def test_parameters_memory_and_threads() -> None:
    assert parameter_count(torch.nn.Linear(3, 2)) == 3 * 2 + 2
    assert cuda_memory(CPU) == {}
    before = thread_count()
    try:
        apply_threads(1)
        assert thread_count() == 1
        apply_threads(None)  # None leaves the process-wide setting alone
        assert thread_count() == 1
    finally:
        torch.set_num_threads(before)
