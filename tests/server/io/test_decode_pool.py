"""Upload parsing and image decoding in worker processes (io.decode_pool), uploads in memory."""

from __future__ import annotations

import asyncio
import io
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client import Client, handle_file
from PIL import Image

from reference_server.io.components import FileStore
from reference_server.io.decode_pool import (
    MAX_RESPAWNS,
    Decoded,
    DecodePool,
    Failed,
    PixelPrep,
    WorkerLost,
    _Link,
    decode_image,
    parse_upload,
    worker_count,
)
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

FORM = "multipart/form-data; boundary=B"


def png(width: int = 40, height: int = 30, mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).convert(mode).save(buf, format="PNG")
    return buf.getvalue()


def multipart(*files: tuple[bytes, bytes]) -> bytes:
    parts = [b'--B\r\nContent-Disposition: form-data; name="files"; filename="' + name + b'"\r\n\r\n'
             + data + b"\r\n" for name, data in files]
    return b"".join(parts) + b"--B--\r\n"


# ---------------------------------------------------------------- what a worker does
def test_decode_gives_a_contiguous_rgb_array_and_resizes_when_asked() -> None:
    whole = decode_image(png(mode="L"), "image", None)
    assert isinstance(whole, Decoded)
    assert whole.array.shape == (30, 40, 3) and whole.array.dtype == np.uint8
    assert whole.array.flags["C_CONTIGUOUS"]
    resized = decode_image(png(), "image", PixelPrep((16, 8), 3))
    assert isinstance(resized, Decoded) and resized.array.shape == (8, 16, 3)
    expected = np.asarray(Image.open(io.BytesIO(png())).convert("RGB").resize((16, 8), resample=3))
    assert np.array_equal(resized.array, expected)  # PIL's resize, as the thread path does it


def test_a_bad_image_is_a_value_not_an_exception() -> None:
    failed = decode_image(b"not an image", "photo", None)
    assert isinstance(failed, Failed) and failed.status == 422 and "'photo'" in failed.detail


def test_an_upload_is_parsed_and_its_images_decoded_ahead() -> None:
    parts = parse_upload(multipart((b"a.png", png()), (b"b.txt", b"hello")), FORM, PixelPrep(None))
    assert isinstance(parts, list)
    assert [(p.name, p.filename, p.decoded is not None) for p in parts] == [
        ("files", "a.png", True), ("files", "b.txt", False)]
    assert parts[1].data == b"hello"
    assert parse_upload(multipart((b"a.png", png())), FORM, None)[0].decoded is None  # type: ignore[index]
    malformed = parse_upload(b"junk", "multipart/form-data", None)
    assert isinstance(malformed, Failed) and malformed.status == 400


@pytest.mark.parametrize(("setting", "device", "expected"),
                         [(3, "cpu", 3), (0, "cuda", 0), ("auto", "cpu", 0)])
def test_worker_count(setting: int | str, device: str, expected: int) -> None:
    assert worker_count(setting, device) == expected


def test_auto_uses_processes_on_cuda() -> None:
    assert 1 <= worker_count("auto", "cuda") <= 8


# ---------------------------------------------------------------- the pool
def test_the_pool_answers_from_the_event_loop_and_replaces_a_worker_that_died() -> None:
    pool = DecodePool(2)
    pool.start()
    try:
        async def calls_kills_and_replacements() -> None:
            results = await asyncio.gather(*(pool.run(decode_image, png(), "x", None) for _ in range(6)))
            assert all(isinstance(r, Decoded) and r.array.shape == (30, 40, 3) for r in results)
            dead = {proc.pid for proc in pool._procs}
            for proc in pool._procs:
                proc.kill()
            deadline = asyncio.get_running_loop().time() + 60
            while pool.respawns < 2 and asyncio.get_running_loop().time() < deadline:
                try:  # in flight when a worker died: an error, never a hang; then a new worker answers
                    await asyncio.wait_for(pool.run(decode_image, png(), "x", None), timeout=30)
                except WorkerLost:
                    pass
                await asyncio.sleep(0.05)
            assert pool.respawns == 2 and not dead & {proc.pid for proc in pool._procs}
            assert isinstance(await pool.run(decode_image, png(), "x", None), Decoded)
            pool.respawns = MAX_RESPAWNS * pool.workers  # a worker that keeps dying stays dead: its error
            for proc in pool._procs:
                proc.kill()
            with pytest.raises(WorkerLost):
                for _ in range(20):
                    await asyncio.wait_for(pool.run(decode_image, png(), "x", None), timeout=30)
                    await asyncio.sleep(0.1)

        asyncio.run(calls_kills_and_replacements())
    finally:
        pool.close()


# ---------------------------------------------------------------- uploads in memory
def test_a_worker_that_reset_its_socket_leaves_no_error_for_the_collector_to_log() -> None:
    async def reset() -> bool:
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=ours)
        link = _Link(reader, writer)
        link.task = asyncio.create_task(link.read_results())
        call = asyncio.ensure_future(link.call(len, ("abc",)))
        await asyncio.sleep(0.05)
        theirs.close()  # closed with our call unread: a reset, as from a killed worker
        await link.task
        with pytest.raises(WorkerLost):
            await call
        assert link.lost is not None and "reset" in link.lost
        # the stream's close waiter holds the same error: unless taken, the collector's finalizer logs it
        # ("Future exception was never retrieved"), at any moment in any later test of the process
        return bool(writer._protocol._closed._log_traceback)  # type: ignore[attr-defined]

    assert asyncio.run(reset()) is False


def test_uploads_stay_in_memory_within_the_budget_and_spill_to_disk(tmp_path: Path) -> None:
    store = FileStore(tmp_path, memory_budget=10)
    first = store.put_upload("a.bin", b"123456")
    assert store.in_memory(first) == b"123456" and not Path(first).exists()
    second = store.put_upload("b.bin", b"7890ab")  # over budget: the oldest goes to disk
    assert store.in_memory(first) is None and Path(first).read_bytes() == b"123456"
    assert store.read(first) == b"123456" and store.read(second) == b"7890ab"
    big = store.put_upload("c.bin", b"x" * 11)  # larger than the budget: straight to disk
    assert Path(big).read_bytes() == b"x" * 11
    assert store.read(f"/gradio_api/file={second}") == b"7890ab"
    with pytest.raises(ValueError, match="invalid file name"):
        store.put_upload("..", b"x")


def test_decoded_images_are_taken_once_and_bounded(tmp_path: Path) -> None:
    store = FileStore(tmp_path, memory_budget=100)
    store.keep_decoded("/p/a", "A", 60)
    store.keep_decoded("/p/b", "B", 60)  # over budget: a is dropped (its bytes would decode again)
    assert store.take_decoded("/p/a") is None
    assert store.take_decoded("/p/b") == "B" and store.take_decoded("/p/b") is None


# ---------------------------------------------------------------- a server with the pool
IDEAL = {"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 2.0}, "batch": True,
         "max_batch_size": 8, "concurrency_limit": 1}


@pytest.fixture(scope="module")
def pooled() -> Iterator[RunningServer]:
    settings = synthetic_settings(functions=[IDEAL], launch={"decode_workers": 2})
    with serve_in_thread(settings) as running:
        yield running


def test_a_pooled_server_serves_images_and_traces_their_phases(pooled: RunningServer, tmp_path: Path) -> None:
    assert pooled.state.pool is not None and pooled.state.pool.upload_prep == PixelPrep(None)
    path = tmp_path / "in.png"
    path.write_bytes(png())
    client = Client(pooled.url, verbose=False)
    # one after another: submits of one client racing a server this fast can meet its close_stream
    results = [client.predict(handle_file(str(path)), api_name="/classify") for _ in range(5)]
    assert all(result["label"] == "LABEL_0" for result in results)
    traces = [t for t in httpx.get(f"{pooled.url}/gradio_api/profiling/traces").json()
              if t["fn_name"] == "classify"]
    assert len(traces) == 5 and all(t["preprocess_ms"] > 0 and t["forward_ms"] > 0 for t in traces)


def test_a_bad_image_fails_only_its_own_request(pooled: RunningServer) -> None:
    files = {"files": ("bad.png", b"garbage", "image/png")}
    (bad,) = httpx.post(f"{pooled.url}/gradio_api/upload", files=files).json()
    good = httpx.post(f"{pooled.url}/gradio_api/upload", files={"files": ("ok.png", png())}).json()[0]
    served = httpx.get(f"{pooled.url}/gradio_api/file={good}")
    assert served.status_code == 200 and served.content == png()  # served from memory
    assert "not a readable image" in call(pooled.url, bad)
    assert '"label": "LABEL_0"' in call(pooled.url, good).replace('":"', '": "')
    malformed = httpx.post(f"{pooled.url}/gradio_api/upload", content=b"--B\r\n\r\n",
                           headers={"content-type": "multipart/form-data"})
    assert malformed.status_code == 400


def call(url: str, path: str) -> str:
    """One event through the queue (/call/), referring to an uploaded path; the SSE text it gets."""
    body = {"data": [{"path": path, "meta": {"_type": "gradio.FileData"}}]}
    event_id = httpx.post(f"{url}/gradio_api/call/classify", json=body).json()["event_id"]
    return httpx.get(f"{url}/gradio_api/call/classify/{event_id}", timeout=60).text


def test_the_image_model_gives_the_same_labels_from_the_pool_and_from_threads(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    fn = {"api_name": "classify", "workload": "image-classification",
          "params": {"size": "tiny", "num_labels": 7}, "batch": True, "max_batch_size": 4}
    path = tmp_path / "in.png"
    path.write_bytes(png(50, 70))
    labels = []
    for workers in (0, 1):
        settings = synthetic_settings(functions=[fn], launch={"decode_workers": workers}, device="cpu")
        with serve_in_thread(settings) as running:
            assert (running.state.pool is not None) == (workers > 0)
            labels.append(Client(running.url, verbose=False).predict(handle_file(str(path)),
                                                                       api_name="/classify"))
    assert labels[0] == labels[1]
