"""`cuda_graphs: N` (models/graphs.py): padded batch-size buckets give the unpadded forward's answers, row
for row, and no padding row reaches a response. The capture itself runs only where CUDA is available."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from reference_server.workloads import WorkloadConfigError, build_workload
from reference_server.workloads.models.graphs import BucketedForward, bucket_for, buckets, padded

from .inputs import IMAGES, TINY

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_buckets_are_powers_of_two_up_to_the_largest() -> None:
    assert buckets(1) == (1,) and buckets(8) == (1, 2, 4, 8) and buckets(12) == (1, 2, 4, 8, 12)
    assert [bucket_for(n, buckets(8)) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, None]
    with pytest.raises(ValueError, match=">= 1"):
        buckets(0)


def test_padding_appends_zero_rows_only() -> None:
    x = torch.arange(6.0).view(2, 3)
    out = padded(x, 4)
    assert out.shape == (4, 3) and torch.equal(out[:2], x) and not out[2:].any()
    assert padded(x, 2) is x


class Recorder(torch.nn.Module):
    """A row-independent model that records the batch sizes it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 3)
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(x.shape[0])
        return torch.tanh(self.linear(x)) + 1.0  # padding rows (zeros) would give tanh(bias) + 1, not 0


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7, 8, 9, 13])
def test_padded_buckets_give_the_unpadded_answer_and_only_its_rows(rows: int) -> None:
    torch.manual_seed(rows)
    model = Recorder()
    bucketed = BucketedForward(model, largest=8)
    x = torch.randn(rows, 5)
    with torch.inference_mode():
        got, want = bucketed(x), model(x)
    assert got.shape == want.shape == (rows, 3)
    assert torch.allclose(got, want, atol=1e-6)
    bucket = bucket_for(rows, bucketed.sizes)
    assert model.sizes[0] == (bucket or rows)  # ran padded to its bucket (eagerly past the largest)
    assert bucketed.padding_rows == (bucket or rows) - rows
    assert bucketed.graphs == {}  # nothing captured without CUDA


def test_capture_needs_cuda() -> None:
    with pytest.raises(ValueError, match="CUDA device"):
        BucketedForward(Recorder(), 4).capture((5,), torch.float32, torch.device("cpu"))


def test_the_workload_pads_on_the_cpu_and_answers_each_request_with_its_own_row() -> None:
    """cuda_graphs: 4 on the CPU pads (nothing is captured there): a batch of 3 runs as 4, and its 3 labels
    are the unpadded workload's, in order."""
    graphed = build_workload("image-classification", {**TINY, "cuda_graphs": 4})
    plain = build_workload("image-classification", TINY)
    graphed.load("cpu")
    plain.load("cpu")
    images = [IMAGES[0], IMAGES[1], IMAGES[2]]
    got, want = graphed.run_batch([images])[0], plain.run_batch([images])[0]
    assert len(got) == 3
    assert [g["label"] for g in got] == [w["label"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert np.allclose([c["confidence"] for c in g["confidences"]],
                           [c["confidence"] for c in w["confidences"]], atol=1e-5)
    facts = graphed.describe()
    assert facts["cuda_graphs"] == "buckets [1, 2, 4], padded, not captured"
    assert facts["cuda_graph_padding_rows"] == 1 and "cuda_graphs" not in plain.describe()
    assert len(graphed.run_batch([[IMAGES[0]] * 6])[0]) == 6  # past the largest bucket: unpadded


def test_cuda_graphs_and_compile_are_either_or() -> None:
    with pytest.raises(WorkloadConfigError, match="either-or"):
        build_workload("image-classification", {**TINY, "cuda_graphs": 8, "compile": True})
    with pytest.raises(WorkloadConfigError, match="params.cuda_graphs = -1: expected an integer >= 0"):
        build_workload("image-classification", {**TINY, "cuda_graphs": -1})


# ---------------------------------------------------------------- CUDA only
@CUDA
def test_cuda_graph_replays_match_the_eager_forward_for_every_size() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = Recorder().to(device)
    bucketed = BucketedForward(model, largest=8)
    bucketed.capture((5,), torch.float32, device)
    assert sorted(bucketed.graphs) == [1, 2, 4, 8]
    with torch.inference_mode():
        for rows in (1, 3, 4, 6, 8, 9):
            x = torch.randn(rows, 5, device=device)
            model.sizes.clear()
            got = bucketed(x)
            assert got.shape == (rows, 3) and torch.allclose(got, model(x), atol=1e-5)
            assert model.sizes == ([rows] if rows <= 8 else [rows, rows])  # replayed: no eager call


@CUDA
def test_cuda_graph_replays_from_several_threads_keep_their_own_rows() -> None:
    device = torch.device("cuda")
    torch.manual_seed(1)
    model = Recorder().to(device)
    bucketed = BucketedForward(model, largest=4)
    bucketed.capture((5,), torch.float32, device)
    inputs = [torch.randn(1 + i % 4, 5, device=device) for i in range(32)]
    results: dict[int, torch.Tensor] = {}

    def run(i: int) -> None:
        with torch.inference_mode():
            results[i] = bucketed(inputs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with torch.inference_mode():
        for i, x in enumerate(inputs):
            assert torch.allclose(results[i], model(x), atol=1e-5)


@CUDA
def test_cuda_workload_captures_at_warm_up_and_serves_every_size() -> None:
    graphed = build_workload("image-classification", {**TINY, "cuda_graphs": 8, "dtype": "auto"})
    plain = build_workload("image-classification", {**TINY, "dtype": "auto"})
    graphed.load("cuda")
    plain.load("cuda")
    graphed.warmup()
    assert graphed.describe()["cuda_graphs"] == "buckets [1, 2, 4, 8], captured as CUDA graphs"
    for n in (1, 3, 8, 11):
        rows = [IMAGES[i % len(IMAGES)] for i in range(n)]
        got, want = graphed.run_batch([rows])[0], plain.run_batch([rows])[0]
        assert len(got) == n
        for g, w in zip(got, want, strict=True):
            assert np.allclose([c["confidence"] for c in g["confidences"]],
                               [c["confidence"] for c in w["confidences"]], atol=2e-2)
