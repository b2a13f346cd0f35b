"""The Makefile's check on a deliberately slowed machine: `make test-busy` starts BUSY busy loops, runs
the target beside them and stops them when it ends (the suite itself is what it runs: not run here)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_test_busy_starts_its_busy_loops_and_stops_them() -> None:
    done = subprocess.run(["make", "-s", "test-busy", "BUSY=2", "BUSY_TARGET=--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"^2 busy loops beside the suite \(pids (\d+) (\d+)\)$", done.stdout, re.M)
    assert found and "GNU Make" in done.stdout, done.stdout
    deadline = time.monotonic() + 10  # killed when the target ended (a signal takes a moment)
    while any(busy(pid) for pid in found.groups()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(busy(pid) for pid in found.groups())


def busy(pid: str) -> bool:
    """Whether `pid` is still a running `yes` (a zombie's cmdline is empty)."""
    try:
        return "yes" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False
