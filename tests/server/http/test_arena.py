"""Uploads' decoded images through an arena the core shares with a front end (reference_server.http.arena)."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from typing import Any

import numpy as np
import pytest

from reference_server.http.arena import ArenaReader, ArenaWriter, from_wire, make_arena, to_wire
from reference_server.http.front_ends import CoreLink, Forwarder, Link, encode
from reference_server.io.decode_pool import Decoded, Failed, UploadPart

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="arenas need memfd_create")


def pair(blocks: int = 4, block: int = 4096) -> tuple[ArenaWriter, ArenaReader]:
    fd = make_arena(blocks, block)
    assert fd is not None
    try:
        return ArenaWriter(fd, block), ArenaReader(fd, block)
    finally:
        os.close(fd)


def image(seed: int, shape: tuple[int, ...] = (16, 20, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def part(array: np.ndarray, name: str = "a.png") -> UploadPart:
    return UploadPart("files", name, b"raw bytes", Decoded(array, 0.002, 0.001))


def roundtrip(parsed: list[UploadPart] | Failed, writer: ArenaWriter | None, reader: ArenaReader | None
              ) -> list[UploadPart] | Failed:
    """As the link carries it: one message, encoded by the front end, decoded by the core."""
    got: list[tuple[Any, ...]] = []
    Link(got.append, lambda: None).data_received(encode([("r", 1, {}, b"", to_wire(parsed, writer))]))
    return from_wire(got[0][4], reader)


def test_an_image_arrives_as_a_view_of_its_block_and_its_block_returns_once_nothing_holds_it() -> None:
    writer, reader = pair()
    first, second = image(1), image(2)
    parsed = [part(first), part(second, "b.png"), UploadPart("session", None, b"s1")]
    parts = roundtrip(parsed, writer, reader)
    assert not isinstance(parts, Failed)
    assert [(p.name, p.filename, p.data) for p in parts] == [
        ("files", "a.png", b"raw bytes"), ("files", "b.png", b"raw bytes"), ("session", None, b"s1")]
    assert parts[0].decoded is not None and parts[1].decoded is not None and parts[2].decoded is None
    a, b = parts[0].decoded.array, parts[1].decoded.array
    assert np.array_equal(a, first) and np.array_equal(b, second) and parts[0].decoded.decode_s == 0.002
    assert len(writer.free) == 2 and reader.release_frame() is None  # two blocks taken, none back yet
    row = a[None][:, ::2]  # a view of a view: it holds the block as well
    del parts, a
    gc.collect()
    assert reader.release_frame() is None
    del row
    assert reader.release_frame() == ("f", [0])  # a's block; b's is still held
    del b
    assert reader.release_frame() == ("f", [1])
    writer.release([0, 1])
    assert sorted(writer.free) == [0, 1, 2, 3] and reader.release_frame() is None


def test_an_image_too_large_or_a_full_arena_travels_inline() -> None:
    writer, reader = pair(blocks=2, block=2048)
    assert writer.put(np.zeros((0, 4, 3), np.uint8)) is None and writer.put(np.zeros(8, np.int64)) is None
    big, small = image(1, (40, 40, 3)), [image(i, (8, 8, 3)) for i in range(3)]
    parts = roundtrip([part(big)] + [part(s) for s in small], writer, reader)
    assert not isinstance(parts, Failed)
    arrays = [p.decoded.array for p in parts if p.decoded is not None]
    assert all(np.array_equal(x, y) for x, y in zip(arrays, [big, *small], strict=True))
    # the first two small ones took the two blocks; the large one and the third came inline, writable
    assert writer.free == [] and arrays[0].flags.writeable and arrays[3].flags.writeable
    assert all(x.base is not None for x in arrays[1:3])


def test_the_blocks_are_reused_across_many_uploads_with_arrays_released_in_other_threads() -> None:
    writer, reader = pair(blocks=3)
    for i in range(30):
        parts = roundtrip([part(image(i))], writer, reader)
        assert not isinstance(parts, Failed) and parts[0].decoded is not None
        assert np.array_equal(parts[0].decoded.array, image(i))
        worker = threading.Thread(target=parts.clear)  # a batch's worker drops the last reference
        del parts
        worker.start()
        worker.join()
        frame = reader.release_frame()
        assert frame is not None
        writer.release(frame[1])
    assert sorted(writer.free) == [0, 1, 2]


def test_a_failed_parse_and_parts_built_in_the_core_pass_through_and_a_bad_block_is_refused() -> None:
    writer, reader = pair()
    assert roundtrip(Failed(400, "malformed"), writer, reader) == Failed(400, "malformed")
    built = [part(image(1))]
    assert from_wire(built, reader) == built
    with pytest.raises(ValueError):
        from_wire([("files", "a.png", b"x", (9, (4, 4, 3), 0.0, 0.0))], reader)  # no block 9
    with pytest.raises(ValueError):
        from_wire([("files", "a.png", b"x", (0, (64, 64, 3), 0.0, 0.0))], reader)  # larger than a block
    with pytest.raises(ValueError):
        from_wire([("files", "a.png", b"x", (0, (4, 4, 3), 0.0, 0.0))], None)  # no arena here
    inline = roundtrip([part(image(3))], None, None)  # no arena at all
    assert not isinstance(inline, Failed) and inline[0].decoded is not None
    assert np.array_equal(inline[0].decoded.array, image(3))


def test_the_core_link_reads_blocks_with_its_front_ends_arena_and_returns_them_on_its_next_message() -> None:
    """The front end names its arena first; the core's link answers the upload and, on a later message,
    gives the block back; a malformed part is a 500 for its upload, not a broken link."""
    from tests.server.http.test_front_ends import as_start_and_body, echo_app

    fd = make_arena(4)
    assert fd is not None
    readers: list[ArenaReader | None] = [None, ArenaReader(fd)]

    async def scenario() -> tuple[list[tuple[Any, ...]], ArenaWriter]:
        forwarder = Forwarder(lambda: None, (fd, 1))
        assert forwarder.arena is not None
        core = CoreLink(echo_app(), ("127.0.0.1", 80), lambda _core: None, readers)
        to_front: list[tuple[Any, ...]] = []
        core.link.send = to_front.append  # type: ignore[method-assign]
        headers = [(b"content-length", b"300")]
        request = {"method": "POST", "path": "/gradio_api/upload", "headers": headers, "query_string": b""}
        wire = to_wire([part(image(5))], forwarder.arena)
        for frame in [*forwarder.link._out, ("r", 1, request, b"", wire),
                      ("r", 2, request, b"", [("files", "a.png", b"x", (7, (4, 4, 3), 0.0, 0.0))])]:
            core._frame(frame)
        assert core.arena is readers[1] and core.link.extra is not None
        store = core.app.state.server.store  # type: ignore[attr-defined]
        start, body = as_start_and_body(to_front[0])
        path = body[2].decode().strip('[]"')
        assert start[2] == 200 and np.array_equal(store.take_decoded(path).array, image(5))
        assert as_start_and_body(to_front[1])[0][2] == 500
        gc.collect()
        release = core.link.extra()
        assert release is not None
        forwarder._frame(release)
        return to_front, forwarder.arena

    _, writer = asyncio.run(scenario())
    os.close(fd)
    assert sorted(writer.free) == [0, 1, 2, 3]
