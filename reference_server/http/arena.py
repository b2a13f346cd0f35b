"""Uploads' decoded images in memory the core shares with a front end (`launch.front_ends`).

A front end parses and decodes an upload (front_ends.Forwarder); the core keeps the decoded image
until the event that names it is batched. Sent over the link, each image (150 KB for 224x224 RGB)
cost the core a `read` of its bytes and a buffer of its own; through an arena it costs a view:

    core        makes one arena per front end (an anonymous `memfd`, BLOCKS blocks of BLOCK bytes),
                passes its descriptor to the front end's process and maps it (ArenaReader)
    front end   copies a decoded image into a free block (ArenaWriter.put) and sends the block's
                number and the image's shape instead of its bytes
    core        reads the image as an array over that block; once nothing holds the array (the batch
                was staged, the store dropped it) the block's number goes back to the front end on
                the link's next message (an `f` frame), and the block is free again

An image that does not fit a block, or finds every block taken, travels inline as before, so a full
arena slows nothing down but the copy it saves. Where `os.memfd_create` is missing there is no arena.
A part of an upload travels as a tuple, not as decode_pool's dataclasses (unpickling those looked
their classes up and built them field by field, per upload): see `to_wire` and `from_wire`.
"""

from __future__ import annotations

import math
import mmap
import os
import weakref
from collections import deque
from typing import Any

import numpy as np

from reference_server.io.decode_pool import Decoded, Failed, UploadPart

BLOCK = 1 << 20  # bytes: an RGB image up to ~590x590 (only the pages an image touches become memory)
BLOCKS = 128  # per front end: more than the uploads in flight at a few hundred users
# a decoded part on the link: (block, shape, decode_s, prepare_s), or (array, None, ...) inline
WirePart = tuple[str, "str | None", bytes, "tuple[Any, ...] | None"]


def make_arena(blocks: int = BLOCKS, block: int = BLOCK) -> int | None:
    """A new arena's descriptor (for the front end's process), or None without memfd."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create("qbench-upload-arena")  # close-on-exec: pass_fds hands it on
        os.ftruncate(fd, blocks * block)
    except OSError:
        return None
    return fd


class ArenaWriter:
    """The front end's side: hands out blocks, takes them back (LIFO, so the same few pages are reused)."""

    def __init__(self, fd: int, block: int = BLOCK) -> None:
        self.block = block
        self.map = mmap.mmap(fd, 0)  # the whole arena: as many blocks as its size holds
        self.free = list(range(len(self.map) // block - 1, -1, -1))

    def put(self, array: np.ndarray) -> int | None:
        """Copy a uint8 C-contiguous array into a free block; its number, or None (it travels inline)."""
        if not self.free or array.dtype != np.uint8 or not 0 < array.nbytes <= self.block:
            return None
        if not array.flags.c_contiguous:
            return None
        number = self.free.pop()
        at = number * self.block
        self.map[at:at + array.nbytes] = array.data.cast("B")
        return number

    def release(self, numbers: list[int]) -> None:
        self.free.extend(numbers)


class _Ref(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("number",)
    number: int


class ArenaReader:
    """The core's side: arrays over blocks, and the blocks nothing holds any more, for the next `f` frame.

    The block goes back when the memoryview numpy made for it dies: every array over the block (views,
    reshapes, views of views) holds it, directly or through the array it was made from, so no array
    outlives its block's reuse (the slice handed to numpy is not that memoryview: it dies at once)."""

    def __init__(self, fd: int, block: int = BLOCK) -> None:
        self.map = mmap.mmap(fd, 0)
        self.block, self.blocks = block, len(self.map) // block
        self._view = memoryview(self.map)
        self._held: dict[int, _Ref] = {}
        self.released: deque[int] = deque()  # appended by whichever thread drops the last array

    def array(self, number: int, shape: tuple[int, ...]) -> np.ndarray:
        """The image in block `number` (ValueError for a block or shape outside the arena)."""
        size = math.prod(shape)
        if not 0 <= number < self.blocks or not 0 <= size <= self.block or number in self._held:
            raise ValueError(f"bad arena block {number} for shape {shape}")
        at = number * self.block
        array = np.frombuffer(self._view[at:at + size], np.uint8)
        ref = _Ref(array.base, self._dropped)  # numpy's own memoryview: every array over it holds it
        ref.number = number
        self._held[number] = ref
        return array.reshape(shape)

    def _dropped(self, ref: _Ref) -> None:
        self._held.pop(ref.number, None)
        self.released.append(ref.number)

    def release_frame(self) -> tuple[str, list[int]] | None:
        """An `f` frame with the blocks released since the last one, or None."""
        if not self.released:
            return None
        out = []
        released = self.released
        while released:
            out.append(released.popleft())
        return ("f", out)


def to_wire(parsed: list[UploadPart] | Failed, writer: ArenaWriter | None) -> list[WirePart] | Failed:
    """A parsed upload as the link carries it: tuples, each decoded image in a block when one is free."""
    if isinstance(parsed, Failed):
        return parsed
    out: list[WirePart] = []
    for part in parsed:
        decoded = part.decoded
        wire = None
        if decoded is not None:
            number = writer.put(decoded.array) if writer is not None else None
            wire = ((decoded.array, None, decoded.decode_s, decoded.prepare_s) if number is None
                    else (number, decoded.array.shape, decoded.decode_s, decoded.prepare_s))
        out.append((part.name, part.filename, part.data, wire))
    return out


def from_wire(wire: Any, reader: ArenaReader | None) -> list[UploadPart] | Failed:
    """`to_wire`'s inverse in the core (parts already built, as tests send them, pass through)."""
    if isinstance(wire, Failed):
        return wire
    out = []
    for part in wire:
        if isinstance(part, UploadPart):
            out.append(part)
            continue
        name, filename, data, decoded = part
        if decoded is not None:
            where, shape, decode_s, prepare_s = decoded
            if shape is not None:
                if reader is None:
                    raise ValueError("an arena block from a front end without an arena")
                where = reader.array(where, shape)
            decoded = Decoded(where, decode_s, prepare_s)
        out.append(UploadPart(name, filename, data, decoded))
    return out
