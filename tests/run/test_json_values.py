"""The one tolerant reader of each kind of JSON value (qbench.run.json_values): a value of another shape
reads as None."""

from __future__ import annotations

from typing import Any

import pytest

from qbench.run.json_values import json_dict, json_int, json_number, json_text


@pytest.mark.parametrize(("value", "number", "integer", "text"), [
    (3, 3.0, 3, "3"),
    (2.7, 2.7, 2, "2.7"),
    (0, 0.0, 0, "0"),
    (True, None, None, None),  # a bool is not a number, nor text
    (None, None, None, None),
    ("", None, None, None),
    ("12", None, None, "12"),  # a string is text, never parsed as a number
    ([1], None, None, None),
    ({"a": 1}, None, None, None),
])
def test_each_reader_takes_its_own_shape_only(value: Any, number: float | None, integer: int | None,
                                              text: str | None) -> None:
    assert json_number(value) == number and json_int(value) == integer and json_text(value) == text
    assert json_number(value) is None or type(json_number(value)) is float
    assert json_int(value) is None or type(json_int(value)) is int


def test_a_mapping_is_copied_anything_else_is_none() -> None:
    stored = {"a": 1}
    read = json_dict(stored)
    assert read == stored and read is not stored
    assert json_dict([("a", 1)]) is None and json_dict(None) is None and json_dict("a") is None
