"""The plain HTTP front (POST /predict/{api_name}) on a real uvicorn server: bodies per input kind,
batching through the shared queue, the queue bound's 503 + Retry-After, and qbench measuring it."""

from __future__ import annotations

import concurrent.futures
import io
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from qbench.run.pipeline import run_scenario
from qbench.run.scenario.schema import parse_scenario
from reference_server.settings import parse_settings
from reference_server.testing import serve_in_thread

SETTINGS = {
    "functions": [
        {"api_name": "echo", "workload": "echo"},
        {"api_name": "gray", "workload": "imageop", "params": {"size": 8}},
        {"api_name": "batched", "workload": "sleep", "params": {"base_ms": 100}, "batch": True,
         "max_batch_size": 4, "batch_wait_ms": 50, "concurrency_limit": 1},
        {"api_name": "slow", "workload": "sleep", "params": {"base_ms": 400}, "concurrency_limit": 1},
    ],
    "queue": {"max_size": 3},
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(parse_settings(SETTINGS)) as server:
        yield server.url


def test_bodies_follow_the_input_kind(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        raw = http.post("/predict/echo", content="plain words", headers={"Content-Type": "text/plain"})
        assert raw.status_code == 200 and raw.json() == "plain words"
        assert http.post("/predict/echo", json={"inputs": "as json"}).json() == "as json"
        assert http.post("/predict/echo", json={"data": ["as data"]}).json() == "as data"
        buf = io.BytesIO()
        Image.new("RGB", (32, 16), "red").save(buf, format="PNG")
        image = http.post("/predict/gray", content=buf.getvalue(), headers={"Content-Type": "image/png"})
        assert image.status_code == 200 and isinstance(image.json(), list) and len(image.json()) == 2
        assert http.post("/predict/nope", content="x").status_code == 404
        wrong = http.post("/predict/echo", json={"data": [1, 2]})
        assert wrong.status_code == 422 and "takes 1 input" in wrong.json()["error"]
        bad = http.post("/predict/gray", content=b"not an image", headers={"Content-Type": "image/png"})
        assert bad.status_code == 422 and bad.json()["error"]


def _batch_counts(http: httpx.Client) -> tuple[float, float]:
    text = http.get("/metrics").text
    count = re.search(r'qbench_batch_size_count\{fn="batched"\} (\S+)', text)
    total = re.search(r'qbench_batch_size_sum\{fn="batched"\} (\S+)', text)
    assert count and total, text[:500]
    return float(count.group(1)), float(total.group(1))


def test_requests_are_batched_by_the_queue(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http, concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda i: http.post("/predict/batched", content=f"r{i}"), range(3)))
        assert [a.json() for a in answers] == ["r0", "r1", "r2"]
        jobs, events = _batch_counts(http)
        assert events == 3 and jobs < 3  # at least two of them ran in one batch


def test_queue_bound_answers_503_with_retry_after(url: str, tmp_path: Path) -> None:
    with httpx.Client(base_url=url, timeout=10) as http, concurrent.futures.ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda i: http.post("/predict/slow", content="x"), range(5)))
    refused = [a for a in answers if a.status_code == 503]
    assert refused and all(a.headers["Retry-After"] == "1" for a in refused)
    assert "Queue is full" in refused[0].json()["error"]
    spec = parse_scenario({
        "name": "bound", "protocol": "http", "endpoint": {"path": "/predict/slow", "body": {"inputs": "$0"}},
        "payload": {"inputs": [{"value": "x"}]}, "load": {"burst": 5, "timeout": 10},
    })
    result = run_scenario(spec, target=url, out_dir=tmp_path / "r", live=False)
    assert result.summary.errors_by_kind.get("queue_full", 0) >= 1 and result.summary.completed_ok >= 1


def test_a_body_over_max_file_size_is_413_and_the_server_keeps_serving() -> None:
    settings = parse_settings({**SETTINGS, "max_file_size": 1000})
    with serve_in_thread(settings) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        declared = http.post("/predict/echo", content=b"x" * 1001)
        assert declared.status_code == 413 and "max_file_size is 1000" in declared.text

        def chunks() -> Iterator[bytes]:  # no Content-Length: cut off while reading
            yield from (b"y" * 400 for _ in range(3))

        streamed = http.post("/predict/echo", content=chunks())
        assert streamed.status_code == 413 and "passed max_file_size (1000 bytes)" in streamed.text
        fits = http.post("/predict/echo", content=b"z" * 1000)
        assert fits.status_code == 200 and fits.json() == "z" * 1000
