"""The model workloads served by the reference server and driven by the official gradio_client.

One server (tiny random-init configs) serves every kind unbatched and batched; the batched twins
have the same seed, so the same weights, and `batch_wait_ms` so that concurrent requests do form
batches (a spy on run_batch records the realised sizes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from reference_server.settings import parse_settings
from reference_server.testing import RunningServer, serve_in_thread

from .inputs import CLIPS, IMAGES, TEXTS, TINY, confidences, write_wav

LABELS = ["cat", "dog", "fish", "bird"]
BATCH = {"batch": True, "max_batch_size": 4, "batch_wait_ms": 300, "concurrency_limit": 1}


def twins(name: str, kind: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """An unbatched function and its batched twin over identical weights."""
    fn = {"api_name": name, "workload": kind, "params": {**TINY, **params}}
    return [fn, {**fn, "api_name": f"{name}_batched", **BATCH}]


FUNCTIONS = [
    *twins("image", "image-classification", {"labels": LABELS, "top_k": 3}),
    *twins("text", "text-classification", {"labels": ["negative", "positive"]}),
    *twins("embed", "embeddings", {}),
    *twins("audio", "audio-classification", {"labels": LABELS}),
    {
        "api_name": "generate",
        "workload": "text-generation",
        "params": {**TINY, "max_new_tokens": 5, "temperature": 0},
        "concurrency_limit": 2,
    },
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = parse_settings({"functions": FUNCTIONS, "device": "cpu"}, "<tests/models>")
    with serve_in_thread(settings, startup_timeout_s=120) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[Client]:
    c = Client(server.url, verbose=False)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """The test images and clips as files, wrapped for upload."""
    folder = tmp_path_factory.mktemp("model-inputs")
    images, clips = [], []
    for i, img in enumerate(IMAGES):
        img.save(folder / f"image{i}.png")
        images.append(handle_file(str(folder / f"image{i}.png")))
    for i, clip in enumerate(CLIPS):
        clips.append(handle_file(str(write_wav(folder / f"clip{i}.wav", clip))))
    return {"image": images, "audio": clips, "text": TEXTS, "embed": TEXTS}


def test_image_classification_answers_an_upload(client: Client, files: dict[str, list[Any]]) -> None:
    result = client.predict(files["image"][0], api_name="/image")
    assert result["label"] in LABELS and len(result["confidences"]) == 3
    assert result["label"] == result["confidences"][0]["label"]


def test_text_classification_answers_text(client: Client) -> None:
    result = client.predict("The queue was short and the answer quick.", api_name="/text")
    assert result["label"] in ("negative", "positive")
    assert sum(confidences(result).values()) == pytest.approx(1.0, abs=1e-5)


def test_embeddings_answer_a_unit_vector(client: Client) -> None:
    vector = client.predict("embed me", api_name="/embed")
    assert isinstance(vector, list) and len(vector) == 32
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


def test_audio_classification_answers_a_wav_upload(client: Client, files: dict[str, list[Any]]) -> None:
    result = client.predict(files["audio"][1], api_name="/audio")
    assert result["label"] in LABELS


def test_generation_streams_tokens(client: Client) -> None:
    job = client.submit("Once upon a time", api_name="/generate")
    final = job.result(timeout=60)
    streamed = job.outputs()
    assert isinstance(final, str) and final
    assert 1 <= len(streamed) <= 5 and streamed[-1] == final


def spy_batch_sizes(server: RunningServer, api_name: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every run_batch call of one function's workload."""
    index = server.state.settings.function_index(api_name)
    assert index is not None
    workload = server.state.functions[index].workload
    sizes: list[int] = []
    real = workload.run_batch

    def recording(columns: list[list[Any]]) -> list[list[Any]]:
        sizes.append(len(columns[0]))
        return real(columns)

    monkeypatch.setattr(workload, "run_batch", recording)
    return sizes


@pytest.mark.parametrize("name", ["image", "text", "embed", "audio"])
def test_batched_answers_equal_unbatched_answers(
    name: str,
    server: RunningServer,
    client: Client,
    files: dict[str, list[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes = spy_batch_sizes(server, f"{name}_batched", monkeypatch)
    inputs = files[name]
    jobs = [client.submit(value, api_name=f"/{name}_batched") for value in inputs]
    batched = [job.result(timeout=60) for job in jobs]
    single = [client.predict(value, api_name=f"/{name}") for value in inputs]
    assert max(sizes) > 1, f"no batch was formed: {sizes}"
    for b, s in zip(batched, single, strict=True):
        if name == "embed":
            np.testing.assert_allclose(b, s, atol=1e-5)
        else:
            assert b["label"] == s["label"]
            scores = [list(confidences(value).values()) for value in (b, s)]
            np.testing.assert_allclose(scores[0], scores[1], atol=1e-5)


BAD_REQUESTS = [("/text", "", "non-empty text"), ("/generate", "  ", "non-empty text")]


@pytest.mark.parametrize(("api_name", "value", "message"), BAD_REQUESTS)
def test_bad_text_fails_that_request_only(client: Client, api_name: str, value: str, message: str) -> None:
    with pytest.raises(AppError, match=message):
        client.predict(value, api_name=api_name)
    assert client.predict("still serving", api_name="/text")["label"] in ("negative", "positive")


def test_bad_files_fail_that_request_only(client: Client, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    with pytest.raises(AppError, match="not a readable image"):
        client.predict(handle_file(str(corrupt)), api_name="/image")
    empty = write_wav(tmp_path / "empty.wav", (16000, np.zeros(0, dtype=np.float32)))
    with pytest.raises(AppError, match="non-empty"):
        client.predict(handle_file(str(empty)), api_name="/audio")
    silence = write_wav(tmp_path / "silence.wav", (16000, np.zeros(1600, dtype=np.float32)))
    assert client.predict(handle_file(str(silence)), api_name="/audio")["label"] in LABELS
