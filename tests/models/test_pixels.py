"""Image preprocessing as tensor ops (pixels.py) against the model's own image processor; dtype auto.

The CUDA tests run only where `torch.cuda.is_available()` (skipped on the CPU-only test machine).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from reference_server.workloads import WorkloadInputError, build_workload
from reference_server.workloads.models.device import resolve_dtype, to_device, to_model_inputs
from reference_server.workloads.models.pixels import Pixels, PixelSpec, pixel_batch, pixel_spec, to_pixels
from reference_server.workloads.models.vision import ImageClassification

from .inputs import IMAGES, TINY, image

CPU = torch.device("cpu")
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@functools.cache
def processor() -> Any:
    """ViT's own PIL processor (imported here: transformers' import costs every collecting worker ~3 s)."""
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    return ViTImageProcessorPil(size={"height": 32, "width": 48})


@functools.cache
def spec() -> PixelSpec | None:
    return pixel_spec(processor())


MIXED = [*IMAGES, image(48, 32, 4), image(640, 480, 5)]  # one already at the model's size


_LOADED: dict[str, ImageClassification] = {}


def loaded(**params: Any) -> ImageClassification:
    """One loaded tiny image classifier per params, shared by this module's CPU tests."""
    key = repr(sorted(params.items()))
    if key not in _LOADED:
        workload = build_workload("image-classification", {**TINY, **params})
        assert isinstance(workload, ImageClassification)
        workload.load("cpu")
        _LOADED[key] = workload
    return _LOADED[key]


def reference(images: list[Image.Image]) -> torch.Tensor:
    out: torch.Tensor = processor()(images=images, return_tensors="pt")["pixel_values"]
    return out


def test_the_spec_reads_a_plain_processor() -> None:
    assert spec() == PixelSpec(32, 48, 2, "bilinear", 1 / 255, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


@pytest.mark.parametrize(
    "changes",
    [{"do_center_crop": True}, {"do_pad": True}, {"size": {"shortest_edge": 224}}, {"resample": 0},
     {"do_resize": False}],
    ids=["crop", "pad", "shortest-edge", "nearest", "no-resize"],
)
def test_processors_that_do_more_keep_the_processor_path(changes: dict[str, Any]) -> None:
    plain = {"do_resize": True, "size": {"height": 8, "width": 8}, "resample": 2, "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    assert pixel_spec(SimpleNamespace(**plain)) is not None
    assert pixel_spec(SimpleNamespace(**{**plain, **changes})) is None


def test_resized_with_pil_it_is_the_processor_exactly() -> None:
    assert spec() is not None
    out = pixel_batch([to_pixels(i, spec(), resize=True) for i in MIXED], spec(), CPU, torch.float32)
    assert torch.allclose(out, reference(MIXED), atol=1e-6)


def test_resized_by_torch_it_is_within_one_uint8_step_and_keeps_the_order() -> None:
    """The GPU path: mixed sizes are grouped, resized with antialiasing, and put back in request order."""
    assert spec() is not None
    out = pixel_batch([to_pixels(i, spec(), resize=False) for i in MIXED], spec(), CPU, torch.float32)
    diff = (out - reference(MIXED)).abs()
    assert out.shape == (len(MIXED), 3, 32, 48) and float(diff.max()) <= 2 / 255 + 1e-6
    assert float(diff.mean()) < 0.01
    assert float(diff[3].max()) < 1e-6  # the image already at the model's size is not resampled


def test_the_workload_serves_the_same_labels_either_way() -> None:
    fast, slow = loaded(dtype="auto"), loaded(preprocess="processor")
    rows = [fast.prepare_row([value]) for value in MIXED]
    assert all(isinstance(row[0], Pixels) for row in rows)
    assert slow.prepare_row([MIXED[0]]) == [MIXED[0]]  # the processor path prepares nothing
    got, want = fast.run_batch([[row[0] for row in rows]])[0], slow.run_batch([MIXED])[0]
    assert [g["label"] for g in got] == [w["label"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert np.allclose([c["confidence"] for c in g["confidences"]],
                           [c["confidence"] for c in w["confidences"]], atol=1e-4)
    assert "tensor ops on cpu" in fast.describe()["preprocessor"]


def test_a_bad_image_is_left_for_the_batch_to_reject() -> None:
    """prepare_row never rejects: as in Gradio, one bad input fails the whole batch (run_batch)."""
    workload = loaded(dtype="auto")
    assert workload.prepare_row(["not an image"]) == ["not an image"]
    good = workload.prepare_row([IMAGES[0]])[0]
    with pytest.raises(WorkloadInputError, match="expected an image"):
        workload.run_batch([[good, "not an image"]])


def test_dtype_auto_is_float32_on_the_cpu_and_named_in_describe() -> None:
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16
    facts = loaded(dtype="auto").describe()
    assert facts["dtype"] == "float32" and facts["dtype_setting"] == "auto" and facts["compiled"] is False


def test_bfloat16_pixels_reach_a_bfloat16_model() -> None:
    workload = build_workload("image-classification", {**TINY, "dtype": "bfloat16"})
    workload.load("cpu")
    assert workload.run([IMAGES[1]])[0]["label"]


def test_host_tensors_stay_put_on_the_cpu() -> None:
    t = torch.arange(6).view(2, 3)
    assert to_device(t, torch.device("cpu")) is t
    moved = to_model_inputs({"ids": t, "x": t.float()}, torch.device("cpu"), torch.bfloat16)
    assert moved["ids"].dtype == torch.int64 and moved["x"].dtype == torch.bfloat16


# ---------------------------------------------------------------- CUDA only
@CUDA
def test_cuda_pixels_match_the_processor_within_one_uint8_step() -> None:
    assert spec() is not None
    device = torch.device("cuda")
    out = pixel_batch([to_pixels(i, spec(), resize=False) for i in MIXED], spec(), device, torch.float32)
    assert out.device.type == "cuda"
    assert float((out.cpu() - reference(MIXED)).abs().max()) <= 2 / 255 + 1e-5


@CUDA
def test_cuda_copies_are_pinned_and_correct() -> None:
    t = torch.arange(1000, dtype=torch.int64)
    moved = to_model_inputs({"ids": t, "x": t.float()}, torch.device("cuda"), torch.float16)
    torch.cuda.synchronize()
    assert moved["ids"].device.type == "cuda" and torch.equal(moved["ids"].cpu(), t)
    assert moved["x"].dtype == torch.float16


@CUDA
def test_cuda_dtype_auto_and_the_workload_on_the_gpu() -> None:
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == expected
    workload = build_workload("image-classification", {**TINY, "dtype": "auto"})
    workload.load("cuda")
    assert workload.describe()["dtype"] == str(expected).removeprefix("torch.")
    rows = [workload.prepare_row([value])[0] for value in MIXED]
    labels = workload.run_batch([rows])[0]
    assert len(labels) == len(MIXED) and "on the GPU" in workload.describe()["preprocessor"]


@CUDA
def test_cuda_compiled_model_serves_several_batch_sizes() -> None:
    workload = build_workload("image-classification", {**TINY, "compile": True})
    workload.load("cuda")
    workload.warmup()
    for n in (1, 3, 8):
        assert len(workload.run_batch([[IMAGES[0]] * n])[0]) == n
    facts = workload.describe()
    assert facts["compiled"] is True and facts["architecture"] == "ViTForImageClassification"


def test_compile_wraps_the_model_and_warms_up_a_batch_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile itself takes minutes on this CPU; here it is a recording stand-in (CUDA test below)."""
    calls: list[dict[str, Any]] = []

    def fake_compile(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        calls.append(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    workload = build_workload("image-classification", {**TINY, "compile": True})
    sizes: list[int] = []
    real = workload.run_batch
    monkeypatch.setattr(workload, "run_batch", lambda cols: sizes.append(len(cols[0])) or real(cols))
    workload.load("cpu")
    workload.warmup()
    assert calls == [{"dynamic": True, "backend": "inductor"}] and sizes == [1, 2]
    assert workload.describe()["compiled"] is True and workload.describe()["compile_backend"] == "inductor"
    named = build_workload("image-classification", {**TINY, "compile": "aot_eager"})
    named.load("cpu")
    assert calls[-1] == {"dynamic": True, "backend": "aot_eager"}
    assert named.describe()["compile_backend"] == "aot_eager"
