"""What every Gradio wire family shares (qbench.run.protocols.gradio_wire): the app's cancel route by
release, version parsing, output files of a result, one queue message applied to a record, and the
SSE frames of a response."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_wire import (
    FAMILIES,
    OUTPUT_FILES,
    Background,
    GradioApp,
    apply_message,
    new_session_hash,
    output_files,
    parse_version,
    sse_messages,
)
from qbench.run.records.schema import RequestRecord
from tests.run.protocols.fakes import FakeResponse


def record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="s", endpoint="/predict", warmup=False,
                         intended_at_s=0.0, sent_at_s=0.0)


def app(family: str = "sse_v3", version: tuple[int, ...] = ()) -> GradioApp:
    return GradioApp(base="http://h", api="http://h/gradio_api", family=family, version=version, fn_index=0)


@pytest.mark.parametrize(("text", "expected"), [
    ("4.44.1", (4, 44, 1)), ("5.0.0b3", (5, 0, 0)), ("3.50", (3, 50)), ("6", (6,)),
    ("", ()), (None, ()), ("dev", ()), (4.2, (4, 2)),
])
def test_parse_version(text: Any, expected: tuple[int, ...]) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(("family", "version", "cancel"), [
    ("sse_v3", (4, 31, 0), True), ("sse_v3", (4, 30, 9), False), ("sse_v3", (5, 0), True),
    ("sse_v1", (4, 9, 0), False), ("sse_v3", (), True), ("sse_v2.1", (), False), ("ws", (), False),
])
def test_the_cancel_route_exists_from_4_31_or_for_sse_v3_when_the_version_is_unknown(
        family: str, version: tuple[int, ...], cancel: bool) -> None:
    assert app(family, version).has_cancel_route is cancel


def test_families_are_in_release_order_and_session_hashes_are_fresh() -> None:
    assert FAMILIES[0] == "ws" and FAMILIES[-1] == "sse_v3" and len(set(FAMILIES)) == len(FAMILIES)
    a, b = new_session_hash(), new_session_hash()
    assert a != b and len(a) == 32 and int(a, 16) >= 0


def test_output_files_of_nothing_and_of_plain_values() -> None:
    assert output_files(None, "http://h") == []
    assert output_files(["text", 3, {"label": "cat"}], "http://h") == []
    assert output_files({"path": "/x", "orig_name": "x", "url": None}, "") == ["/file=/x"]
    assert output_files({"is_file": True, "name": 7}, "http://h") == []  # a name that is not text


def test_estimation_and_process_starts_keep_only_the_first_message() -> None:
    r = record()
    assert not apply_message(r, {"msg": "estimation", "rank": 3, "queue_size": 5, "rank_eta": 1.5}, 40, 0.1)
    assert not apply_message(r, {"msg": "estimation", "rank": 1, "queue_size": 2, "rank_eta": 0.5}, 40, 0.2)
    assert (r.estimation_at_s, r.rank, r.queue_size, r.rank_eta_s) == (0.1, 3, 5, 1.5)
    assert not apply_message(r, {"msg": "process_starts", "eta": 0.7}, 20, 0.3)
    assert not apply_message(r, {"msg": "process_starts", "eta": 9.0}, 20, 0.4)
    assert (r.started_at_s, r.start_eta_s) == (0.3, 0.7)
    assert r.bytes_received == 120 and r.completed_at_s is None


def test_generating_and_streaming_messages_count_outputs_from_the_first() -> None:
    r = record()
    for at, kind in ((0.5, "process_generating"), (0.6, "process_streaming"), (0.7, "process_generating")):
        assert not apply_message(r, {"msg": kind}, 10, at)
    assert (r.outputs, r.first_output_at_s, r.bytes_received) == (3, 0.5, 30)


def test_heartbeats_and_unknown_messages_only_count_bytes() -> None:
    r = record()
    assert not apply_message(r, {"msg": "heartbeat"}, 7, 0.1)
    assert not apply_message(r, {}, 3, 0.2)
    assert r.bytes_received == 10 and r.outcome == "error" and r.error_kind is None


def test_a_completed_message_closes_the_record_ok_with_the_server_duration() -> None:
    r = record()
    msg = {"msg": "process_completed", "success": True, "output": {"data": ["hi"], "duration": 0.25}}
    assert apply_message(r, msg, 50, 1.0)
    assert (r.outcome, r.completed_at_s, r.server_duration_s, r.error_kind) == ("ok", 1.0, 0.25, None)
    assert id(r) not in OUTPUT_FILES


def test_a_completed_message_with_files_keeps_them_for_the_protocol() -> None:
    r = record()
    image = {"path": "/tmp/a.png", "url": "http://h/file=/tmp/a.png", "meta": {"_type": "gradio.FileData"}}
    done = {"msg": "process_completed", "success": True, "output": {"data": [image]}}
    assert apply_message(r, done, 9, 1.0)
    assert OUTPUT_FILES.pop(id(r)) == ["http://h/file=/tmp/a.png"]


@pytest.mark.parametrize(("msg", "kind", "message"), [
    ({"msg": "process_completed", "success": False, "output": {"error": "ZeroDivisionError"}},
     "server_error", "ZeroDivisionError"),
    ({"msg": "process_completed", "success": False, "title": "Error", "output": {}}, "server_error", "Error"),
    ({"msg": "process_completed", "success": False}, "server_error", "the function raised (no detail shown)"),
    ({"msg": "process_completed", "success": True, "output": {}}, "cancelled", "cancelled on the server"),
    ({"msg": "process_completed", "success": True}, "cancelled", "cancelled on the server"),
    ({"msg": "queue_full"}, "queue_full", "queue_full: the queue is at its max_size"),
    ({"msg": "unexpected_error", "message": "boom"}, "server_error", "boom"),
])
def test_terminal_messages_that_fail_the_record(msg: dict[str, Any], kind: str, message: str) -> None:
    r = record()
    assert apply_message(r, msg, 10, 2.0)
    assert (r.outcome, r.error_kind, r.completed_at_s) == ("error", kind, 2.0)
    assert r.error_message is not None and r.error_message.startswith(message)
    assert r.server_duration_s is None


def test_a_failure_after_the_result_does_not_change_the_verdict() -> None:
    r = record()
    apply_message(r, {"msg": "process_completed", "success": True, "output": {"data": [1]}}, 10, 1.0)
    apply_message(r, {"msg": "unexpected_error", "message": "late"}, 10, 2.0)
    assert (r.outcome, r.error_kind, r.completed_at_s) == ("ok", None, 1.0)


def test_a_result_after_a_failure_does_not_change_the_verdict() -> None:
    r = record()
    apply_message(r, {"msg": "queue_full"}, 10, 1.0)
    apply_message(r, {"msg": "process_completed", "success": True, "output": {"data": [1]}}, 10, 2.0)
    assert (r.outcome, r.error_kind, r.completed_at_s) == ("error", "queue_full", 1.0)


def test_sse_frames_split_across_chunks_skip_heartbeats_and_garbage() -> None:
    chunks = [b'data: {"msg": "estimation", "rank": 0}\n\nda', b'ta: {"msg": "heartbeat"}\n\n',
              b"data: not json\n\n: comment\n\n", b'data: [1, 2]\n\ndata: {"msg": "process_completed"}',
              b"\n\n", b'data: {"msg": "never ended"}']

    async def collect() -> list[tuple[dict[str, Any], int, float]]:
        resp: Any = FakeResponse(200, chunks)
        return [m async for m in sse_messages(resp, Clock())]

    found = asyncio.run(collect())
    assert [m["msg"] for m, _, _ in found] == ["estimation", "process_completed"]
    assert found[0][1] == len(b'data: {"msg": "estimation", "rank": 0}') + 2
    assert all(at >= 0 for _, _, at in found)


def test_background_tasks_are_cancelled_by_cancel_all() -> None:
    async def scenario() -> tuple[bool, int]:
        bg = Background()
        started = asyncio.Event()

        async def forever() -> None:
            started.set()
            await asyncio.Event().wait()

        bg.spawn(forever())
        await started.wait()
        task = next(iter(bg._tasks))
        bg.cancel_all()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
        return task.cancelled(), len(bg._tasks)

    assert asyncio.run(scenario()) == (True, 0)
