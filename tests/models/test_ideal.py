"""`image-ideal` (reference_server.workloads.ideal): the image preset's per-request work in front of a
device that is a known wait, its labels, its params and its input errors."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from reference_server.workloads.base import WorkloadConfigError, WorkloadInputError
from reference_server.workloads.ideal import IdealAccelerator, image_ideal
from reference_server.workloads.models.pixels import Pixels


def test_defaults_and_params() -> None:
    workload = image_ideal({})
    figures = (workload.batch_ms, workload.per_image_ms, workload.top_k, workload.num_labels)
    assert figures == (5.0, 0.0, 5, 1000)
    small = image_ideal({"batch_ms": 0, "per_image_ms": 1, "top_k": 9, "num_labels": 3})
    assert small.top_k == 3  # never more labels than the model has
    with pytest.raises(WorkloadConfigError, match="image-ideal"):
        image_ideal({"batch_ms": -1})
    with pytest.raises(WorkloadConfigError, match="image-ideal"):
        image_ideal({"batch": 5})


def test_a_row_is_decoded_to_uint8_rgb_without_a_resize() -> None:
    workload = image_ideal({})
    (pixels,) = workload.prepare_row([Image.new("L", (7, 5), 128)])
    assert isinstance(pixels, Pixels) and pixels.array.shape == (5, 7, 3) and pixels.array.dtype == np.uint8
    assert workload.pixel_prep().size is None
    with pytest.raises(WorkloadInputError, match="expected a non-empty image"):
        workload.prepare_row(["not an image"])


def test_a_batch_waits_batch_ms_plus_per_image_and_labels_each_image() -> None:
    workload = IdealAccelerator(batch_ms=0.0, per_image_ms=20.0, top_k=2, num_labels=4)
    images = [Image.new("RGB", (4, 4)), Image.new("RGB", (6, 3))]  # two shapes: two host stacks
    start = time.perf_counter()
    (labels,) = workload.run_batch([images])
    assert time.perf_counter() - start >= 0.04  # 2 x 20 ms (a lower bound only: the host may be busy)
    assert labels == [{"label": "LABEL_0", "confidences": [{"label": "LABEL_0", "confidence": 0.25},
                                                           {"label": "LABEL_1", "confidence": 0.25}]}] * 2
    assert workload.run([Image.new("RGB", (2, 2))]) == [labels[0]]
