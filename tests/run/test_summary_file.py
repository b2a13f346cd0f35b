"""summary.json as one typed value (qbench.run.summary_file): one writer, one tolerant reader."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qbench.run.diagnose.finding import Finding
from qbench.run.records.schema import RequestRecord
from qbench.run.results.alongside import Alongside, Side
from qbench.run.results.summary import summarize
from qbench.run.summary_file import SummaryFile


def records() -> list[RequestRecord]:
    out = []
    for i in range(20):
        r = RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="e", warmup=i < 2,
                          intended_at_s=i * 0.1)
        r.sent_at_s, r.started_at_s, r.completed_at_s = i * 0.1, i * 0.1 + 0.01, i * 0.1 + 0.05
        r.outcome = "ok"
        out.append(r)
    return out


def written(tmp_path: Path) -> SummaryFile:
    stored = SummaryFile(summarize(records()), [Finding("headroom", "it kept up")], auth={"logins": 2},
                         app_notes=["the app raised ValueError"],
                         alongside=[Alongside("chat", "page", 20.0, Side(10, 20.0, 0.5), Side(12, 10.0, 1.2),
                                              p50_ratio=1.4, p95_ratio=1.7)])
    stored.write(tmp_path)
    return stored


def test_it_reads_back_what_it_wrote(tmp_path: Path) -> None:
    stored = written(tmp_path)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["requests"] == 18 and data["latency"]  # the summary's keys at the top, as always
    assert data["diagnosis"] == [{"kind": "headroom", "message": "it kept up"}] and "soak" not in data
    again = SummaryFile.read(tmp_path)
    assert again == stored


def test_an_entry_of_another_shape_reads_as_none_and_the_summary_stays(tmp_path: Path) -> None:
    data = written(tmp_path).to_dict()
    data.update(diagnosis=[{"kind": "x"}], app_notes="not a list", alongside=[{"endpoint": "a"}], auth=["no"])
    (tmp_path / "summary.json").write_text(json.dumps(data))
    notes: list[str] = []
    stored = SummaryFile.read(tmp_path, notes)
    assert stored is not None and notes == []
    assert (stored.diagnosis, stored.app_notes, stored.alongside, stored.auth) == (None, None, None, None)
    assert stored.summary.requests == 18


def test_a_summary_json_from_before_lacks_the_entries(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(summarize(records()).to_dict()))
    stored = SummaryFile.read(tmp_path)
    assert stored is not None and stored.diagnosis is None and stored.soak is None


@pytest.mark.parametrize(("text", "why"), [
    ("{broken", "could not be read as a summary (Expecting property name"),
    ("[1, 2]", "could not be read as a summary (not a JSON object)"),
    ('{"diagnosis": []}', "could not be read as a summary (no summary in it (no requests, latency))"),
])
def test_a_file_without_a_summary_is_not_read(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "summary.json").write_text(text)
    notes: list[str] = []
    assert SummaryFile.read(tmp_path, notes, then="recomputed") is None
    assert len(notes) == 1 and notes[0].startswith("summary.json " + why), notes
    assert notes[0].endswith("): recomputed")  # what the reader does instead


def test_no_file_no_note(tmp_path: Path) -> None:
    notes: list[str] = []
    assert SummaryFile.read(tmp_path, notes) is None and notes == []


def test_the_soak_verdicts_join_through_the_same_writer(tmp_path: Path) -> None:
    stored = written(tmp_path)
    replace(stored, soak={"verdicts": {"memory": "flat"}}).write(tmp_path)
    again = SummaryFile.read(tmp_path)
    assert again is not None and again.soak == {"verdicts": {"memory": "flat"}}
    assert replace(again, soak=None) == stored
