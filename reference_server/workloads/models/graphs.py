"""A fixed-shape forward pass over padded batch-size buckets, replayed as CUDA graphs (`cuda_graphs: N`).

A small batch on a fast GPU spends much of its forward pass launching kernels (ViT-B/16: ~200
launches per pass). A CUDA graph replays the whole pass as one launch, but only at the shapes it was
captured with; so batch sizes are rounded up to buckets, the powers of two up to N (and N):

    warm-up   one graph per bucket, largest first, all in one memory pool (they never run at once)
    a batch   of n rows runs in the smallest bucket >= n: its rows are copied into the graph's static
              input, the rows after them zeroed, the graph replayed, and the first n rows of the output
              cloned out; a batch larger than N runs eagerly, unpadded
    on a CPU  nothing is captured: the batch is padded to its bucket and run eagerly (what the tests
              check: padding and slicing give the unpadded forward's answer, row for row)

Every row of a batch is independent in a classifier (no op mixes rows), so the padding rows change
nothing in the real ones, and they are sliced off before anyone sees them. One lock serialises the
replays, since the graphs share a static input, an output and a memory pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Forward = Callable[["torch.Tensor"], "torch.Tensor"]
WARM_UP_RUNS = 3  # eager runs on a side stream before a capture (cuBLAS and allocator set-up)


def buckets(largest: int) -> tuple[int, ...]:
    """The powers of two below `largest`, then `largest`: 1, 2, 4, 8 for 8; 1, 2, 4, 8, 12 for 12."""
    if largest < 1:
        raise ValueError(f"the largest bucket must be >= 1, got {largest}")
    sizes, size = [], 1
    while size < largest:
        sizes.append(size)
        size *= 2
    return (*sizes, largest)


def bucket_for(rows: int, sizes: tuple[int, ...]) -> int | None:
    """The smallest bucket that holds `rows`, or None when it is larger than every bucket."""
    return next((size for size in sizes if size >= rows), None)


def padded(x: torch.Tensor, size: int) -> torch.Tensor:
    """`x` with zero rows appended up to `size` rows."""
    import torch

    if x.shape[0] == size:
        return x
    return torch.cat([x, x.new_zeros((size - x.shape[0], *x.shape[1:]))])


@dataclass
class _Graph:
    graph: Any  # torch.cuda.CUDAGraph
    input: torch.Tensor  # the static input the graph reads
    output: torch.Tensor  # the static output the graph writes


class BucketedForward:
    """`forward` over padded buckets up to `largest`; `capture()` records them as CUDA graphs."""

    def __init__(self, forward: Forward, largest: int) -> None:
        self.forward = forward
        self.sizes = buckets(largest)
        self.graphs: dict[int, _Graph] = {}
        self.padding_rows = 0  # rows of padding run so far (what the buckets cost)
        self._lock = threading.Lock()

    def capture(self, row_shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        """One graph per bucket for inputs of rows shaped `row_shape` (CUDA only), largest first so the
        smaller ones find the pool's memory already there."""
        import torch

        if device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, got {device}")
        pool = torch.cuda.graph_pool_handle()
        with torch.inference_mode():
            for size in sorted(self.sizes, reverse=True):
                self.graphs[size] = _capture(self.forward, (size, *row_shape), dtype, device, pool)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        size = bucket_for(rows, self.sizes)
        if size is None:
            return self.forward(x)
        self.padding_rows += size - rows
        graph = self.graphs.get(size)
        if graph is None or graph.input.shape[1:] != x.shape[1:] or graph.input.dtype != x.dtype:
            return self.forward(padded(x, size))[:rows]
        with self._lock:
            graph.input[:rows].copy_(x)
            graph.input[rows:].zero_()
            graph.graph.replay()
            return graph.output[:rows].clone()


def _capture(forward: Forward, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
             pool: Any) -> _Graph:
    import torch

    static = torch.zeros(shape, dtype=dtype, device=device)
    side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARM_UP_RUNS):
            forward(static)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        output = forward(static)
    return _Graph(graph, static, output)
