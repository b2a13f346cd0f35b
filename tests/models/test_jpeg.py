"""`decode: device` (models/jpeg.py): JPEGs kept encoded by the decode workers, decoded as one batch on
the model's device, against the CPU decode workers' arrays for the same JPEGs.

On this CPU-only machine torchvision is absent (its PyPI wheel for torch 2.13.0 is a CUDA build), so the
device path on `cpu` decodes with PIL behind the same batched interface; the CUDA tests (nvJPEG through
torchvision) run only where a GPU and torchvision are present.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client, handle_file
from PIL import Image

import reference_server.workloads.models.jpeg as jpeg
from reference_server.io.decode_pool import Decoded, PixelPrep, decode_image, device_decodable
from reference_server.settings import synthetic_settings
from reference_server.testing import serve_in_thread
from reference_server.workloads import WorkloadConfigError, WorkloadInputError, build_workload
from reference_server.workloads.models.jpeg import JpegDecoder, torchvision_error
from reference_server.workloads.models.pixels import Pixels, PixelSpec, pixel_batch
from reference_server.workloads.models.vision import ImageClassification

from .inputs import TINY

CPU = torch.device("cpu")
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TORCHVISION = pytest.mark.skipif(torchvision_error() is not None, reason=f"{torchvision_error()}")
SPEC = PixelSpec(32, 32, 2, "bilinear", 1 / 255, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
ONE_STEP = 2 / 255  # one uint8 step after normalising with std 0.5


def photo(width: int, height: int, seed: int) -> Image.Image:
    """Smooth content with some noise (JPEG-friendly, like the scenarios' photo-like images)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, width)[None, :, None]
    y = np.linspace(0, 1, height)[:, None, None]
    smooth = 255 * np.concatenate([x * (1 - y), y + 0 * x, (x + y) / 2], axis=2)
    rgb = smooth + rng.normal(0, 8, (height, width, 3))
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def encode(image: Image.Image, fmt: str = "JPEG", **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


JPEGS = [encode(photo(32, 32, 1)), encode(photo(64, 48, 2)), encode(photo(200, 120, 3).convert("L")),
         encode(photo(17, 40, 4), quality=70)]
ENCODED = PixelPrep(None, SPEC.resample, encoded=True)
CPU_WORKERS = PixelPrep((SPEC.width, SPEC.height), SPEC.resample)  # what a CPU server's workers do


def worker(raw: bytes, prep: PixelPrep) -> Pixels:
    """What a decode worker returns for `raw`, as the batch receives it."""
    decoded = decode_image(raw, "image", prep)
    assert isinstance(decoded, Decoded)
    return Pixels(decoded.array)


# ---------------------------------------------------------------- in the decode worker
def test_the_worker_keeps_baseline_jpegs_encoded_and_decodes_the_rest() -> None:
    rgb = photo(40, 30, 5)
    assert device_decodable(JPEGS[0]) and device_decodable(JPEGS[2])  # RGB and greyscale
    assert not device_decodable(encode(rgb, progressive=True))
    assert not device_decodable(encode(rgb.convert("CMYK")))
    assert not device_decodable(encode(rgb, "PNG")) and not device_decodable(b"\xff\xd8 not a jpeg")
    kept = worker(JPEGS[1], ENCODED).array
    assert kept.ndim == 1 and kept.tobytes() == JPEGS[1]
    png = worker(encode(rgb, "PNG"), ENCODED).array
    assert png.shape == (30, 40, 3)  # decoded whole: the device resizes it
    assert worker(JPEGS[1], PixelPrep(None)).array.shape == (48, 64, 3)  # not asked: decoded as before


# ---------------------------------------------------------------- in the batch
def test_the_device_path_on_the_cpu_matches_the_cpu_decode_workers() -> None:
    """Same JPEGs: decoded and resized by the workers (PIL) vs kept encoded and decoded + resized as a
    batch (torch): within one uint8 step everywhere, and exact for the image already at the model's size."""
    decoder = JpegDecoder(CPU)
    host = pixel_batch([worker(raw, CPU_WORKERS) for raw in JPEGS], SPEC, CPU, torch.float32)
    rows = [worker(raw, ENCODED) for raw in JPEGS]
    assert all(row.array.ndim == 1 for row in rows)
    device = pixel_batch(rows, SPEC, CPU, torch.float32, decoder=decoder)
    diff = (device - host).abs()
    assert device.shape == (len(JPEGS), 3, 32, 32)
    assert float(diff.max()) <= ONE_STEP + 1e-6 and float(diff.mean()) < 0.01
    assert float(diff[0].max()) < 1e-6


def test_a_batch_may_mix_encoded_jpegs_and_host_decoded_images_in_order() -> None:
    png = encode(photo(50, 20, 6), "PNG")
    mixed = [worker(JPEGS[1], ENCODED), worker(png, ENCODED), worker(JPEGS[0], ENCODED)]
    assert [row.array.ndim for row in mixed] == [1, 3, 1]
    out = pixel_batch(mixed, SPEC, CPU, torch.float32, decoder=JpegDecoder(CPU))
    alone = [pixel_batch([row], SPEC, CPU, torch.float32, decoder=JpegDecoder(CPU))[0] for row in mixed]
    for got, want in zip(out, alone, strict=True):
        assert torch.allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match="JpegDecoder"):
        pixel_batch(mixed, SPEC, CPU, torch.float32)


def test_a_jpeg_whose_data_does_not_decode_fails_the_batch_as_bad_input(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With PIL (libjpeg through torchvision may fill a truncated JPEG's rest with grey instead)."""
    monkeypatch.setattr(jpeg, "torchvision_error", lambda: "not used here")
    whole = encode(photo(200, 150, 8))
    truncated = whole[: len(whole) * 3 // 5]
    assert device_decodable(truncated)  # the header reads: the worker keeps it encoded
    rows = [worker(JPEGS[0], ENCODED), worker(truncated, ENCODED)]
    with pytest.raises(WorkloadInputError, match="a JPEG did not decode"):
        pixel_batch(rows, SPEC, CPU, torch.float32, decoder=JpegDecoder(CPU))


def test_the_workload_asks_for_encoded_jpegs_and_labels_as_with_cpu_decode() -> None:
    device = build_workload("image-classification", {**TINY, "decode": "device"})
    host = build_workload("image-classification", TINY)
    assert isinstance(device, ImageClassification) and isinstance(host, ImageClassification)
    device.load("cpu")
    host.load("cpu")
    assert device.pixel_prep() == PixelPrep(None, 2, encoded=True)
    assert host.pixel_prep() == PixelPrep((32, 32), 2)
    got = device.run_batch([[worker(raw, ENCODED) for raw in JPEGS]])[0]
    want = host.run_batch([[worker(raw, CPU_WORKERS) for raw in JPEGS]])[0]
    assert [g["label"] for g in got] == [w["label"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert np.allclose([c["confidence"] for c in g["confidences"]],
                           [c["confidence"] for c in w["confidences"]], atol=2e-3)
    expected = "PIL" if torchvision_error() else "torchvision"
    assert expected in device.describe()["decode"] and host.describe()["decode"] == "host (decode: cpu)"


def test_cuda_without_torchvision_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jpeg, "torchvision_error", lambda: "the package 'torchvision' is not installed")
    needs = "needs torchvision.*'torchvision' is not installed.*qbench\\[gpu\\]"
    with pytest.raises(WorkloadConfigError, match=needs):
        JpegDecoder(torch.device("cuda"))
    assert JpegDecoder(CPU).name == "PIL (no torchvision)"  # the CPU keeps a fallback


@pytest.mark.parametrize(("params", "message"), [
    ({"decode": "gpu"}, "params.decode = 'gpu': expected one of cpu, device"),
    ({"decode": "device", "preprocess": "processor"}, "needs preprocess: auto"),
])
def test_bad_decode_params_name_the_key(params: dict[str, object], message: str) -> None:
    with pytest.raises(WorkloadConfigError, match=message):
        build_workload("image-classification", {**TINY, **params})


# ---------------------------------------------------------------- through the server
def test_a_server_with_decode_workers_serves_device_decoded_jpegs(tmp_path: Path) -> None:
    """decode: device behind one decode worker, on the CPU: the same labels as the default server for a
    JPEG at the model's size (both decode it with PIL here, neither resizes) and for a PNG."""
    fn = {"api_name": "classify", "workload": "image-classification", "batch": True, "max_batch_size": 4,
          "params": {"size": "tiny", "num_labels": 7}}
    paths = [tmp_path / "in.jpg", tmp_path / "in.png"]
    paths[0].write_bytes(JPEGS[0])
    paths[1].write_bytes(encode(photo(50, 70, 7), "PNG"))
    answers = []
    for decode in ("cpu", "device"):
        spec = {**fn, "params": {"size": "tiny", "num_labels": 7, "decode": decode}}
        settings = synthetic_settings(functions=[spec], launch={"decode_workers": 1}, device="cpu")
        with serve_in_thread(settings) as running:
            assert running.state.pool is not None
            assert running.state.pool.upload_prep == PixelPrep(
                None if decode == "device" else (32, 32), 2, encoded=decode == "device")
            client = Client(running.url, verbose=False)
            answers.append([client.predict(handle_file(str(p)), api_name="/classify") for p in paths])
    assert answers[0][0] == answers[1][0]
    assert answers[0][1]["label"] == answers[1][1]["label"]


# ---------------------------------------------------------------- CUDA only
@CUDA
@TORCHVISION
def test_cuda_nvjpeg_batch_matches_the_cpu_decode_workers() -> None:
    """nvJPEG and libjpeg-turbo differ (chroma upsampling, IDCT): on an H200, 224x224 q85 JPEGs decoded
    3 uint8 levels apart on average, 29 at most; here within 4 on average, 40 at most."""
    cuda = torch.device("cuda")
    host = pixel_batch([worker(raw, CPU_WORKERS) for raw in JPEGS], SPEC, CPU, torch.float32)
    rows = [worker(raw, ENCODED) for raw in JPEGS]
    device = pixel_batch(rows, SPEC, cuda, torch.float32, decoder=JpegDecoder(cuda))
    assert device.device.type == "cuda"
    diff = (device.cpu() - host).abs()
    assert float(diff.mean()) < 4 * ONE_STEP and float(diff.max()) <= 40 * ONE_STEP + 1e-5


@CUDA
@TORCHVISION
def test_cuda_workload_with_device_decode_warms_up_and_serves() -> None:
    workload = build_workload("image-classification", {**TINY, "decode": "device", "dtype": "auto"})
    workload.load("cuda")
    workload.warmup()
    labels = workload.run_batch([[worker(raw, ENCODED) for raw in JPEGS]])[0]
    assert len(labels) == len(JPEGS) and "torchvision decode_jpeg on cuda" in workload.describe()["decode"]
