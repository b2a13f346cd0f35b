"""Random ids in `uuid.uuid4().hex`'s form (event ids, upload folders), read from the OS 256 at a time.

`uuid4()` reads 16 bytes from `os.urandom` (a syscall) and builds a UUID object for each id; the server
makes two per image request (its upload's folder, its event). Here one read of 4 KiB serves 256 ids,
with the same randomness source and the same version and variant bits.
"""

from __future__ import annotations

import os
import threading

_BATCH = 256  # ids per read
_lock = threading.Lock()  # uploads are stored from worker threads too
_pool = b""
_at = 0


def random_hex() -> str:
    """32 lower-case hex digits, a random UUID version 4 (what `uuid.uuid4().hex` returns)."""
    global _pool, _at
    with _lock:
        if _at >= len(_pool):
            _pool, _at = os.urandom(16 * _BATCH), 0
        raw = bytearray(_pool[_at:_at + 16])
        _at += 16
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


def _forget() -> None:
    """A forked child must not hand out its parent's ids."""
    global _pool, _at
    _pool, _at = b"", 0


os.register_at_fork(after_in_child=_forget)
