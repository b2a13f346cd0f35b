"""Payload generation: seeded and repeatable, valid encodings, templates and prompt files."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest
from PIL import Image

from qbench.run.scenario import payloads
from qbench.run.scenario.payloads import FileValue, PayloadGenerator, fill_template
from qbench.run.scenario.schema import Payload


def generator(*inputs: dict[str, object], seed: int = 0, variants: int = 4) -> PayloadGenerator:
    return PayloadGenerator(
        Payload.model_validate({"seed": seed, "variants": variants, "inputs": list(inputs)})
    )


def test_same_seed_same_bytes_and_variants_cycle() -> None:
    spec = {"image": {"width": 32, "height": 16, "format": "png"}}
    a, b = generator(spec), generator(spec)
    assert a.inputs(1)[0] == b.inputs(1)[0]
    assert a.inputs(1)[0] == a.inputs(5)[0]  # variant = request_id % variants
    assert a.inputs(0)[0] != a.inputs(1)[0]
    assert generator(spec, seed=1).inputs(1)[0] != a.inputs(1)[0]


def test_a_generated_payload_is_made_once_per_process_and_one_read_from_disk_every_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's runs send the same variants: the second run's generator takes the first's (no time
    spent generating, the same objects), up to SHARED_BYTES, least recently used out; a payload with a
    file read from disk is made by every generator (the file may have changed)."""
    spec = {"image": {"width": 48, "height": 48, "format": "png"}}
    first = generator(spec, seed=11)
    first.prepare(4)
    assert first.generation_s > 0
    again = generator(spec, seed=11)
    again.prepare(4)
    assert again.generation_s == 0 and again.inputs(2)[0] is first.inputs(2)[0]
    assert again.stats()["variants_generated"] == 4
    assert generator(spec, seed=12).inputs(0)[0] != first.inputs(0)[0]  # another payload, its own

    (tmp_path / "p.txt").write_text("a prompt\n")
    read = {"text": {"file": str(tmp_path / "p.txt")}}
    generator(read, spec).prepare(2)
    twice = generator(read, spec)
    twice.prepare(2)
    assert twice.generation_s > 0

    size = len(first.inputs(0)[0].data)
    monkeypatch.setattr(payloads, "SHARED_BYTES", 3 * size)
    bounded = generator(spec, seed=13)
    bounded.prepare(4)
    assert sum(key[0] == bounded._key for key in payloads._shared.entries) <= 3
    held = sum(size for _, size in payloads._shared.entries.values())
    assert payloads._shared.total == held <= payloads.SHARED_BYTES


def test_image_and_audio_decode() -> None:
    gen = generator({"image": {"width": 40, "height": 30, "format": "jpeg"}}, {"audio": {"seconds": 0.5}})
    image, audio = gen.inputs(0)
    assert isinstance(image, FileValue) and image.mime == "image/jpeg" and image.name.endswith(".jpeg")
    assert Image.open(io.BytesIO(image.data)).size == (40, 30)
    assert isinstance(audio, FileValue)
    with wave.open(io.BytesIO(audio.data)) as wav:
        assert (wav.getframerate(), wav.getnframes(), wav.getnchannels()) == (16000, 8000, 1)


@pytest.mark.parametrize(("size", "low_kib", "high_kib"), [(224, 6, 30), (512, 25, 110)])
def test_photo_images_weigh_what_photos_weigh(size: int, low_kib: int, high_kib: int) -> None:
    """JPEG q85 photos are 10-50 KB at these sizes (so bytes per request match what users upload)."""
    photo = generator({"image": {"width": size, "height": size, "format": "jpeg"}}, variants=3)
    weights = [len(photo.inputs(i)[0].data) / 1024 for i in range(3)]
    assert all(low_kib <= w <= high_kib for w in weights), weights
    noise = generator({"image": {"width": size, "height": size, "format": "jpeg", "content": "noise"}})
    assert noise.inputs(0)[0].data != photo.inputs(0)[0].data  # the earlier generator, still available
    lower = generator({"image": {"width": size, "height": size, "format": "jpeg", "quality": 40}})
    assert len(lower.inputs(0)[0].data) < 0.7 * len(photo.inputs(0)[0].data)


def test_text_numbers_values_and_templates() -> None:
    gen = generator(
        {"text": {"words": [3, 3]}},
        {"number": {"min": 1, "max": 3, "integer": True}},
        {"value": 7},
        {"json": {"q": "{word}", "k": ["{int}", 1]}},
        variants=50,
    )
    for i in range(50):
        text, number, value, obj = gen.inputs(i)
        assert len(text.split()) == 3 and number in (1, 2, 3) and value == 7
        assert isinstance(obj["q"], str) and isinstance(obj["k"][0], int) and obj["k"][1] == 1
    assert gen.stats()["variants_generated"] == 50


def test_prompt_file_and_files_folder(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("first prompt\n\nsecond prompt\n")
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.wav").write_bytes(b"RIFF")
    gen = generator(
        {"text": {"file": str(tmp_path / "p.txt")}}, {"files": {"dir": str(tmp_path / "files")}}, variants=10
    )
    prompts = {gen.inputs(i)[0] for i in range(10)}
    assert prompts <= {"first prompt", "second prompt"}
    assert gen.inputs(0)[1] == FileValue(b"RIFF", "a.wav", "audio/wav")


def test_fill_template_leaves_other_values() -> None:
    import numpy as np

    assert fill_template({"a": "x", "b": [None, 2.5]}, np.random.default_rng(0)) == {
        "a": "x",
        "b": [None, 2.5],
    }


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real byte-level BPE tokenizer saved to a folder, as a user's model folder would hold one."""
    from reference_server.workloads.models.local_tokenizers import byte_level_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    byte_level_tokenizer(2048).save_pretrained(folder)
    return folder


def test_text_tokens_are_exact_under_the_named_tokenizer(tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    def lengths(tokens: list[int]) -> list[int]:
        text = {"tokens": tokens, "tokenizer": str(tokenizer_dir)}
        payload = {"seed": 4, "variants": 12, "inputs": [{"text": text}]}
        gen = PayloadGenerator(Payload.model_validate(payload))
        return [len(tok(gen.inputs(i)[0], add_special_tokens=False)["input_ids"]) for i in range(12)]

    assert lengths([40, 40]) == [40] * 12
    drawn = lengths([30, 60])
    assert all(30 <= n <= 60 for n in drawn) and len(set(drawn)) > 3, drawn


def test_chat_turns_alternate_and_end_with_the_user() -> None:
    spec = {"seed": 1, "inputs": [{"text": {"words": [2, 3], "turns": [1, 3]}}]}
    gen = PayloadGenerator(Payload.model_validate(spec))
    chats = [gen.inputs(i)[0] for i in range(20)]
    assert {len(c) for c in chats} == {1, 3, 5}  # 1-3 user turns, an assistant turn between each two
    for chat in chats:
        assert [m["role"] for m in chat] == ["user", "assistant"] * (len(chat) // 2) + ["user"]
        assert all(2 <= len(m["content"].split()) <= 3 for m in chat)


def test_a_tokenizer_that_is_not_local_is_a_clear_error(tmp_path: Path) -> None:
    from qbench.errors import ScenarioError

    spec = {"inputs": [{"text": {"tokens": [5, 9], "tokenizer": str(tmp_path / "missing")}}]}
    with pytest.raises(ScenarioError, match="not a local tokenizer folder .* downloads nothing"):
        PayloadGenerator(Payload.model_validate(spec))
