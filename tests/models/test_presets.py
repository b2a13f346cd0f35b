"""The model presets: fixed endpoint names and value types other components rely on.

Each preset is served with its models shrunk to `size: tiny` (everything else as shipped) and
called through gradio_client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from gradio_client import Client, handle_file

from reference_server.settings import load_preset, parse_settings, preset_path, read_settings_file
from reference_server.testing import serve_in_thread

from .inputs import CLIPS, IMAGES, write_wav

PRESETS = ("image", "text", "audio", "chat")


@contextmanager
def tiny_preset_client(name: str) -> Iterator[Client]:
    raw = read_settings_file(preset_path(name))
    for fn in raw["functions"]:
        fn["params"] = {**fn.get("params", {}), "size": "tiny"}
    with serve_in_thread(parse_settings(raw, f"preset {name} (tiny)"), startup_timeout_s=120) as server:
        client = Client(server.url, verbose=False)
        try:
            yield client
        finally:
            client.close()


def is_label(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value["label"], str) and len(value["confidences"]) >= 1


@pytest.mark.parametrize("name", PRESETS)
def test_preset_uses_real_models_at_base_size(name: str) -> None:
    settings = load_preset(name)
    for fn in settings.functions:
        assert fn.params.get("size") == "base"
        assert not (fn.batch and fn.workload == "text-generation")


def test_image_preset(tmp_path: Path) -> None:
    IMAGES[1].save(tmp_path / "in.png")
    with tiny_preset_client("image") as client:
        assert is_label(client.predict(handle_file(str(tmp_path / "in.png")), api_name="/classify"))


def test_text_preset() -> None:
    with tiny_preset_client("text") as client:
        label = client.predict("what a lovely queue", api_name="/classify")
        assert is_label(label) and label["label"] in ("negative", "positive")
        vector = client.predict("what a lovely queue", api_name="/embed")
        assert isinstance(vector, list) and all(isinstance(x, float) for x in vector)


def test_audio_preset(tmp_path: Path) -> None:
    wav = write_wav(tmp_path / "in.wav", CLIPS[0])
    with tiny_preset_client("audio") as client:
        assert is_label(client.predict(handle_file(str(wav)), api_name="/classify"))


def test_chat_preset_streams() -> None:
    with tiny_preset_client("chat") as client:
        job = client.submit("hello", api_name="/generate")
        final = job.result(timeout=60)
        assert isinstance(final, str) and len(job.outputs()) >= 1
