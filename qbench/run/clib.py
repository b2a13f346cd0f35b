"""The C library through ctypes, loaded once per process.

    libc()    the C library (use_errno), None where there is none to load (not Linux, or not found)

`ctypes.util.find_library("c")` runs `/sbin/ldconfig -p` in a child process on every call: a fork of the
whole process, whose cost grows with its memory. A run asked it up to 7 times (the waker of each
generator, the allocator settings before and after sealing the records, each chart's trim); the library
is now found once, by its usual name first.
"""

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
