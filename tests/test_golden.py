"""tests/golden.py: golden outputs stored once, then compared by type, key order and float digits."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from tests import golden


def test_what_differs_is_named_by_its_path() -> None:
    want = {"a": 1, "b": [1.0, math.nan, "x"], "c": {"d": None}}
    assert golden.differences(want, {"a": 1, "b": [1.0 + 1e-12, math.nan, "x"], "c": {"d": None}}) == []
    assert golden.differences(want, {**want, "a": 1.0}) == ["/a: 1 != 1.0"]
    assert golden.differences(want, {**want, "b": [1.001, math.nan, "x"]}) == ["/b/0: 1.0 != 1.001"]
    assert golden.differences(want, {**want, "b": [1.0, 2.0, "x"]}) == ["/b/1: nan != 2.0"]
    assert golden.differences(want, {**want, "b": [1.0]}) == ["/b: 3 items != 1"]
    assert golden.differences(want, {"c": {"d": None}, "a": 1, "b": want["b"]}) == [
        "/: keys ['a', 'b', 'c'] != ['c', 'a', 'b']"]  # key order is part of the output
    assert golden.differences(math.inf, math.inf) == [] and golden.differences(-math.inf, math.inf)


def test_written_once_then_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(golden, "FOLDER", tmp_path)
    monkeypatch.setattr(golden, "_written", set())
    with pytest.raises(AssertionError, match="QBENCH_WRITE_GOLDEN=1"):
        golden.check("area", "a run, saturated", {"p95": 0.25})
    monkeypatch.setattr(golden, "WRITE", True)
    golden.check("area", "a run, saturated", {"p95": 0.25, "n": (1, 2)})  # written: tuples as lists
    assert (tmp_path / "area" / "a-run-saturated.json").is_file()
    with pytest.raises(AssertionError, match="/p95: 0.25 != 0.5"):  # the next value of a name is compared
        golden.check("area", "a run, saturated", {"p95": 0.5, "n": [1, 2]})
    monkeypatch.setattr(golden, "WRITE", False)
    golden.check("area", "a run, saturated", {"p95": 0.25, "n": [1, 2]})


def test_a_dataclass_is_stored_by_its_fields_and_a_bare_object_is_refused() -> None:
    @dataclasses.dataclass
    class Pair:
        left: float
        right: tuple[int, int]

    assert golden.as_json({"p": Pair(0.5, (1, 2))}) == {"p": {"left": 0.5, "right": [1, 2]}}
    with pytest.raises(TypeError, match="not object"):
        golden.as_json([object()])  # its repr would hold an address
