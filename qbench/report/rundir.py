"""Run and sweep directories on disk -> what reports and comparisons read.

A run directory holds `records.parquet` (or `records.jsonl` when the run died), `run.json` and
`summary.json` (see `qbench.run.runner`). Figures are always recomputed from the records with
`run.results.summary.summarize`; `run.json`, read as `run.results.run_info.RunInfo`, supplies only what
records cannot: the scenario (and its SLO), the target, the server snapshot, the host and the
generator's own statistics.
A sweep directory holds `sweep.json`, `points/<id>/` run directories and `recommendation.json`
(see `qbench.tune.sweep`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from qbench.errors import QbenchError
from qbench.run.columns import Columns
from qbench.run.load.mix import endpoint_slos
from qbench.run.records import RecordsFormatError, RequestRecord, read_records
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import Summary, summarize
from qbench.run.scenario.scenario import Scenario, Slo


@dataclass
class LoadedRun:
    """One run read back from disk."""

    path: Path
    records: list[RequestRecord]
    info: RunInfo  # run.json (every field at its default when missing)
    summary: Summary
    notes: list[str] = field(default_factory=list)  # what was missing or odd, for the report

    @property
    def scenario(self) -> dict[str, Any]:
        return self.info.scenario


def read_json(path: Path, notes: list[str]) -> dict[str, Any]:
    """A JSON object from `path`, or {} with a note when it is missing or unreadable."""
    if not path.exists():
        notes.append(f"{path.name} is missing")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        notes.append(f"{path.name} could not be read: {exc}")
        return {}
    if not isinstance(data, dict):
        notes.append(f"{path.name} does not hold a JSON object")
        return {}
    return data


def is_sweep_dir(path: Path) -> bool:
    return (path / "sweep.json").exists() or (path / "sweep.parquet").exists()


def read_run(path: Path) -> LoadedRun:
    """Read a run directory; raise QbenchError naming the path when it holds no records."""
    if not path.is_dir():
        raise QbenchError(f"{path}: not a directory (expected a run folder such as reports/<run-id>/)")
    try:
        records = read_records(path)
    except FileNotFoundError:
        raise QbenchError(f"{path}: no records.parquet or records.jsonl (not a qbench run folder?)") from None
    except RecordsFormatError as exc:
        raise QbenchError(str(exc)) from None
    except (OSError, ValueError) as exc:  # a truncated or foreign Parquet file
        raise QbenchError(f"{path}: the records could not be read ({exc})") from None
    notes: list[str] = []
    if not (path / "records.parquet").exists():
        notes.append("records.parquet is missing (the run did not finish): read records.jsonl")
    info = RunInfo.from_dict(read_json(path / "run.json", notes))
    slo = scenario_slo(info, notes)
    summary = summarize(Columns.of(records), slo, generator=info.generator,
                        endpoint_slos=mix_slos(info, notes), journey_length=stored_journey_length(info),
                        server_traces=info.server_traces)
    return LoadedRun(path=path, records=records, info=info, summary=summary, notes=notes)


def scenario_slo(info: RunInfo, notes: list[str]) -> Slo | None:
    """The `slo:` section of the scenario stored in run.json, if any."""
    raw = info.scenario.get("slo")
    if not raw:
        return None
    try:
        return Slo.model_validate(raw)
    except ValidationError as exc:
        notes.append(f"run.json scenario.slo ignored: {exc.errors()[0].get('msg', exc)}")
        return None


def stored_journey_length(info: RunInfo) -> int | None:
    """The requests of one whole journey of the scenario in run.json (None: no journey)."""
    steps = info.scenario.get("journey")
    if not isinstance(steps, list):
        return None
    return sum(int(s.get("repeat", 1)) if isinstance(s, dict) else 1 for s in steps)


def mix_slos(info: RunInfo, notes: list[str]) -> dict[str, Slo | None] | None:
    """Per endpoint label, the own `slo:` of each entry of the scenario's mix in run.json (None if none)."""
    scenario = info.scenario
    if not scenario.get("mix"):
        return None
    try:
        return endpoint_slos(Scenario.model_validate(scenario))
    except (ValidationError, QbenchError) as exc:
        notes.append(f"run.json scenario.mix ignored: {str(exc).splitlines()[0]}")
        return None


def winner_run_dir(sweep_dir: Path) -> Path:
    """The run directory of a sweep's recommended point (what `qbench compare` compares for a sweep)."""
    from qbench.tune.recommend import Recommendation

    winner = Recommendation.from_dict(read_json(sweep_dir / "recommendation.json", [])).winner
    if winner is None:
        raise QbenchError(f"{sweep_dir}: recommendation.json names no recommended point to compare")
    return sweep_dir / "points" / winner.point_id
