"""Component conversion: wire values <-> workload values, and clear errors for unusable inputs."""

from __future__ import annotations

import base64
import io
import wave
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reference_server.io.components import FileStore, component_config, postprocess, preprocess
from reference_server.workloads.base import Component, WorkloadInputError


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path)


def png_bytes(size: tuple[int, int] = (4, 3), mode: str = "RGBA") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size).save(buf, format="PNG")
    return buf.getvalue()


def wav_bytes(rate: int = 8000, channels: int = 2) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.full(100 * channels, 16384, dtype=np.int16).tobytes())
    return buf.getvalue()


def uploaded(store: FileStore, name: str, data: bytes) -> dict[str, object]:
    path = store.new_upload_path(name)
    path.write_bytes(data)
    return {"path": str(path), "meta": {"_type": "gradio.FileData"}}


def test_image_from_upload_path_url_and_data_url(store: FileStore) -> None:
    comp = Component("image", "image")
    file_data = uploaded(store, "a.png", png_bytes())
    img = preprocess(comp, file_data, store)
    assert (img.mode, img.size) == ("RGB", (4, 3))
    assert preprocess(comp, {"url": f"/gradio_api/file={file_data['path']}"}, store).size == (4, 3)
    data_url = "data:image/png;base64," + base64.b64encode(png_bytes((2, 2))).decode()
    assert preprocess(comp, data_url, store).size == (2, 2)


def test_audio_is_mono_float(store: FileStore) -> None:
    rate, samples = preprocess(Component("audio", "audio"), uploaded(store, "a.wav", wav_bytes()), store)
    assert rate == 8000 and samples.dtype == np.float32 and samples.shape == (100,)
    assert samples[0] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("comp_type", "value", "message"),
    [
        ("text", 3, "expected a string"),
        ("number", "3", "expected a number"),
        ("number", True, "expected a number"),
        ("image", {"path": "/etc/hostname"}, "was not uploaded to this server"),
        ("image", 42, "expected FileData"),
        ("image", "data:image/png;base64,!!!", "not a readable image"),
        ("audio", "data:audio/wav;base64,AAAA", "not a readable WAV"),
    ],
)
def test_unusable_inputs_raise_workload_input_error(
    store: FileStore, comp_type: str, value: object, message: str
) -> None:
    with pytest.raises(WorkloadInputError, match=message):
        preprocess(Component(comp_type, "x"), value, store)  # type: ignore[arg-type]


def test_outputs_become_files_served_by_the_store(store: FileStore) -> None:
    out = postprocess(Component("image", "out"), Image.new("RGB", (5, 5)), store)
    assert out["meta"] == {"_type": "gradio.FileData"} and out["url"].startswith("/gradio_api/file=")
    assert store.resolve(out["path"]) is not None
    audio = postprocess(Component("audio", "out"), (16000, np.zeros(160, dtype=np.float32)), store)
    with wave.open(str(store.resolve(audio["path"]))) as w:
        assert (w.getframerate(), w.getnframes()) == (16000, 160)
    assert postprocess(Component("number", "n"), np.float32(1.5), store) == 1.5
    label = {"label": "cat", "confidences": [{"label": "cat", "confidence": 0.9}]}
    assert postprocess(Component("label", "l"), label, store) == label
    ranked = postprocess(Component("label", "l"), {"dog": 0.2, "cat": 0.8}, store)
    assert ranked == {"label": "cat", "confidences": [{"label": "cat", "confidence": 0.8},
                                                     {"label": "dog", "confidence": 0.2}]}
    assert postprocess(Component("label", "l"), "cat", store) == {"label": "cat"}


def test_store_refuses_paths_outside_it(store: FileStore, tmp_path: Path) -> None:
    assert store.resolve("/etc/passwd") is None
    assert store.resolve(str(store.uploads / ".." / ".." / "x")) is None


def test_file_components_are_recognised_by_gradio_client() -> None:
    from gradio_client.utils import value_is_file

    assert value_is_file(component_config(1, Component("image", "i"))["api_info"])
    assert value_is_file(component_config(1, Component("audio", "a"))["api_info"])
    assert not value_is_file(component_config(1, Component("text", "t"))["api_info"])
