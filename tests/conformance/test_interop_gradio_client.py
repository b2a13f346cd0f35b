"""Interop: the official `gradio_client` drives the reference server like a Gradio app.

One reference server serves the conformance suite plus a number echo and a tiny random-init image
classifier (image upload -> FileData -> PIL -> label). Each gradio_client `Client` is one session.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError, Status
from PIL import Image

from reference_server.testing import serve_in_thread

from .gradio_apps import SUITE, TIGHT_QUEUE, QueueSpec
from .reference import reference_settings

LABELS = ["cat", "dog", "fish"]
EXTRA_FUNCTIONS: tuple[dict[str, Any], ...] = (
    {"api_name": "echo_number", "workload": "echo", "params": {"type": "number"}},
    {
        "api_name": "classify",
        "workload": "image-classification",
        "params": {"size": "tiny", "labels": LABELS, "top_k": 2, "seed": 0},
        "concurrency_limit": None,
    },
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    settings = reference_settings(SUITE, QueueSpec(), EXTRA_FUNCTIONS)
    with serve_in_thread(settings, startup_timeout_s=120) as server:
        yield server.url


@pytest.fixture(scope="module")
def tight_url() -> Iterator[str]:
    """The suite with max_threads=2 and max_size=3."""
    with serve_in_thread(reference_settings(SUITE, TIGHT_QUEUE)) as server:
        yield server.url


@contextmanager
def clients(url: str, n: int) -> Iterator[list[Client]]:
    """`n` clients (each one session); closed at exit."""
    opened = [Client(url, verbose=False) for _ in range(n)]
    try:
        yield opened
    finally:
        for c in opened:
            c.close()


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[Client]:
    with clients(url, 1) as (c,):
        yield c


def poll_status(job: Any, code: Status, timeout_s: float = 10.0) -> Any:
    """The first `job.status()` with this code (fails after the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = job.status()
        if status.code == code:
            return status
        time.sleep(0.02)
    raise AssertionError(f"job never reached {code} (last {status.code})")


def test_predict_text(client: Client) -> None:
    assert client.predict("hello", api_name="/echo") == "hello"


def test_predict_number(client: Client) -> None:
    assert client.predict(3.5, api_name="/echo_number") == 3.5


def test_view_api_lists_the_endpoints(client: Client) -> None:
    info = client.view_api(print_info=False, return_format="dict")
    assert {"/echo", "/sleep_1", "/stream", "/classify"} <= set(info["named_endpoints"])


def test_predict_image_upload(client: Client, tmp_path: Path) -> None:
    png = tmp_path / "in.png"
    Image.new("RGB", (48, 32), (200, 30, 90)).save(png)
    result = client.predict(handle_file(str(png)), api_name="/classify")
    assert result["label"] in LABELS
    confidences = result["confidences"]
    assert len(confidences) == 2 and {c["label"] for c in confidences} <= set(LABELS)
    assert all(0.0 <= c["confidence"] <= 1.0 for c in confidences)


AHEAD = 4  # /hold jobs (0.5 s each, one at a time) submitted before the one watched in the queue


LANDED = {Status.IN_QUEUE, Status.PROCESSING, Status.PROGRESS, Status.ITERATING, Status.FINISHED}


def poll_landed(jobs: list[Any], timeout_s: float = 10.0) -> None:
    """Wait until the server has taken each job's join (its estimation, or later news, has come back):
    a job submitted after this waits behind all of them, whichever order a busy client's threads sent
    their joins in."""
    for job in jobs:
        deadline = time.monotonic() + timeout_s
        while job.status().code not in LANDED:
            assert time.monotonic() < deadline, f"job never joined the queue (last {job.status().code})"
            time.sleep(0.02)


def test_submit_status_reports_rank_and_eta(url: str) -> None:
    with clients(url, 2) as (first, second):
        first.predict("warm", api_name="/hold")  # the average job time is known from now on
        # one runs, three wait: the watched job waits ~1.5-2 s, long enough for a starved client thread
        # to read its estimation before it starts (with one waiting ahead, a busy box's client read the
        # estimation and process_starts together: never IN_QUEUE)
        ahead = [first.submit(f"a{i}", api_name="/hold") for i in range(AHEAD)]
        poll_status(ahead[0], Status.PROCESSING)
        poll_landed(ahead)
        waiting = second.submit("b", api_name="/hold")
        status = poll_status(waiting, Status.IN_QUEUE)
        assert status.rank in range(AHEAD) and status.queue_size == status.rank + 1
        assert isinstance(status.eta, float) and 0.0 < status.eta < 0.6 * (AHEAD + 2)
        results = [job.result(timeout=20) for job in [*ahead, waiting]]
        assert results == [*(f"a{i}" for i in range(AHEAD)), "b"]


def test_cancel_waiting_job(url: str) -> None:
    with clients(url, 2) as (holder, canceller):
        ahead = [holder.submit(f"h{i}", api_name="/hold") for i in range(AHEAD)]  # ~2 s of work ahead
        poll_status(ahead[0], Status.PROCESSING)
        poll_landed(ahead)  # the watched job then waits >= 1.5 s, not behind h0 alone
        waiting = canceller.submit("w", api_name="/hold")
        poll_status(waiting, Status.IN_QUEUE)
        assert waiting.cancel() is True
        assert waiting.status().code == Status.CANCELLED
        # The server's answer is process_completed {output: {}}; gradio_client 2.7.2 turns it into
        # KeyError("Could not find 'data' key ... {}"), against real Gradio 6.31 as well. When the
        # cancel and that message land together, its own wait raises ValueError("Did not expect 2 tasks
        # to be done") instead (gradio_client/utils.py, seen once on a busy box).
        with pytest.raises((KeyError, CancelledError, ValueError)):
            waiting.result(timeout=10)
        assert [job.result(timeout=20) for job in ahead] == [f"h{i}" for i in range(AHEAD)]  # untouched


def test_generator_outputs(client: Client) -> None:
    job = client.submit("x", api_name="/stream")
    assert job.result(timeout=10) == "x 1 2 3"
    assert job.outputs() == ["x", "x 1", "x 1 2", "x 1 2 3"]


def test_batched_function_answers_each_caller(url: str) -> None:
    with clients(url, 3) as callers:
        jobs = [c.submit(f"b{i}", api_name="/batch") for i, c in enumerate(callers)]
        assert [j.result(timeout=10) for j in jobs] == ["b0", "b1", "b2"]


def test_hidden_error_raises_app_error(client: Client) -> None:
    with pytest.raises(AppError, match="has not enabled verbose error reporting"):
        client.predict("x", api_name="/fail")


def test_user_visible_error_keeps_message_and_title(client: Client) -> None:
    with pytest.raises(AppError) as info:
        client.predict("x", api_name="/gr_error")
    assert (info.value.message, info.value.title, info.value.duration) == ("synthetic failure", "Oops", 5.0)


def test_full_queue_raises_queue_error(tight_url: str) -> None:
    """max_size=3: one `long_b` job runs and three wait (joined raw, no stream), so the queue is full
    for the next 1 s; the client's join is refused with 503, which it raises as QueueError. The
    client is built first: on a busy box its start alone can outlast a short window. A try whose fill
    and join took longer than the window proves nothing either way and is made again (at most 3)."""
    deps = httpx.get(f"{tight_url}/config").json()["dependencies"]
    index = next(d["id"] for d in deps if d["api_name"] == "long_b")
    with clients(tight_url, 1) as (late,):
        for _ in range(3):
            started = time.monotonic()
            joins = [
                httpx.post(
                    f"{tight_url}/gradio_api/queue/join",
                    json={"data": [f"f{i}"], "fn_index": index, "session_hash": f"fill-{i}"},
                )
                for i in range(4)
            ]
            assert [r.status_code for r in joins] == [200] * 4
            try:
                late.predict("x", api_name="/sleep_1")  # its own group is idle: max_size is global
            except QueueError as refused:
                assert "Queue is full" in str(refused)
                return
            finally:
                for i, reply in enumerate(joins):
                    event = reply.json()["event_id"]
                    body = {"session_hash": f"fill-{i}", "fn_index": index, "event_id": event}
                    httpx.post(f"{tight_url}/gradio_api/cancel", json=body)
            assert time.monotonic() - started > 0.95, "the join was accepted while the queue was full"
            time.sleep(1.1)  # the running long_b ends before the next try
    pytest.fail("three tries each took longer than the 1 s the queue stays full (a very busy box)")
