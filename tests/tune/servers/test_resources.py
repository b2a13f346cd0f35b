"""qbench.tune.servers.resources: what a point's server used."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from qbench.tune.servers.resources import ResourceSampler, status_memory


def test_status_memory() -> None:
    status = {"peak_rss_bytes": 200 * 2**20, "torch_cuda_memory": {"peak_allocated_bytes": 2**30}}
    assert status_memory(status) == (200.0, 1024.0)
    assert status_memory({"torch_cuda_memory": None}) == (None, None)


def test_the_sampler_counts_a_grandchilds_memory_and_lists_the_tree_once_per_period(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The peak covers the whole tree (a grandchild holding 64 MiB); the tree is listed once per
    list_every_s, not at every sample (listing reads every process of the machine)."""
    holder = "b = bytearray(64 << 20); print('held', flush=True); import time; time.sleep(60)"
    parent = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]]); "
              "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", parent, holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        listed = 0
        children = psutil.Process.children

        def counted(self: psutil.Process, recursive: bool = False) -> list[psutil.Process]:
            nonlocal listed
            listed += 1
            return children(self, recursive=recursive)

        monkeypatch.setattr(psutil.Process, "children", counted)
        sampler = ResourceSampler(proc.pid, list_every_s=3600.0)
        peaks = [sampler.sample() for _ in range(20)]
        assert listed == 1 and min(peaks) >= 64
        with ResourceSampler(proc.pid, interval_s=0.01) as running:
            while running.peak_rss_mb == 0:
                time.sleep(0.01)
        assert running.peak_rss_mb >= 64
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
    assert ResourceSampler(proc.pid).sample() == 0.0  # gone: nothing to count
