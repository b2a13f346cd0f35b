"""pandas views of runs and sweeps, for notebooks: `load_run`, `load_sweep`, `join_runs`. Loaded lazily: a
column is read from records.parquet when asked for (`frame`); `records`, every column, on first use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qbench.errors import QbenchError
from qbench.report.rundir import has_parquet, is_sweep_dir, read_run
from qbench.report.sweep_charts import read_sweep
from qbench.run import (
    DERIVED,
    FIELD_NAMES,
    SERVER_PHASES,
    Columns,
    RequestRecord,
    RunInfo,
    Summary,
    read_records,
    records_table,
)
from qbench.tune import Recommendation, SweepInfo

__all__ = ["RunData", "SweepData", "join_runs", "load_run", "load_sweep", "records_frame"]

RECORD_FILES = ("records.parquet", "records.jsonl")
PHASES = ("latency_s", "latency_from_send_s", "send_lag_s", "queue_wait_s", "service_s", "ttfo_s")


def records_frame(records: Sequence[RequestRecord]) -> pd.DataFrame:
    """Records -> DataFrame: stored fields, derived phases (s, NaN when missing) and `ok`."""
    frame: pd.DataFrame = records_table(records).to_pandas()
    frame["ok"] = frame["outcome"] == "ok"
    return frame


@dataclass
class RunData:
    """One run folder (`reports/<run-id>/`) as DataFrames, each column read when asked for."""

    path: Path
    summary: Summary  # what the run wrote (summary.json; recomputed from the records if it has none)
    scenario: dict[str, Any]  # the scenario as run (run.json)
    info: RunInfo  # run.json: target, server snapshot, host, generator stats (defaults if missing)
    columns: Columns = field(repr=False)  # the records as columns (records.parquet, read a column at a time)
    notes: list[str] = field(default_factory=list)  # what was missing or odd on disk

    @cached_property
    def records(self) -> pd.DataFrame:
        """One row per scheduled request, every column (read the first time it is asked for)."""
        return _whole_frame(self.path)

    def frame(self, *names: str, warmup: bool = True) -> pd.DataFrame:
        """The named columns of `records` (stored fields, derived phases, `ok`), one row per request in
        the same order, read from disk without the others; warm-up rows left out with `warmup=False`."""
        for name in names:
            if name not in _COLUMNS:
                _check_column(pd.DataFrame(columns=list(_COLUMNS)), name, "column")
        keep = None if warmup else self.columns.measured()
        data = {name: _column(self.columns, name) for name in dict.fromkeys(names)}
        frame = pd.DataFrame({k: v if keep is None else v[keep] for k, v in data.items()})
        return frame if keep is None else frame.set_axis(np.flatnonzero(keep), axis=0)

    def measured(self, warmup: bool = False) -> pd.DataFrame:
        """The records outside the warm-up window (all of them with `warmup=True`)."""
        return self.records if warmup else self.records[~self.records["warmup"]]

    def percentiles(
        self,
        phase: str = "latency_s",
        window_s: float = 10.0,
        q: Sequence[float] = (50, 95, 99),
        by: str = "intended_at_s",
        warmup: bool = False,
    ) -> pd.DataFrame:
        """Percentiles of one phase over ok requests per `window_s` window of `by` (intended send time by
        default), labelled by the window's start; columns `count`, `p50`, `p95`..."""
        _check_name(phase, "phase")
        _check_name(by, "by")
        rows = self.frame(phase, by, "ok", warmup=warmup)
        rows = rows[rows["ok"] & rows[phase].notna() & rows[by].notna()]
        window = _window(rows[by], window_s)
        grouped = rows.groupby(window)[phase]
        table = pd.DataFrame({"count": grouped.size()})
        for value in q:
            table[f"p{value:g}"] = grouped.quantile(value / 100.0)
        table.index.name = "window_start_s"
        return table

    def errors_over_time(self, window_s: float = 10.0, warmup: bool = True) -> pd.DataFrame:
        """Requests per window by outcome (`ok` and one column per error kind), counted where each ended, else
        was sent, else was meant to be sent; warm-up included by default."""
        rows = self.frame("completed_at_s", "sent_at_s", "intended_at_s", "ok", warmup=warmup)
        when = rows["completed_at_s"].fillna(rows["sent_at_s"]).fillna(rows["intended_at_s"])
        codes, kinds = self.columns.labels("error_kind")
        if not warmup:
            codes = codes[self.columns.measured()]
        # "ok", else the kind ("unknown" for none): one code per distinct name, the names sorted
        names, remap = np.unique(np.array([*kinds, "unknown", "ok"], dtype=object), return_inverse=True)
        kind = remap[np.where(rows["ok"].to_numpy(), len(kinds) + 1, np.where(codes < 0, len(kinds), codes))]
        return _crosstab(_window(when, window_s).to_numpy(), kind, [str(n) for n in names])

    def phase_table(self, q: Sequence[float] = (50, 90, 95, 99), warmup: bool = False) -> pd.DataFrame:
        """One row per phase: count, mean and percentiles over ok requests (seconds)."""
        rows = self._ok_rows(warmup)
        table = {}
        for phase in PHASES:  # a column at a time
            values = _present(self.columns.floats(phase)[rows])
            stats = {"count": float(values.size), "mean": float(values.mean()) if values.size else np.nan}
            for value in q:
                stats[f"p{value:g}"] = float(np.percentile(values, value)) if values.size else np.nan
            table[phase] = stats
        return pd.DataFrame.from_dict(table, orient="index")

    def time_split(self, q: Sequence[float] = (50, 90), warmup: bool = False) -> pd.DataFrame:
        """Where the time went: rows (endpoint, phase), columns `count` and percentiles of ok requests (s;
        `server_batch_size` in requests); empty when the server reported no phases."""
        rows = self._ok_rows(warmup)
        codes, endpoints = self.columns.labels("endpoint")
        mine = {e: rows & (codes == endpoints.index(e)) for e in sorted(endpoints)}
        found: dict[tuple[str, str], dict[str, float]] = {}
        for phase in SERVER_PHASES:  # a column at a time
            column = self.columns.floats(phase)
            for endpoint, where in mine.items():
                values = _present(column[where])
                if values.size:
                    stats = {"count": float(values.size)}
                    stats.update({f"p{v:g}": float(np.percentile(values, v)) for v in q})
                    found[(endpoint, phase)] = stats
        table = {(e, p): found[(e, p)] for e in mine for p in SERVER_PHASES if (e, p) in found}
        frame = pd.DataFrame.from_dict(table, orient="index")
        if not table:
            return pd.DataFrame(columns=["count", *(f"p{v:g}" for v in q)])
        frame.index = pd.MultiIndex.from_tuples(list(table), names=["endpoint", "phase"])
        return frame

    def _ok_rows(self, warmup: bool) -> np.ndarray:
        """Mask of the ok requests (outside the warm-up unless `warmup`)."""
        ok = self.columns.ok()
        return np.asarray(ok if warmup else ok & self.columns.measured())


@dataclass
class SweepData:
    """One sweep folder (`reports/sweep-<name>-<stamp>/`) as DataFrames; point records load on demand."""

    path: Path
    points: pd.DataFrame  # one row per measured point: point_id, knobs, figures, status, rank, verdict
    knobs: list[str]  # the swept knobs (columns of `points`), in grid order
    recommendation: Recommendation | None  # recommendation.json (None if missing)
    info: SweepInfo  # sweep.json (defaults if missing)
    notes: list[str] = field(default_factory=list)
    _runs: dict[str, RunData] = field(default_factory=dict, repr=False)

    @property
    def winner(self) -> str | None:
        """The recommended point's id, or None when no point met the constraints."""
        winner = self.recommendation.winner if self.recommendation is not None else None
        return winner.point_id if winner is not None else None

    def run(self, point_id: str) -> RunData:
        """One point's run, read from `points/<point_id>/` the first time it is asked for."""
        if point_id not in self._runs:
            folder = self.path / "points" / point_id
            if not folder.is_dir():
                known = ", ".join(self.points["point_id"].astype(str)) if "point_id" in self.points else ""
                raise QbenchError(f"{self.path}: no point {point_id!r} (points: {known or 'none'})")
            self._runs[point_id] = load_run(folder)
        return self._runs[point_id]

    def records(self, point_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Records of several points, `point_id` and knob values first (default: all points with records)."""
        ids = list(point_ids) if point_ids is not None else self._points_with_records()
        frames = []
        for point_id in ids:
            frame = self.run(point_id).records.copy()
            knob_values = self._knob_values(point_id)
            for position, (name, value) in enumerate([("point_id", point_id), *knob_values.items()]):
                frame.insert(position, name, value)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _points_with_records(self) -> list[str]:
        ids = [str(p) for p in self.points.get("point_id", pd.Series(dtype=str))]
        folder = self.path / "points"
        return [p for p in ids if any((folder / p / name).exists() for name in RECORD_FILES)]

    def _knob_values(self, point_id: str) -> dict[str, Any]:
        row = self.points[self.points["point_id"].astype(str) == point_id]
        if row.empty:
            return {}
        return {k: row.iloc[0][k] for k in self.knobs if k in row}


def load_run(path: str | Path) -> RunData:
    """Read a run folder (records.parquet, or records.jsonl when the run died; run.json)."""
    loaded = read_run(Path(path))
    return RunData(path=loaded.path, summary=loaded.summary, scenario=loaded.scenario, info=loaded.info,
                   columns=loaded.columns, notes=loaded.notes)


def load_sweep(path: str | Path) -> SweepData:
    """Read a sweep folder: the points table now, each point's records when asked for."""
    folder = Path(path)
    if not folder.is_dir() or not is_sweep_dir(folder):
        raise QbenchError(f"{folder}: not a sweep folder (expected sweep.json, as `qbench sweep` writes)")
    loaded = read_sweep(folder)
    points = pd.DataFrame(loaded.rows)
    if "rank" in points:
        points = points.sort_values("rank", na_position="last", kind="stable").reset_index(drop=True)
    return SweepData(
        path=folder,
        points=points,
        knobs=list(loaded.knobs),
        recommendation=loaded.recommendation,
        info=loaded.info,
        notes=loaded.notes,
    )


def join_runs(
    a: RunData, b: RunData, phases: Sequence[str] = ("latency_s", "queue_wait_s", "service_s")
) -> pd.DataFrame:
    """Two runs side by side, matched on `request_id` (requests in both only): each phase `_a`, `_b` and
    `<phase>_diff` (B - A, s). Meaningful when both runs followed the same schedule."""
    for phase in phases:
        _check_name(phase, "phase")
    keep = ["request_id", "intended_at_s", "outcome", *phases]
    joined = a.frame(*keep).merge(b.frame(*keep), on="request_id", suffixes=("_a", "_b"))
    for phase in phases:
        joined[f"{phase}_diff"] = joined[f"{phase}_b"] - joined[f"{phase}_a"]
    return joined.set_index("request_id")


def _present(values: np.ndarray) -> np.ndarray:
    return np.asarray(values[~np.isnan(values)])


def _crosstab(window: np.ndarray, kind: np.ndarray, names: list[str]) -> pd.DataFrame:
    """Rows per (window, kind) as pandas.crosstab counts them (NaN windows and absent kinds left out)."""
    keep = ~np.isnan(window)
    starts, row = np.unique(window[keep], return_inverse=True)
    counts = np.bincount(row * len(names) + kind[keep], minlength=starts.size * len(names))
    counts = counts.reshape(starts.size, len(names)).astype(np.int64)
    present = counts.sum(axis=0) > 0
    return pd.DataFrame(counts[:, present], index=pd.Index(starts, name="window_start_s"),
                        columns=[n for n, p in zip(names, present, strict=True) if p])


def _window(times: pd.Series, window_s: float) -> pd.Series:
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s!r}")
    starts = (times // window_s) * window_s
    return starts.rename("window_start_s")


_COLUMNS: dict[str, None] = dict.fromkeys([*FIELD_NAMES, *DERIVED, "ok"])
_TEXT = frozenset(n for n, f in RequestRecord.__dataclass_fields__.items()
                  if "str" in str(f.type) or str(f.type) == "Outcome")
_INTS = frozenset(n for n, f in RequestRecord.__dataclass_fields__.items() if str(f.type) == "int")


def _column(cols: Columns, name: str) -> np.ndarray:
    """One column as `records` holds it: strings as objects (None), int64, bool, else float64 with NaN."""
    if name == "ok":
        return cols.ok()
    if name == "warmup":
        return cols.bools(name)
    if name in _TEXT:  # from the codes: one Python string per distinct value, not per row
        codes, strings = cols.labels(name)
        return np.asarray(np.array([*strings, None], dtype=object)[codes])
    if name in _INTS:
        return cols.ints(name)
    return cols.floats(name)


def _whole_frame(path: Path) -> pd.DataFrame:
    """Every column of every record (records.parquet, else records.jsonl read back), plus `ok`."""
    if has_parquet(path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        single = path / "records.parquet"
        files = [single] if single.exists() else sorted(path.glob("records-*.parquet"))
        table = pa.concat_tables([pq.read_table(f) for f in files])
        if table.column_names == [*FIELD_NAMES, *DERIVED]:  # this version's: as records_table builds it
            frame: pd.DataFrame = table.to_pandas()
            frame["ok"] = frame["outcome"] == "ok"
            return frame
    return records_frame(read_records(path))


def _check_name(name: str, what: str) -> None:
    if name not in _COLUMNS:
        _check_column(pd.DataFrame(columns=list(_COLUMNS)), name, what)


def _check_column(frame: pd.DataFrame, name: str, what: str) -> None:
    if name not in frame.columns:
        numeric = [c for c in frame.columns if c.endswith("_s")]
        raise ValueError(f"{what} {name!r}: not a records column; try one of {', '.join(numeric)}")
