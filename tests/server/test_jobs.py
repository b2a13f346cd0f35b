"""JobRunner: a batch's requests are preprocessed concurrently in worker threads; a bad one fails alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from reference_server import messages as m
from reference_server.components import FileStore
from reference_server.jobs import JobRunner
from reference_server.runtime import Event, FunctionRuntime, Job
from reference_server.settings import FunctionSettings
from reference_server.workloads.base import Component, Workload, WorkloadInputError


class SlowPrepare(Workload):
    """Echoes text; prepare_row sleeps and counts how many rows were being prepared at once."""

    prepares_rows = True

    def __init__(self) -> None:
        super().__init__(inputs=[Component("text", "text")], outputs=[Component("text", "text")])
        self.lock = threading.Lock()
        self.active = self.most = 0
        self.threads: set[int] = set()

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.threads.add(threading.get_ident())
        time.sleep(0.05)
        with self.lock:
            self.active -= 1
        if inputs[0] == "bad":
            raise WorkloadInputError("input 'text': bad on purpose")
        return [inputs[0].upper()]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        return [list(columns[0])]


def run_batch_job(tmp_path: Path, texts: list[str], max_threads: int) -> tuple[SlowPrepare, dict[str, Any]]:
    workload = SlowPrepare()
    settings = FunctionSettings(api_name="f", workload="echo", batch=True, max_batch_size=len(texts))
    fn = FunctionRuntime(0, settings, workload)
    sent: dict[str, Any] = {}

    def emit(event: Event, message: m.Message) -> None:
        sent[event.id] = message

    events = [Event(f"e{i}", "s", fn, [text]) for i, text in enumerate(texts)]

    async def main() -> None:
        runner = JobRunner(FileStore(tmp_path), anyio.CapacityLimiter(max_threads), False, emit)
        await runner.run(Job(events, fn))

    anyio.run(main)
    return workload, sent


def test_a_batch_is_prepared_on_several_threads_at_once(tmp_path: Path) -> None:
    workload, sent = run_batch_job(tmp_path, [f"t{i}" for i in range(8)], max_threads=40)
    assert workload.most > 1 and len(workload.threads) > 1
    assert [sent[f"e{i}"]["output"]["data"] for i in range(8)] == [[f"T{i}"] for i in range(8)]


def test_max_threads_still_caps_the_preparation(tmp_path: Path) -> None:
    workload, _ = run_batch_job(tmp_path, [f"t{i}" for i in range(6)], max_threads=1)
    assert workload.most == 1


@pytest.mark.parametrize("position", [0, 2])
def test_a_bad_input_fails_only_its_own_event(tmp_path: Path, position: int) -> None:
    texts = ["a", "b", "c"]
    texts[position] = "bad"
    _, sent = run_batch_job(tmp_path, texts, max_threads=40)
    for i, text in enumerate(texts):
        message = sent[f"e{i}"]
        if text == "bad":
            assert not message["success"] and "bad on purpose" in message["output"]["error"]
        else:
            assert message["success"] and message["output"]["data"] == [text.upper()]
