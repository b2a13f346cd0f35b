"""The synthetic workloads called directly: params errors, cost model, outputs (queue behaviour with
them is in tests/server/queue/test_queue.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from reference_server.errors import UserFacingError
from reference_server.workloads import WorkloadConfigError, build_workload
from reference_server.workloads.synthetic import Echo, Sleep


async def collect(stream: AsyncIterator[list[Any]]) -> list[Any]:
    return [out[0] async for out in stream]


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("echo", {"type": "image"}, "workload 'echo': params.type = 'image'"),
        ("echo", {"busy_ms": -1}, "params.busy_ms = -1"),
        ("sleep", {"base_ms": -5}, "params.base_ms = -5: Input should be greater than or equal to 0"),
        ("sleep", {"jitter": {"dist": "pareto"}}, "params.jitter.dist = 'pareto'"),
        ("sleep", {"jitter": {"sigma": -1}}, "params.jitter.sigma = -1"),
        ("sleep", {"base": 10}, "params.base = 10: Extra inputs are not permitted"),
        ("cpu", {"n": 0}, "params.n = 0"),
        ("cpu", {"n": 10_000}, "params.n = 10000"),
        ("stream", {"chunks": 0}, "params.chunks = 0"),
        ("tokens", {"tokens": "many"}, "params.tokens = 'many'"),
        ("fail", {"rate": 1.5}, "params.rate = 1.5"),
        ("imageop", {"size": 0}, "params.size = 0"),
    ],
)
def test_bad_params_name_the_workload_key_and_value(kind: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadConfigError) as caught:
        build_workload(kind, params)
    assert message in str(caught.value)


def test_echo_returns_its_input_as_text_or_number() -> None:
    text = build_workload("echo")
    number = build_workload("echo", {"type": "number"})
    assert [c.type for c in text.inputs + text.outputs] == ["text", "text"]
    assert [c.type for c in number.inputs + number.outputs] == ["number", "number"]
    assert number.inputs[0].example == 3 and text.is_async and not text.is_generator
    assert asyncio.run(number.arun([7])) == [7]
    assert asyncio.run(number.arun_batch([[1, 2, 3]])) == [[1, 2, 3]]


def test_echo_busy_ms_spins_the_calling_thread() -> None:
    echo = cast(Echo, build_workload("echo", {"busy_ms": 30}))
    assert echo.describe()["busy_ms"] == pytest.approx(30)
    start = time.thread_time()
    assert asyncio.run(echo.arun(["x"])) == ["x"]
    assert time.thread_time() - start >= 0.029


def test_sleep_latency_is_base_plus_per_item_without_jitter() -> None:
    sleep = cast(Sleep, build_workload("sleep", {"base_ms": 10, "per_item_ms": 5}))
    assert [sleep.latency_s(n) for n in (1, 4)] == [pytest.approx(0.015), pytest.approx(0.030)]
    assert sleep.describe() == {"kind": "sleep", "base_ms": 10.0, "per_item_ms": 5.0, "jitter": None,
                                "sync": False}
    assert sleep.is_async and not cast(Sleep, build_workload("sleep", {"sync": True})).is_async


@pytest.mark.parametrize("dist", ["lognormal", "normal", "uniform"])
def test_sleep_jitter_is_seeded(dist: str) -> None:
    sigma = 0.3 if dist == "lognormal" else 20
    params = {"base_ms": 100, "jitter": {"dist": dist, "sigma": sigma, "seed": 7}}
    first, again = (cast(Sleep, build_workload("sleep", params)) for _ in range(2))
    samples = [first.latency_s(1) for _ in range(200)]
    assert samples == [again.latency_s(1) for _ in range(200)]
    assert len(set(samples)) > 100 and all(s >= 0 for s in samples)
    if dist == "uniform":
        assert all(0.080 <= s <= 0.120 for s in samples)
    assert sorted(samples)[100] == pytest.approx(0.1, abs=0.01)  # the median stays at the nominal latency


def test_sleep_jitter_clips_latency_at_zero() -> None:
    sleep = cast(Sleep, build_workload("sleep", {"base_ms": 1, "jitter": {"dist": "normal", "sigma": 50,
                                                                         "seed": 1}}))
    samples = [sleep.latency_s(1) for _ in range(100)]
    assert min(samples) == 0.0 and max(samples) > 0.001


def test_sleep_takes_its_latency_sync_and_async() -> None:
    sleep = build_workload("sleep", {"base_ms": 20, "per_item_ms": 10})
    start = time.perf_counter()
    assert sleep.run_batch([["a", "b"]]) == [["a", "b"]]  # 20 + 2 * 10 ms
    assert time.perf_counter() - start >= 0.039
    start = time.perf_counter()
    assert asyncio.run(sleep.arun(["a"])) == ["a"]
    assert time.perf_counter() - start >= 0.029


def test_stream_yields_growing_texts_sync_and_async() -> None:
    stream = build_workload("stream", {"chunks": 3, "interval_ms": 0})
    expected = ["hi", "hi 1", "hi 1 2"]
    assert stream.is_generator
    assert [out[0] for out in stream.stream(["hi"])] == expected
    assert asyncio.run(collect(stream.astream(["hi"]))) == expected


def test_tokens_yield_the_whole_continuation_after_the_first_token_time() -> None:
    tokens = build_workload("tokens", {"tokens": 3, "ttft_ms": 30, "interval_ms": 0})
    start = time.perf_counter()
    assert asyncio.run(collect(tokens.astream(["prompt"]))) == ["t0", "t0 t1", "t0 t1 t2"]
    assert time.perf_counter() - start >= 0.029


def test_fail_raises_a_plain_or_user_visible_error() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(build_workload("fail", {"message": "boom"}).arun(["x"]))
    visible = build_workload("fail", {"message": "bad", "user_visible": True, "title": "Oops", "duration": 3})
    with pytest.raises(UserFacingError) as caught:
        asyncio.run(visible.arun_batch([["x"]]))
    assert (caught.value.message, caught.value.title, caught.value.duration) == ("bad", "Oops", 3)


def test_fail_rate_is_a_seeded_fraction() -> None:
    assert asyncio.run(build_workload("fail", {"rate": 0}).arun(["x"])) == ["x"]

    async def outcomes(seed: int) -> list[bool]:
        fail = build_workload("fail", {"rate": 0.5, "seed": seed})
        out = []
        for _ in range(200):
            try:
                await fail.arun(["x"])
                out.append(True)
            except RuntimeError:
                out.append(False)
        return out

    first = asyncio.run(outcomes(3))
    assert first == asyncio.run(outcomes(3)) and 70 <= sum(first) <= 130


def test_imageop_greys_and_resizes_and_reports_the_input_size() -> None:
    from PIL import Image

    op = build_workload("imageop", {"size": 8})
    out, size = op.run([Image.new("RGB", (30, 20), (255, 0, 0))])
    assert out.size == (8, 8) and out.mode == "RGB" and size == {"width": 30, "height": 20}
    r, g, b = out.getpixel((0, 0))
    assert r == g == b  # grey


def test_cpu_describes_its_matrix_size_without_loading_torch() -> None:
    cpu = build_workload("cpu", {"n": 4, "repeats": 2})  # torch is imported by load(), not here
    assert cpu.describe() == {"kind": "cpu", "n": 4, "repeats": 2} and not cpu.is_async
