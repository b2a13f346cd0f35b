"""The streaming diff (table against Gradio's rules), its inverse, and error payloads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reference_server.errors import UserFacingError
from reference_server.queue.messages import apply_diff, diff, error_payload, frame, process_completed

CASES: list[tuple[Any, Any, list[list[Any]]]] = [
    ("abc", "abc", []),
    ("0", "01", [["append", [], "1"]]),
    ("abc", "xbc", [["replace", [], "xbc"]]),
    (1, "1", [["replace", [], "1"]]),
    (1, 2, [["replace", [], 2]]),
    (1, 1.0, []),  # equal values: no edit (Gradio compares with ==)
    (None, "a", [["replace", [], "a"]]),
    ([1, 2], [1, 2, 3], [["add", [2], 3]]),
    ([1, 2, 3], [1], [["delete", [1], None], ["delete", [1], None]]),
    ([1, "a"], [2, "ab"], [["replace", [0], 2], ["append", [1], "b"]]),
    ({"a": 1, "b": 2}, {"a": 1, "c": 3}, [["delete", ["b"], None], ["add", ["c"], 3]]),
    ({"t": "hi"}, {"t": "hi!"}, [["append", ["t"], "!"]]),
    ([["a"], "x"], [["a", "b"], "x"], [["add", [0, 1], "b"]]),
    ([[1, 2, 3]], [[1]], [["delete", [0, 1], None], ["delete", [0, 1], None]]),
]


@pytest.mark.parametrize(("old", "new", "edits"), CASES)
def test_diff_table(old: Any, new: Any, edits: list[list[Any]]) -> None:
    assert diff(old, new) == edits


@pytest.mark.parametrize(("old", "new", "edits"), CASES)
def test_apply_diff_inverts_diff(old: Any, new: Any, edits: list[list[Any]]) -> None:
    assert apply_diff(copy.deepcopy(old), diff(old, new)) == new


def test_error_payloads() -> None:
    assert error_payload(ValueError("x"), False) == ({"error": None}, "Error")
    assert error_payload(ValueError("x"), True) == ({"error": "x", "visible": True}, "Error")
    err = UserFacingError("bad", title="Oops", duration=5)
    assert error_payload(err, False) == (
        {"error": "bad", "duration": 5, "visible": True, "title": "Oops"},
        "Oops",
    )


def test_frame_and_field_order() -> None:
    msg = process_completed("e1", {"data": [1], "duration": 0.5, "average_duration": 0.25}, True)
    assert list(msg) == [
        "msg",
        "event_id",
        "output",
        "success",
        "title",
        "used_cache",
        "cache_duration",
        "avg_time",
    ]
    assert (msg["cache_duration"], msg["avg_time"]) == (0.5, 0.25)
    data = frame({"msg": "close_stream", "event_id": None})
    assert data == b'data: {"msg":"close_stream","event_id":null}\n\n'
