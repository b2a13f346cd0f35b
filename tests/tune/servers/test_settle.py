"""Waiting for an abandoned backlog to drain before the next run (qbench.tune.servers.settle), on real
servers."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from qbench.tune.servers.settle import SETTLE_FILE, settle, wait_for_empty_queue
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

SLEEP = {"api_name": "predict", "workload": "sleep", "params": {"base_ms": 100}, "concurrency_limit": 1}


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    """One worker, 100 ms a request (Gradio 6: routes under /gradio_api)."""
    with serve_in_thread(synthetic_settings(functions=[SLEEP])) as running:
        yield running


def abandon(server: RunningServer, count: int) -> None:
    """Queue `count` events and never listen for them (what a probe stopped early leaves behind)."""
    with httpx.Client() as client:  # one kept-alive connection: the backlog is queued quickly
        for i in range(count):
            body = {"data": ["x"], "fn_index": 0, "session_hash": f"abandoned-{i}"}
            client.post(server.url + "/gradio_api/queue/join", json=body).raise_for_status()


def test_an_empty_queue_is_settled_at_once(server: RunningServer, tmp_path: Path) -> None:
    settled = settle(server.url, tmp_path)
    assert settled.drained and settled.queue_size == 0 and settled.waited_s < 1.0
    assert not (tmp_path / SETTLE_FILE).exists()  # nothing to note


def test_an_abandoned_backlog_is_waited_out_and_noted(server: RunningServer, tmp_path: Path) -> None:
    joined_at = time.monotonic()
    abandon(server, 8)  # 8 x 100 ms on one worker
    # one worker serves at most one event per 100 ms (+1 in flight) before settle's first look
    served_before = 2 + math.ceil((time.monotonic() - joined_at) / 0.1)
    settled = settle(server.url, tmp_path)
    assert settled.drained and settled.queue_size == 0
    noted = json.loads((tmp_path / SETTLE_FILE).read_text())
    assert noted["drained"] and noted["waited_s"] == pytest.approx(settled.waited_s)
    found = settled.found_waiting
    assert found and max(1, 8 - served_before) <= found <= 7, found  # the running one is not waiting
    assert settled.waited_s >= 0.09 * (found - 1)  # each waiting event was served in turn: waited out


def test_a_backlog_longer_than_the_timeout_is_reported_not_waited_forever(server: RunningServer) -> None:
    abandon(server, 20)  # 2 s of work
    settled = wait_for_empty_queue(server.url, timeout_s=0.3)
    assert not settled.drained and settled.queue_size and settled.queue_size > 0
    assert "the next run starts anyway" in settled.note
    assert wait_for_empty_queue(server.url).drained  # and it does drain


def test_gradio_3_status_is_read_at_the_root(tmp_path: Path) -> None:
    fn = {k: v for k, v in SLEEP.items() if k != "concurrency_limit"}  # 3.x: one concurrency_count pool
    with serve_in_thread(synthetic_settings(functions=[fn], gradio=3)) as running:
        settled = settle(running.url, tmp_path)
    assert settled.drained and settled.queue_size == 0 and not settled.note


def test_a_target_without_a_queue_status_is_not_waited_for(tmp_path: Path) -> None:
    settled = settle("http://127.0.0.1:9", tmp_path)  # nothing listens on the discard port
    assert not settled.drained and settled.queue_size is None and "no queue status" in settled.note
    assert json.loads((tmp_path / SETTLE_FILE).read_text())["note"].startswith("no queue status")
