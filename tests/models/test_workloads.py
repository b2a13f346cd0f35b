"""The model workloads called directly (tiny random-init configs): batching, inputs, params, threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from reference_server.workloads import WorkloadConfigError, WorkloadInputError, build_workload
from reference_server.workloads.base import Workload
from reference_server.workloads.models.audio import resample

from .inputs import CLIPS, IMAGES, TEXTS, TINY, confidences

_LOADED: dict[str, Workload] = {}


def loaded(kind: str, **params: Any) -> Workload:
    """One loaded tiny workload per (kind, params), shared by the tests of this module."""
    key = f"{kind}{sorted(params.items())}"
    if key not in _LOADED:
        workload = build_workload(kind, {**TINY, **params})
        workload.load("cpu")
        workload.warmup()
        _LOADED[key] = workload
    return _LOADED[key]


CLASSIFIERS = [
    ("image-classification", IMAGES),
    ("text-classification", TEXTS),
    ("audio-classification", CLIPS),
]


@pytest.mark.parametrize(("kind", "inputs"), CLASSIFIERS)
def test_one_batched_pass_agrees_with_one_call_per_input(kind: str, inputs: list[Any]) -> None:
    workload = loaded(kind)
    batched = workload.run_batch([inputs])[0]
    single = [workload.run([value])[0] for value in inputs]
    assert len(batched) == len(inputs)
    for b, s in zip(batched, single, strict=True):
        assert b["label"] == s["label"]
        assert list(confidences(b)) == list(confidences(s))
        np.testing.assert_allclose(list(confidences(b).values()), list(confidences(s).values()), atol=1e-5)


@pytest.mark.parametrize(("kind", "inputs"), CLASSIFIERS)
def test_label_value_is_top_k_softmax(kind: str, inputs: list[Any]) -> None:
    value = loaded(kind, labels=["a", "b", "c", "d", "e", "f"], top_k=3).run([inputs[0]])[0]
    scores = [c["confidence"] for c in value["confidences"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert value["label"] == value["confidences"][0]["label"] and value["label"] in "abcdef"
    assert 0.0 < sum(scores) <= 1.0 + 1e-6


def test_embeddings_batched_agree_and_are_unit_vectors() -> None:
    workload = loaded("embeddings")
    batched = np.array(workload.run_batch([TEXTS])[0])
    single = np.array([workload.run([text])[0] for text in TEXTS])
    assert batched.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(batched, single, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(batched[0], batched[1])


def test_generation_streams_growing_text_and_is_seeded() -> None:
    workload = loaded("text-generation", max_new_tokens=6, temperature=0)
    outputs = [out[0] for out in workload.stream(["Tell me about queues"])]
    assert 1 <= len(outputs) <= 6
    assert all(isinstance(text, str) for text in outputs)
    assert all(later.startswith(earlier) for earlier, later in zip(outputs, outputs[1:], strict=False))
    assert not any("\ufffd" in text for text in outputs)  # no lone bytes of multi-byte characters
    assert [out[0] for out in workload.stream(["Tell me about queues"])] == outputs
    assert workload.run(["Tell me about queues"]) == [outputs[-1]]


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    again = build_workload("text-classification", dict(TINY))
    again.load("cpu")
    other = build_workload("text-classification", {**TINY, "seed": 1})
    other.load("cpu")
    reference = loaded("text-classification").run([TEXTS[0]])[0]
    assert again.run([TEXTS[0]])[0] == reference
    assert other.run([TEXTS[0]])[0] != reference


BAD_INPUTS: list[tuple[str, Any, str]] = [
    ("text-classification", "", "non-empty text"),
    ("embeddings", "   ", "non-empty text"),
    ("text-generation", "", "non-empty text"),
    ("image-classification", "not an image", "expected an image"),
    ("audio-classification", (16000, np.zeros(0, dtype=np.float32)), "non-empty"),
    ("audio-classification", (16000, np.full(100, np.nan, dtype=np.float32)), "NaN"),
    ("audio-classification", (0, np.zeros(100, dtype=np.float32)), "sample rate"),
    ("audio-classification", b"RIFF....", r"expected \(sample_rate, samples\)"),
]


@pytest.mark.parametrize(("kind", "value", "message"), BAD_INPUTS)
def test_bad_input_is_a_clear_input_error(kind: str, value: Any, message: str) -> None:
    workload = loaded(kind)
    with pytest.raises(WorkloadInputError, match=message):
        if workload.is_generator:
            list(workload.stream([value]))
        else:
            workload.run([value])


def test_int16_and_stereo_audio_are_accepted() -> None:
    rate, samples = CLIPS[0]
    stereo = np.stack([samples, samples], axis=1)
    pcm = (samples * 32767).astype(np.int16)
    workload = loaded("audio-classification")
    expected = workload.run([(rate, samples)])[0]["label"]
    assert workload.run([(rate, stereo)])[0]["label"] == expected
    assert workload.run([(rate, pcm)])[0]["label"] == expected


def test_resample_keeps_the_pitch_and_the_duration() -> None:
    rate, samples = CLIPS[1]  # 220 Hz at 44.1 kHz, 0.5 s
    out = resample(samples, rate, 16000)
    assert out.dtype == np.float32 and out.size == 8000
    peak_hz = np.argmax(np.abs(np.fft.rfft(out))) * 16000 / out.size
    assert abs(peak_hz - 220.0) <= 2.0


PARAM_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("image-classification", {"sise": "tiny"}, "unknown params sise"),
    ("text-classification", {"size": "huge"}, r"params.size = 'huge': expected one of base, small, tiny"),
    ("embeddings", {"dtype": "int8"}, "params.dtype"),
    ("audio-classification", {"labels": []}, "params.labels"),
    ("text-generation", {"max_new_tokens": 0}, "params.max_new_tokens = 0: expected an integer >= 1"),
    ("text-classification", {"threads": "two"}, "params.threads"),
]


@pytest.mark.parametrize(("kind", "params", "message"), PARAM_ERRORS)
def test_bad_params_name_key_value_and_expectation(kind: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadConfigError, match=message):
        build_workload(kind, params)


def test_unknown_config_override_is_an_error_at_load() -> None:
    workload = build_workload("image-classification", {**TINY, "config": {"num_layerz": 1}})
    with pytest.raises(WorkloadConfigError, match="unknown ViTConfig keys num_layerz"):
        workload.load("cpu")


def test_config_overrides_and_dtype_apply() -> None:
    workload = build_workload(
        "text-classification", {**TINY, "config": {"num_hidden_layers": 1}, "dtype": "bfloat16"}
    )
    workload.load("cpu")
    facts = workload.describe()
    assert facts["dtype"] == "bfloat16" and facts["device"] == "cpu"
    assert workload.run([TEXTS[0]])[0]["label"] in ("LABEL_0", "LABEL_1")
    assert facts["parameters"] < loaded("text-classification").describe()["parameters"]


def test_describe_reports_model_facts() -> None:
    facts = loaded("image-classification").describe()
    assert facts["architecture"] == "ViTForImageClassification"
    assert facts["parameters"] > 1000 and facts["threads"] >= 1
    assert "random init" in facts["weights"]


def run_in_threads(call: Callable[[], Any], n: int) -> list[Any]:
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            results[i] = call()
        except BaseException as exc:  # collected and re-raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


def test_one_model_serves_concurrent_calls() -> None:
    workload = loaded("text-classification")
    expected = workload.run_batch([TEXTS])[0]
    results = run_in_threads(lambda: workload.run_batch([TEXTS])[0], 6)
    for result in results:
        for got, want in zip(result, expected, strict=True):
            assert got["label"] == want["label"]


def test_audio_is_resampled_per_request_and_a_bad_clip_still_fails_the_batch() -> None:
    from reference_server.workloads.models.audio import Clip

    workload = loaded("audio-classification")
    rows = [workload.prepare_row([clip]) for clip in CLIPS]
    assert all(isinstance(row[0], Clip) for row in rows)
    prepared = workload.run_batch([[rows[0][0], CLIPS[1], rows[2][0]]])[0]
    direct = workload.run_batch([CLIPS])[0]
    for got, want in zip(prepared, direct, strict=True):
        assert confidences(got) == pytest.approx(confidences(want), abs=1e-5)
    empty = (16000, np.zeros(0, dtype=np.float32))
    assert workload.prepare_row([empty]) == [empty]
    with pytest.raises(WorkloadInputError, match="non-empty"):
        workload.run_batch([[rows[0][0], empty]])
