"""Recorded schedules -> intended send times: a trace file (`load.trace`: JSON Lines or CSV, one request
per line) or a past run's intended times and request ids (`load.replay`). Malformed lines fail early."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qbench.errors import ScenarioError
from qbench.run.records.schema import read_records
from qbench.run.scenario.payloads import MIME, FileValue
from qbench.run.scenario.schema import Load, TraceSpec

TIME_FIELDS = ("t_s", "timestamp", "timestamp_ms")
ENDPOINT_FIELDS = ("api_name", "fn_index", "path")
MAX_REQUESTS = 5_000_000


@dataclass(frozen=True)
class Trace:
    """A trace file's lines, sorted by time."""

    path: Path
    times: np.ndarray  # seconds from the trace's start (t_s as written; absolute times shifted to 0)
    line_numbers: np.ndarray  # 1-based line in the file (a CSV header is line 1)
    inputs: tuple[list[Any] | None, ...]  # per line: inline inputs, or None (use the payload section)
    endpoints: tuple[dict[str, str], ...]  # per line: the endpoint fields it names ({} for none)

    def __len__(self) -> int:
        return int(self.times.size)


@dataclass(frozen=True)
class Schedule:
    """Intended send offsets (s, sorted), request ids, and each request's trace line (index)."""

    offsets: np.ndarray
    ids: np.ndarray
    source: np.ndarray | None  # index into Trace arrays per request; None for a replayed run


# ---------------------------------------------------------------- reading a trace file


def read_trace(path: Path) -> Trace:
    """Parse and check a whole trace file (cached per path and modification time)."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise ScenarioError(f"load.trace: file '{path}': cannot read ({exc.strerror})") from None
    return _read_trace(path, stamp)


@functools.lru_cache(maxsize=8)
def _read_trace(path: Path, _mtime_ns: int) -> Trace:
    rows = list(_rows(path))
    if not rows:
        raise ScenarioError(f"load.trace: file '{path}': no requests in it")
    kinds = {kind for _, kind, _, _ in rows}
    if len(kinds) > 1:
        fields = ", ".join(TIME_FIELDS)
        raise ScenarioError(f"{path}: lines mix time fields {sorted(kinds)}; use one of {fields}")
    rows.sort(key=lambda row: row[2])  # stable: equal times keep the file's order
    times = np.array([t for _, _, t, _ in rows], dtype=np.float64)
    if kinds != {"t_s"}:
        times = times - times.min()
    return Trace(
        path=path,
        times=times,
        line_numbers=np.array([n for n, _, _, _ in rows], dtype=np.int64),
        inputs=tuple(_inputs(path, n, line.get("inputs")) for n, _, _, line in rows),
        endpoints=tuple(_endpoint(path, n, line) for n, _, _, line in rows),
    )


def _rows(path: Path) -> Iterator[tuple[int, str, float, dict[str, Any]]]:
    """(line number, time field, time in s, the line's fields) per request line."""
    for number, line in _lines(path):
        kind, seconds = _time(path, number, line)
        for name in ("input_tokens", "output_tokens"):
            if line.get(name) not in (None, "") and not _count(line[name]):
                raise _bad(path, number, name, line[name], "a count >= 0")
        yield number, kind, seconds, line


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"load.trace: file '{path}': cannot read ({exc})") from None
    if path.suffix.lower() == ".csv":
        yield from _csv_lines(path, text)
        return
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{path}:{number}: not JSON ({exc.msg}); one object per line") from None
        if not isinstance(line, dict):
            raise ScenarioError(f"{path}:{number}: expected a JSON object, got {type(line).__name__}")
        yield number, line


def _csv_lines(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or not set(TIME_FIELDS) & set(reader.fieldnames):
        raise ScenarioError(f"{path}:1: the CSV header needs a time column: one of {', '.join(TIME_FIELDS)}")
    for row in reader:
        line: dict[str, Any] = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
        if "inputs" in line:
            try:
                line["inputs"] = json.loads(line["inputs"])
            except json.JSONDecodeError:
                raise _bad(path, reader.line_num, "inputs", line["inputs"], "a JSON list") from None
        yield reader.line_num, line


def _time(path: Path, number: int, line: dict[str, Any]) -> tuple[str, float]:
    present = [name for name in TIME_FIELDS if line.get(name) not in (None, "")]
    if len(present) != 1:
        found = f"found {', '.join(present)}" if present else "found none"
        raise ScenarioError(f"{path}:{number}: expected one time field of {', '.join(TIME_FIELDS)} ({found})")
    kind = present[0]
    value = line[kind]
    seconds = _seconds(kind, value)
    if seconds is None or not math.isfinite(seconds) or (kind == "t_s" and seconds < 0):
        expected = {"t_s": "seconds >= 0", "timestamp": "epoch seconds or an ISO 8601 time",
                    "timestamp_ms": "epoch milliseconds"}[kind]
        raise _bad(path, number, kind, value, expected)
    return kind, seconds


def _seconds(kind: str, value: Any) -> float | None:
    if kind == "timestamp" and isinstance(value, str) and not _is_number(value):
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return when.timestamp()
    if isinstance(value, bool) or not _is_number(value):
        return None
    return float(value) / (1000.0 if kind == "timestamp_ms" else 1.0)


def _bad(path: Path, number: int, field: str, value: Any, expected: str) -> ScenarioError:
    return ScenarioError(f"{path}:{number}: field '{field}': value {value!r}: expected {expected}")


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool)


def _count(value: Any) -> bool:
    try:
        return int(value) >= 0 and float(value) == int(value)
    except (TypeError, ValueError):
        return False


def _inputs(path: Path, number: int, value: Any) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _bad(path, number, "inputs", value, "a list, one value per input")
    return [_input(path, number, item) for item in value]


def _input(path: Path, number: int, item: Any) -> Any:
    if not (isinstance(item, dict) and set(item) == {"file"}):
        return item
    file = Path(str(item["file"]))
    file = file if file.is_absolute() else path.parent / file
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise _bad(path, number, "inputs", str(file), f"a readable file ({exc.strerror})") from None
    return FileValue(data, file.name, MIME.get(file.suffix.lstrip(".").lower(), "application/octet-stream"))


def _endpoint(path: Path, number: int, line: dict[str, Any]) -> dict[str, str]:
    named = {name: str(line[name]).lstrip("/") if name == "api_name" else str(line[name])
             for name in ENDPOINT_FIELDS if line.get(name) not in (None, "")}
    if "api_name" in named and "fn_index" in named:
        raise ScenarioError(f"{path}:{number}: name the function once (found api_name and fn_index)")
    return named


# ---------------------------------------------------------------- trace -> schedule


def trace_schedule(spec: TraceSpec, load: Load) -> Schedule:
    """The open-loop schedule of a trace: window, speedup, loop, then `duration` / `requests`."""
    trace = read_trace(spec.file)
    times, source = trace.times, np.arange(len(trace))
    period = _period(times)
    if spec.window is not None:
        start, end = spec.window
        keep = (times >= start) & (times < end)
        if not keep.any():
            raise ScenarioError(
                f"load.trace.window: value {list(spec.window)}: no line of {spec.file} falls in it "
                f"(its times run from {times.min():g} to {times.max():g} s)"
            )
        times, source, period = times[keep] - start, source[keep], end - start
    times, period = times / spec.speedup, period / spec.speedup
    if spec.loop:
        times, source = _loop(times, source, period, load)
    return _stop(Schedule(times, np.arange(times.size), source), load)


def _period(times: np.ndarray) -> float:
    """One lap of a looped trace: the last time plus the mean gap between lines (1 s for one line)."""
    last = float(times.max())
    gap = last / (times.size - 1) if times.size > 1 and last > 0 else 1.0
    return last + gap


def _loop(times: np.ndarray, source: np.ndarray, period: float, load: Load) -> tuple[np.ndarray, np.ndarray]:
    by_duration = math.ceil(load.duration / period) if load.duration is not None else None
    by_requests = math.ceil(load.requests / times.size) if load.requests is not None else None
    laps = min(x for x in (by_duration, by_requests) if x is not None)
    if laps * times.size > MAX_REQUESTS:
        count = laps * times.size
        raise ScenarioError(f"load.trace.loop: would schedule {count} requests (limit {MAX_REQUESTS})")
    offsets = (times[None, :] + period * np.arange(laps)[:, None]).ravel()
    return offsets, np.tile(source, laps)


def _stop(schedule: Schedule, load: Load) -> Schedule:
    keep = np.ones(schedule.offsets.size, dtype=bool)
    if load.duration is not None:
        keep &= schedule.offsets < load.duration
    offsets, ids = schedule.offsets[keep], schedule.ids[keep]
    source = schedule.source[keep] if schedule.source is not None else None
    if load.requests is not None:
        offsets, ids = offsets[: load.requests], ids[: load.requests]
        source = source[: load.requests] if source is not None else None
    return Schedule(offsets, ids, source)


def recorded_inputs(load: Load) -> Callable[[int], list[Any] | None] | None:
    """request id -> the trace line's inline inputs (None for a line without); None when no line has any."""
    spec = load.trace
    if spec is None:
        return None
    trace = read_trace(spec.file)
    if all(values is None for values in trace.inputs):
        return None
    schedule = trace_schedule(spec, load)
    assert schedule.source is not None
    by_id = dict(zip(schedule.ids.tolist(), schedule.source.tolist(), strict=True))

    def inputs(request_id: int) -> list[Any] | None:
        line = by_id.get(request_id)
        return None if line is None else trace.inputs[line]

    return inputs


# ---------------------------------------------------------------- a past run


def replay_schedule(run_dir: Path, load: Load) -> Schedule:
    """A past run's intended send times and request ids, in time order, then `duration` / `requests`."""
    try:
        records = read_records(run_dir)
    except FileNotFoundError:
        raise ScenarioError(f"load.replay: value '{run_dir}': no records.parquet or records.jsonl "
                            "(expected a run folder that qbench run wrote)") from None
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"load.replay: value '{run_dir}': the records cannot be read ({exc})") from None
    if not records:
        raise ScenarioError(f"load.replay: value '{run_dir}': the run has no records")
    order = sorted(records, key=lambda r: (r.intended_at_s, r.request_id))
    offsets = np.array([max(r.intended_at_s, 0.0) for r in order], dtype=np.float64)
    ids = np.array([r.request_id for r in order], dtype=np.int64)
    return _stop(Schedule(offsets, ids, None), load)
