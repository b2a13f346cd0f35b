"""`model:` loads local weights (a save_pretrained directory) and never touches the network."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, cast

import pytest
from gradio_client import Client, handle_file

from reference_server.launch import ServeOptions, settings_from_options
from reference_server.testing import serve_in_thread
from reference_server.workloads import WorkloadConfigError, build_workload
from reference_server.workloads.models.common import ModelWorkload
from reference_server.workloads.models.local_tokenizers import wordpiece_tokenizer

from .inputs import CLIPS, IMAGES, TEXTS, TINY


class NetworkAttempt(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any DNS lookup or non-loopback connect fails the test (and is recorded)."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            attempts.append(address)
            raise NetworkAttempt(f"network access attempted: {address}")
        return real_connect(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        raise NetworkAttempt(f"DNS lookup attempted: {host}")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    return attempts


def save_random_model(kind: str, directory: Path, **params: Any) -> ModelWorkload:
    """Build a tiny random-init workload, save its model with save_pretrained, return it (loaded)."""
    workload = build_workload(kind, {**TINY, **params})
    assert isinstance(workload, ModelWorkload)
    workload.load("cpu")
    cast(Any, workload.model).save_pretrained(directory)
    return workload


CASES = [
    ("image-classification", IMAGES[0]),
    ("text-classification", TEXTS[1]),
    ("audio-classification", CLIPS[1]),
]


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_local_directory_loads_the_saved_weights(
    kind: str, value: Any, tmp_path: Path, no_network: list[Any]
) -> None:
    original = save_random_model(kind, tmp_path, labels=["left", "right", "up"], seed=3)
    from_disk = build_workload(kind, {"model": str(tmp_path)})
    from_disk.load("cpu")
    assert from_disk.run([value]) == original.run([value])
    facts = from_disk.describe()
    assert facts["weights"] == "pretrained" and facts["model"] == str(tmp_path)
    assert not no_network


def test_directory_without_tokenizer_falls_back_to_the_built_in_one(
    tmp_path: Path, no_network: list[Any]
) -> None:
    save_random_model("embeddings", tmp_path)
    workload = build_workload("embeddings", {"model": str(tmp_path)})
    workload.load("cpu")
    assert "built-in WordPiece" in workload.describe()["preprocessor"]
    assert len(workload.run([TEXTS[0]])[0]) == 32
    assert not no_network


def test_directory_with_a_tokenizer_uses_it(tmp_path: Path, no_network: list[Any]) -> None:
    save_random_model("text-classification", tmp_path)
    wordpiece_tokenizer(1024).save_pretrained(tmp_path)
    workload = build_workload("text-classification", {"model": str(tmp_path)})
    workload.load("cpu")
    assert f"from {tmp_path}" in workload.describe()["preprocessor"]
    assert workload.run([TEXTS[0]])[0]["label"] in ("LABEL_0", "LABEL_1")
    assert not no_network


def test_generation_from_a_local_directory(tmp_path: Path, no_network: list[Any]) -> None:
    save_random_model("text-generation", tmp_path)
    workload = build_workload("text-generation", {"model": str(tmp_path), "max_new_tokens": 3})
    workload.load("cpu")
    assert len(list(workload.stream(["hello"]))) <= 3
    assert not no_network


def test_hub_id_not_in_the_cache_fails_clearly_without_network(
    tmp_path: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    workload = build_workload("image-classification", {"model": "qbench-test/no-such-model"})
    with pytest.raises(WorkloadConfigError, match="cannot load it without the network"):
        workload.load("cpu")
    assert not no_network


def test_missing_directory_fails_clearly(tmp_path: Path, no_network: list[Any]) -> None:
    workload = build_workload("text-classification", {"model": str(tmp_path / "missing")})
    with pytest.raises(WorkloadConfigError, match=r"params.model = .*missing"):
        workload.load("cpu")
    assert not no_network


def test_serve_flag_model_serves_a_local_directory(tmp_path: Path) -> None:
    """`qbench serve --preset image --model DIR`: the preset's model comes from DIR."""
    save_random_model("image-classification", tmp_path / "model", labels=["left", "right"])
    IMAGES[0].save(tmp_path / "in.png")
    settings = settings_from_options(ServeOptions(preset="image", model=str(tmp_path / "model"), port=0))
    with serve_in_thread(settings, startup_timeout_s=120) as server:
        client = Client(server.url, verbose=False)
        try:
            result = client.predict(handle_file(str(tmp_path / "in.png")), api_name="/classify")
        finally:
            client.close()
    assert result["label"] in ("left", "right")
