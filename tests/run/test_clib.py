"""qbench.run.clib: the C library loaded once, without a child process (find_library forks `ldconfig -p`)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from qbench.run import clib


def test_the_c_library_loads_once_and_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    clib.libc.cache_clear()
    first = clib.libc()
    assert first is clib.libc()  # loaded once
    if sys.platform.startswith("linux"):
        assert first is not None and hasattr(first, "malloc_trim")
    clib.libc.cache_clear()
