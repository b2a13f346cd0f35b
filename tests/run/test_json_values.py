"""Reading JSON back (qbench.run.json_values): the one tolerant reader of each kind of value (a value of
another shape reads as None), and Readable, a file's dataclass read by pydantic with qbench's rules."""

from __future__ import annotations

import importlib
import json
import pkgutil
from dataclasses import dataclass, field, is_dataclass
from typing import Any, Literal

import pytest

import qbench
from qbench.run import json_values
from qbench.run.json_values import Readable, ReadableOrNone, json_dict, json_int, json_number, json_text


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


# ---------------------------------------------------------------- Readable: a file's dataclass


@dataclass(frozen=True)
class Pace:
    slope: float
    se: float


@dataclass(frozen=True)
class Finding(ReadableOrNone):
    steady: bool
    requests: int
    pace: Pace | None = None


@dataclass
class Probe(Readable):
    rate: float
    passed: bool
    finding: Finding | None = None
    users: int | None = None

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "rate": data.pop("rate_rps", data.get("rate"))}  # an older name


@dataclass
class Legacy:
    n: int

    @classmethod
    def from_dict(cls, data: Any) -> Legacy:
        return cls(len(data["items"]))  # a class that still reads itself


@dataclass
class File(Readable, tolerant=True, unknown_to="extra"):
    probes: list[Probe] = field(default_factory=list)
    target: str = "none"
    note: str | None = None
    names: tuple[str, ...] = ()
    kind: Literal["a", "b"] = "a"
    sizes: dict[str, dict[int, int]] = field(default_factory=dict)
    best: Probe | None = None
    legacy: Legacy | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def test_a_file_reads_typed_nested_and_migrated() -> None:
    data = {"probes": [{"rate_rps": 2, "passed": True, "finding": {"steady": True, "requests": 30.0,
                                                                   "pace": {"slope": 1, "se": 0}}}],
            "names": ["a"], "kind": "b", "sizes": {"/p": {"4": 2}}, "best": {}, "legacy": {"items": [1, 2]},
            "newer": 1}
    read = File.from_dict(json.loads(json.dumps(data)))
    probe = read.probes[0]
    assert probe == Probe(2.0, True, Finding(True, 30, Pace(1.0, 0.0)))
    assert type(probe.rate) is float and type(probe.finding.requests) is int  # type: ignore[union-attr]
    assert read.names == ("a",) and read.kind == "b" and read.sizes == {"/p": {4: 2}}
    assert read.best is None and read.legacy == Legacy(2) and read.extra == {"newer": 1}


def test_a_tolerant_file_reads_a_malformed_part_null_or_empty_text_as_its_default() -> None:
    read = File.from_dict({"probes": [{"rate": "fast", "passed": True}], "target": None, "note": "",
                           "names": "a", "kind": "c", "sizes": {"/p": {"x": 1}}, "legacy": {"no": 1}})
    assert read == File()
    assert File.from_dict({"probes": "x", "target": "t"}).target == "t"  # the other parts stay


@pytest.mark.parametrize("value", [True, "3", 2.5, None])
def test_a_number_is_a_json_number(value: Any) -> None:
    """A bool or a string is not a number; a whole float is an int; strict where qbench writes: raises."""
    with pytest.raises(ValueError, match="Probe"):
        Probe.from_dict({"rate": 1.0, "passed": True, "users": value} if value is not None
                        else {"rate": value, "passed": True})
    assert Probe.from_dict({"rate": 1, "passed": True, "users": 3.0}).users == 3


@pytest.mark.parametrize("value", [None, {}, [], "x", {"steady": True}, {"steady": 1, "requests": 2}])
def test_an_absent_or_malformed_finding_reads_as_none(value: Any) -> None:
    assert Finding.from_dict(value) is None
    probe = Probe.from_dict({"rate": 1.0, "passed": False, "finding": value})
    assert probe.finding is None and probe.rate == 1.0  # its parent stays
    assert Finding.from_dict({"steady": False, "requests": 3}) == Finding(False, 3)


@dataclass
class Knobs(Readable):
    knobs: dict[str, int | float | str | bool]


def test_a_knob_keeps_its_json_type() -> None:
    values = {"a": 1, "b": 1.0, "c": True, "d": "x", "e": 2.5}
    read = Knobs.from_dict({"knobs": values}).knobs
    assert read == values and [type(v) for v in read.values()] == [int, float, bool, str, float]


def test_each_class_gets_one_validator() -> None:
    assert json_values._validator(File) is json_values._validator(File)


def _readable(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_readable(sub))]


def test_every_readable_dataclass_in_qbench_builds_its_reader() -> None:
    """pydantic resolves each file type's annotations once, on its first read: every one is built here."""
    for module in pkgutil.walk_packages(qbench.__path__, "qbench."):
        if ".apphook." not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found = [c for c in _readable(json_values._Reads) if c.__module__.startswith("qbench.")
             and is_dataclass(c)]
    assert len(found) > 20
    for cls in found:
        json_values._validator(cls)
