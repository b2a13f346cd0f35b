"""Run and sweep folders read back (qbench.report.rundir): JSON files that are missing or odd become
notes, the SLO, mix SLOs and journey length come from the scenario stored in run.json, refusals name
the folder, and a sweep's winner is found by its recommendation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from qbench.errors import QbenchError
from qbench.report.rundir import (
    is_sweep_dir,
    mix_slos,
    read_json,
    read_run,
    scenario_slo,
    stored_journey_length,
    winner_run_dir,
)
from qbench.run.records.schema import RequestRecord
from qbench.run.results.run_info import RunInfo
from qbench.run.scenario.schema import Slo
from tests.report.report_synth import simulate, write_run


@pytest.mark.parametrize(("text", "note"), [
    (None, "x.json is missing"),
    ("{not json", "x.json could not be read: "),
    ("[1, 2]", "x.json does not hold a JSON object"),
])
def test_read_json_notes_what_is_wrong_and_gives_an_empty_object(tmp_path: Path, text: str | None,
                                                                   note: str) -> None:
    if text is not None:
        (tmp_path / "x.json").write_text(text)
    notes: list[str] = []
    assert read_json(tmp_path / "x.json", notes) == {}
    assert len(notes) == 1 and notes[0].startswith(note)


def test_read_json_reads_an_object(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"a": [1]}')
    notes: list[str] = []
    assert read_json(tmp_path / "x.json", notes) == {"a": [1]} and notes == []


def test_a_sweep_folder_has_sweep_json_or_sweep_parquet(tmp_path: Path) -> None:
    assert not is_sweep_dir(tmp_path)
    (tmp_path / "sweep.parquet").write_bytes(b"")
    assert is_sweep_dir(tmp_path)


def test_read_run_refuses_what_is_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(QbenchError, match="not a directory"):
        read_run(tmp_path / "missing")
    with pytest.raises(QbenchError, match=r"no records\.parquet or records\.jsonl"):
        read_run(tmp_path)


def test_read_run_summarises_the_records_with_the_stored_slo(tmp_path: Path) -> None:
    records = simulate(n=60, warmup=10)
    run = write_run(tmp_path / "run", records, {"scenario": {"name": "s", "slo": {"p95_latency_s": 5}}})
    loaded = read_run(run)
    assert loaded.notes == [] and len(loaded.records) == 60 and loaded.summary.requests == 50
    assert loaded.scenario["name"] == "s" and loaded.info.target == "http://127.0.0.1:7860"
    assert [c.name for c in loaded.summary.checks()] == ["p95_latency_s"]


def test_a_run_that_died_is_read_from_jsonl_with_a_note(tmp_path: Path) -> None:
    record = RequestRecord(request_id=0, user_id=0, session_id="s", endpoint="/p", warmup=False,
                           intended_at_s=0.0, sent_at_s=0.0, completed_at_s=0.1, outcome="ok")
    (tmp_path / "records.jsonl").write_bytes(orjson.dumps(record) + b"\n")  # as the run writes it
    loaded = read_run(tmp_path)
    assert loaded.notes == ["records.parquet is missing (the run did not finish): read records.jsonl",
                            "run.json is missing"]
    assert loaded.summary.completed_ok == 1 and loaded.info.target is None


def info(scenario: dict[str, Any]) -> RunInfo:
    return RunInfo.from_dict({"scenario": scenario})


def test_the_slo_of_the_stored_scenario() -> None:
    notes: list[str] = []
    assert scenario_slo(info({}), notes) is None
    slo = scenario_slo(info({"slo": {"p95_latency_s": 2}}), notes)
    assert slo == Slo.model_validate({"p95_latency_s": 2})
    assert notes == []
    assert scenario_slo(info({"slo": {"p95_latency_s": -1}}), notes) is None
    assert len(notes) == 1 and notes[0].startswith("run.json scenario.slo ignored: ")


@pytest.mark.parametrize(("journey", "length"), [
    (None, None), ("not a list", None), ([], 0), ([{"repeat": 3}, {}, "x"], 5),
])
def test_the_length_of_one_stored_journey(journey: Any, length: int | None) -> None:
    assert stored_journey_length(info({"journey": journey})) == length


def test_mix_slos_are_none_without_a_mix_and_a_bad_mix_is_a_note() -> None:
    notes: list[str] = []
    assert mix_slos(info({"name": "x"}), notes) is None
    assert mix_slos(info({"name": "x", "mix": [{"nonsense": True}]}), notes) is None
    assert len(notes) == 1 and notes[0].startswith("run.json scenario.mix ignored: ")


def test_the_winner_run_folder_of_a_sweep(tmp_path: Path) -> None:
    (tmp_path / "recommendation.json").write_text(json.dumps({"winner": {"point_id": "p007", "knobs": {}},
                                                              "ranked": [], "why": ""}))
    assert winner_run_dir(tmp_path) == tmp_path / "points" / "p007"
    (tmp_path / "recommendation.json").write_text(json.dumps({"winner": None, "ranked": [], "why": ""}))
    with pytest.raises(QbenchError, match="recommendation.json names no recommended point"):
        winner_run_dir(tmp_path)
    (tmp_path / "recommendation.json").unlink()
    with pytest.raises(QbenchError, match="names no recommended point"):
        winner_run_dir(tmp_path)
