"""qbench.tune.servers.resources: what a point's server used."""

from __future__ import annotations

from qbench.tune.servers.resources import status_memory


def test_status_memory() -> None:
    status = {"peak_rss_bytes": 200 * 2**20, "torch_cuda_memory": {"peak_allocated_bytes": 2**30}}
    assert status_memory(status) == (200.0, 1024.0)
    assert status_memory({"torch_cuda_memory": None}) == (None, None)
