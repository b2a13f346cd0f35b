"""JobRunner: a batch's requests are preprocessed concurrently in worker threads; a bad one fails alone."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from reference_server.io.components import FileStore
from reference_server.queue import messages as m
from reference_server.queue.jobs import JobRunner
from reference_server.queue.runtime import Event, FunctionRuntime, Job
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


def test_a_row_ready_at_once_leaves_its_event_with_the_batch(tmp_path: Path) -> None:
    """A row decoded at upload (Event.ready_row) goes into the batch and off the event, which its job
    keeps alive until the cycle collector runs (with the collector off here)."""
    import gc

    workload = SlowPrepare()
    fn = FunctionRuntime(0, FunctionSettings(api_name="f", workload="echo", batch=True), workload)
    events = [Event(f"e{i}", "s", fn, [f"t{i}"]) for i in range(3)]
    for event in events[:2]:
        event.ready_row = [event.data[0].upper()]
    sent: dict[str, Any] = {}

    async def main() -> None:
        runner = JobRunner(FileStore(tmp_path), anyio.CapacityLimiter(4), False,
                           lambda event, msg: sent.__setitem__(event.id, msg))
        job = Job(events, fn)
        for event in events:
            event.job = job
        await runner.run(job)

    gc.disable()
    try:
        anyio.run(main)
        assert [sent[f"e{i}"]["output"]["data"] for i in range(3)] == [["T0"], ["T1"], ["T2"]]
        assert workload.active == 0 and all(e.ready_row is None and e.prepared is None for e in events)
    finally:
        gc.enable()


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


class GatedModel(SlowPrepare):
    """The first batch blocks until the requests queued behind it have been prepared (or 20 s pass)."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected, self.prepared = expected, 0
        self.ready = threading.Event()
        self.first_saw_ready: bool | None = None

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        with self.lock:
            self.prepared += 1
            if self.prepared == 1 + self.expected:
                self.ready.set()
        return super().prepare_row(inputs)

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        if self.first_saw_ready is None:
            self.first_saw_ready = self.ready.wait(timeout=20)
        return super().run_batch(columns)


def test_the_next_batch_is_prepared_while_the_model_runs(tmp_path: Path) -> None:
    from reference_server.queue.queue import EventQueue
    from tests.server.queue_harness import read_until_done, settings

    s = settings([{"api_name": "f", "workload": "echo", "batch": True, "max_batch_size": 4,
                   "concurrency_limit": 1}])
    workload = GatedModel(expected=4)
    fn = FunctionRuntime(0, s.functions[0], workload)

    async def main() -> None:
        queue = EventQueue(s, [fn], FileStore(tmp_path))
        queue.start()
        try:
            first = queue.push("s", fn, ["a"])
            await asyncio.sleep(0.2)  # dispatched alone; its run_batch now waits for the read-ahead
            rest = [queue.push("s", fn, [t]) for t in ("b", "c", "bad", "d")]
            messages = await read_until_done(queue, "s", {first.id, *(e.id for e in rest)}, timeout_s=30)
        finally:
            await queue.stop()
        done = {msg["event_id"]: msg for msg in messages if msg["msg"] == "process_completed"}
        bad = done[rest[2].id]
        assert bad["success"] is False and "bad on purpose" in bad["output"]["error"]
        assert [done[e.id]["output"]["data"] for e in (first, rest[0], rest[1], rest[3])] == [
            ["A"], ["B"], ["C"], ["D"]]

        # the rows left their events with the batch (an event and its job form a cycle: a row kept on
        # the event would live until the cycle collector ran, an arena's block with it)
        assert all(e.prepared is None and e.ready_row is None for e in (first, *rest))

    asyncio.run(main())
    assert workload.first_saw_ready is True  # the 4 waiting requests were prepared during batch 1
    assert workload.prepared == 5  # each request prepared once: the job used the read-ahead rows


def test_a_cancelled_or_stopped_waiting_event_drops_its_read_ahead(tmp_path: Path) -> None:
    from reference_server.queue.queue import EventQueue
    from tests.server.queue_harness import settings

    s = settings([{"api_name": "f", "workload": "echo", "batch": True, "max_batch_size": 4,
                   "concurrency_limit": 1}])
    fn = FunctionRuntime(0, s.functions[0], GatedModel(expected=99))  # batch 1 blocks: the rest wait

    async def main() -> None:
        queue = EventQueue(s, [fn], FileStore(tmp_path))
        queue.start()
        try:
            queue.push("s", fn, ["a"])
            await asyncio.sleep(0.2)
            waiting, left = queue.push("s", fn, ["b"]), queue.push("s", fn, ["c"])
            assert waiting.prepared is not None and left.prepared is not None
            assert queue.cancel("s", waiting.id)
            await asyncio.sleep(0)
            assert waiting.prepared.cancelled() or waiting.prepared.done()
        finally:
            fn.workload.ready.set()  # type: ignore[attr-defined]
            await queue.stop()
        assert left.prepared.done()  # stop() ends the read-ahead of events still waiting

    asyncio.run(main())


def test_no_read_ahead_in_the_gradio_3_mode(tmp_path: Path) -> None:
    """A 3.x client sends an event's data only when its job starts: nothing to read ahead."""
    from reference_server.queue.queue import EventQueue
    from tests.server.queue_harness import settings

    batch = {"api_name": "f", "workload": "echo", "batch": True, "max_batch_size": 4}
    for gradio, depth in ((3, 0), (6, 4)):
        s = settings([batch], gradio=gradio)
        queue = EventQueue(s, [FunctionRuntime(0, s.functions[0], SlowPrepare())], FileStore(tmp_path))
        assert queue._read_ahead_depth(queue.functions[0]) == depth
