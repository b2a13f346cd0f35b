"""SweepInfo: sweep.json as data; `qbench sweep` writes it through the type its readers load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qbench.errors import ScenarioError
from qbench.tune.sweep.config import SweepOptions, build_config, resume_options
from qbench.tune.sweep.outputs import sweep_json
from qbench.tune.values.sweep_info import FIELDS, SweepInfo

FULL: dict[str, Any] = {
    "schema_version": 1,
    "sweep_id": "sweep-demo-20261125T030000Z",
    "created_at": "2026-11-25T03:00:00+00:00",
    "scenario": {"path": "s.yaml", "content": {"name": "demo"}},
    "mode": "reference",
    "grid": {"axes": {"max_batch_size": [1, 4], "concurrency_limit": [1, 2, 4]}, "links": {}},
    "slo": {"p95_latency_s": 2.0},
    "constraints": {"slo": {"p95_latency_s": 2.0}, "objective": "capacity"},
    "search": "grid",
    "objective": "capacity",
    "objective_why": "a latency SLO to hold",
    "confirm_duration_s": 60.0,
    "repeat": 1,
    "server": {"settings": {"auth": "***"}, "launch": None, "target": None},
    "options": {"scenario": "s.yaml"},
}


def test_a_full_sweep_json_round_trips_in_the_writers_key_order() -> None:
    info = SweepInfo.from_dict({**FULL, "from_a_newer_version": 1})
    assert info.to_dict() == {**FULL, "from_a_newer_version": 1}
    assert list(info.to_dict()) == [*FULL, "from_a_newer_version"] and list(FULL) == list(FIELDS)
    assert SweepInfo.from_dict(info.to_dict()) == info
    assert info.scenario_name == "demo" and info.axes == {"max_batch_size": [1, 4],
                                                          "concurrency_limit": [1, 2, 4]}


@pytest.mark.parametrize("data", [
    {},  # sweep.json missing or unreadable
    {"scenario": {"path": "s.yaml"}, "grid": {"links": {}}},  # an old sweep: no axes, no objective
    {"scenario": "x", "grid": {"axes": "x"}, "slo": None, "repeat": "2", "mode": ["x"],
     "confirm_duration_s": True},  # mistyped entries read as absent, never raise
])
def test_an_old_or_partial_sweep_json_loads_with_defaults(data: dict[str, Any]) -> None:
    info = SweepInfo.from_dict(data)
    assert info.scenario_name is None and info.axes is None and info.slo == {}
    assert info.mode is None and info.objective is None and info.repeat is None
    assert info.confirm_duration_s is None and SweepInfo.from_dict(info.to_dict()) == info


def test_the_writer_cannot_add_a_key_the_readers_do_not_know() -> None:
    with pytest.raises(TypeError):
        SweepInfo(**{"not_a_field": 1})  # what sweep_json would do with a new describe() key


def test_the_sweep_writes_sweep_json_that_reads_back_unchanged(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\ntarget: http://127.0.0.1:9\nendpoint: {api_name: predict}\n"
                        "load: {rate: 2, duration: 1}\nslo: {p95_latency_s: 2}\n")
    config = build_config(SweepOptions(str(scenario), grid=["rate=1,2"], target="http://127.0.0.1:9"),
                          tmp_path / "sweep-s")
    written = json.loads(json.dumps(sweep_json(config)))  # as the file holds it
    info = SweepInfo.from_dict(written)
    assert info.to_dict() == written and info.extra == {}
    assert info.scenario_name == "s" and info.mode == "target" and info.axes == {"rate": [1, 2]}
    assert info.slo == {"p95_latency_s": 2.0} and info.sweep_id == "sweep-s"
    (tmp_path / "sweep-s").mkdir()
    (tmp_path / "sweep-s" / "sweep.json").write_text(json.dumps(written))
    assert resume_options(tmp_path / "sweep-s") == config.options  # --resume reads the same type
    (tmp_path / "sweep-s" / "sweep.json").write_text(json.dumps({"sweep_id": "old"}))
    with pytest.raises(ScenarioError, match="holds no 'options'"):
        resume_options(tmp_path / "sweep-s")
