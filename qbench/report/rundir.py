"""Run and sweep folders on disk -> what reports and comparisons read: summary.json's figures (recomputed from
the records only where it lacks them), run.json, and the records as columns read when asked for."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from qbench.errors import QbenchError
from qbench.run import (
    Columns,
    DeviceStats,
    RecordsFormatError,
    RequestRecord,
    RunInfo,
    Scenario,
    Slo,
    Summary,
    SummaryFile,
    device_stats,
    endpoint_slos,
    read_records,
    server_usage,
    summarize,
    with_gpu_busy,
)

KEEP = 2  # columns a run read from disk keeps (the charts walk theirs two or three at a time)


class LoadedRun:
    """One run read back: its summary (summary.json's or recomputed), run.json, records (columns, objects)."""

    def __init__(self, path: Path, records: Sequence[RequestRecord] | None, info: RunInfo,
                 summary: Summary, notes: list[str] | None = None, *, columns: Columns | None = None,
                 stored: SummaryFile | None = None) -> None:
        self.path = path
        self.info = info  # run.json (every field at its default when missing)
        self.summary = summary
        self.notes = notes if notes is not None else []  # what was missing or odd, for the report
        self.stored = stored or SummaryFile(summary)  # what summary.json held beside the summary
        self._records = None if records is None else list(records)
        self._columns = columns

    @property
    def scenario(self) -> dict[str, Any]:
        return self.info.scenario

    @property
    def records(self) -> list[RequestRecord]:
        """Every record as an object (read from disk the first time: one ~1.3 KB object per request)."""
        if self._records is None:
            self._records = _read_records(self.path)
        return self._records

    @property
    def columns(self) -> Columns:
        """The records as columns: from records.parquet, read a column at a time, when the run has one."""
        if self._columns is None:
            from_disk = self._records is None and has_parquet(self.path)
            self._columns = Columns.read(self.path, keep=KEEP) if from_disk else Columns.of(self.records)
        return self._columns


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


def read_run(path: Path, *, recompute: bool = False) -> LoadedRun:
    """Read a run folder; QbenchError naming the path when it holds no records. The figures are summary.json's
    when it counts the records' rows, else (or with `recompute`) computed from the records."""
    if not path.is_dir():
        raise QbenchError(f"{path}: not a directory (expected a run folder such as reports/<run-id>/)")
    notes: list[str] = []
    finished = has_parquet(path)
    if not finished:
        records: Sequence[RequestRecord] | None = _read_records(path)
        notes.append("records.parquet is missing (the run did not finish): read records.jsonl")
        columns = Columns.of(records or [])
    else:
        records, columns = None, _read_columns(path)
    info = RunInfo.from_dict(read_json(path / "run.json", notes))
    slo, slos = scenario_slo(info, notes), mix_slos(info, notes)
    stored = _stored(path, columns, notes) if finished and not recompute else None
    if stored is None:  # from the columns: `--recompute` of a run of millions reads no record objects
        stored = SummaryFile(summarize(columns, slo, generator=info.generator, endpoint_slos=slos,
                                       journey_length=stored_journey_length(info),
                                       server_traces=info.server_traces))
    summary = stored.summary
    if summary.device is None:  # recomputed, or a summary.json from before the device figures
        summary.device = _device(columns, summary, info)
    return LoadedRun(path, records, info, summary, notes, columns=columns, stored=stored)


def has_parquet(path: Path) -> bool:
    """The run finished: records.parquet (or its parts, records-*.parquet) is there."""
    return (path / "records.parquet").exists() or any(path.glob("records-*.parquet"))


def _read_records(path: Path) -> list[RequestRecord]:
    try:
        return read_records(path)
    except FileNotFoundError:
        raise QbenchError(f"{path}: no records.parquet or records.jsonl (not a qbench run folder?)") from None
    except RecordsFormatError as exc:
        raise QbenchError(str(exc)) from None
    except (OSError, ValueError) as exc:  # a truncated or foreign Parquet file
        raise QbenchError(f"{path}: the records could not be read ({exc})") from None


def _read_columns(path: Path) -> Columns:
    try:
        return Columns.read(path, keep=KEEP)
    except RecordsFormatError as exc:
        raise QbenchError(str(exc)) from None
    except (OSError, ValueError) as exc:  # a truncated or foreign Parquet file
        raise QbenchError(f"{path}: the records could not be read ({exc})") from None


def _stored(path: Path, columns: Columns, notes: list[str]) -> SummaryFile | None:
    """summary.json, if it holds a summary counting the records' measured rows; else None, with a note."""
    stored = SummaryFile.read(path, notes, then="recomputed from the records")
    if stored is None:
        return None
    measured = len(columns) - int(columns.bools("warmup").sum())
    if stored.summary.requests != measured:
        notes.append(f"summary.json counts {stored.summary.requests} measured requests, the records "
                     f"{measured}: recomputed from the records")
        return None
    return stored


def _device(columns: Columns, summary: Summary, info: RunInfo) -> DeviceStats | None:
    """The forward passes beside the served rate, and the GPU's busy share from run.json's /status."""
    measured = columns.where(columns.measured())
    device = device_stats(measured.where(measured.ok()), summary.duration_s)
    return with_gpu_busy(device, server_usage(info.server or None).gpu_busy)


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
    from qbench.tune import Recommendation

    winner = Recommendation.from_dict(read_json(sweep_dir / "recommendation.json", [])).winner
    if winner is None:
        raise QbenchError(f"{sweep_dir}: recommendation.json names no recommended point to compare")
    return sweep_dir / "points" / winner.point_id
