"""The C library through ctypes (`libc()`), loaded once per process; None where there is none to load."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any


@functools.cache
def libc() -> Any:
    """The C library (glibc's `libc.so.6`, else what ctypes finds), None off Linux or when none loads."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        pass
    name = ctypes.util.find_library("c")  # another C library (musl): its own name
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
