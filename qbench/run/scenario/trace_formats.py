"""Other formats (nginx and uvicorn access logs, HAR, Mooncake JSONL) -> qbench trace lines (`qbench trace
import`), and a trace's shape (`qbench trace show`). An unreadable line raises ScenarioError."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from qbench.errors import ScenarioError
from qbench.run.scenario.trace import Trace

FORMATS = ("nginx", "uvicorn", "har", "mooncake")

_NGINX = re.compile(
    r'^(?P<addr>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<path>\S+)[^"]*" '
    r'(?P<status>\d{3}) \S+(?: "[^"]*" "[^"]*")?(?: (?P<request_time>\d+(?:\.\d+)?))?'
)
_UVICORN = re.compile(
    r'^(?P<time>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?).*?"(?P<method>[A-Z]+) (?P<path>\S+) '
    r'HTTP/[\d.]+" (?P<status>\d{3})'
)


def import_trace(
    path: Path, fmt: str, *, spread: bool = True, include: str | None = None
) -> list[dict[str, Any]]:
    """Read `path` in format `fmt` -> trace lines sorted by time (`include`: keep paths matching a regex)."""
    readers: dict[str, Callable[[Path, bool], Iterator[dict[str, Any]]]] = {
        "nginx": _nginx, "uvicorn": _uvicorn, "har": _har, "mooncake": _mooncake,
    }
    if fmt not in readers:
        raise ScenarioError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    lines = list(readers[fmt](path, spread))
    if include is not None:
        pattern = re.compile(include)
        lines = [line for line in lines if pattern.search(str(line.get("path", "")))]
    if not lines:
        matching = f" matching {include!r}" if include else ""
        raise ScenarioError(f"{path}: no requests found as {fmt}{matching}")
    key = "t_s" if "t_s" in lines[0] else "timestamp"
    return sorted(lines, key=lambda line: float(line[key]))


def _read_text(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None


def _nginx(path: Path, spread: bool) -> Iterator[dict[str, Any]]:
    stamped: list[tuple[float, dict[str, Any]]] = []
    for number, text in enumerate(_read_text(path), start=1):
        if not text.strip():
            continue
        match = _NGINX.match(text)
        if match is None:
            raise ScenarioError(f"{path}:{number}: not an nginx combined/common log line: {text[:80]!r}")
        try:
            when = dt.datetime.strptime(match["time"], "%d/%b/%Y:%H:%M:%S %z").timestamp()
        except ValueError:
            expected = "expected 23/Nov/2026:10:15:00 +0000"
            raise ScenarioError(f"{path}:{number}: time {match['time']!r}: {expected}") from None
        took = float(match["request_time"]) if match["request_time"] else 0.0
        stamped.append((when - took, {"path": match["path"], "method": match["method"],
                                      "status": int(match["status"])}))
    yield from _spread_seconds(stamped) if spread else ({"timestamp": t, **line} for t, line in stamped)


def _spread_seconds(stamped: list[tuple[float, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Requests logged in the same whole second, spread evenly over it (in log order)."""
    by_second: dict[int, list[tuple[float, dict[str, Any]]]] = {}
    for when, line in stamped:
        by_second.setdefault(int(np.floor(when)), []).append((when, line))
    for second, group in by_second.items():
        for k, (when, line) in enumerate(group):
            yield {"timestamp": second + k / len(group) + (when - np.floor(when)) / len(group), **line}


def _uvicorn(path: Path, spread: bool) -> Iterator[dict[str, Any]]:
    for number, text in enumerate(_read_text(path), start=1):
        if '" ' not in text or "HTTP/" not in text:
            continue  # startup and other log lines
        match = _UVICORN.match(text)
        if match is None:
            raise ScenarioError(
                f"{path}:{number}: an access line without a time prefix; uvicorn's default log has no time: "
                "run it with a --log-config whose format starts with %(asctime)s"
            )
        when = dt.datetime.fromisoformat(match["time"].replace(",", ".")).replace(tzinfo=dt.timezone.utc)
        yield {"timestamp": when.timestamp(), "path": match["path"], "method": match["method"],
               "status": int(match["status"])}


def _har(path: Path, spread: bool) -> Iterator[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["log"]["entries"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ScenarioError(f"{path}: not a HAR file (expected log.entries): {exc}") from None
    for number, entry in enumerate(entries, start=1):
        try:
            when = dt.datetime.fromisoformat(str(entry["startedDateTime"]).replace("Z", "+00:00"))
            request = entry["request"]
            url = urlsplit(str(request["url"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(
                f"{path}: entry {number}: expected startedDateTime and request.url ({exc})"
            ) from None
        line: dict[str, Any] = {"timestamp": when.timestamp(), "path": url.path,
                                "method": request.get("method")}
        line.update(_gradio_join(request, url.path))
        yield line


def _gradio_join(request: dict[str, Any], path: str) -> dict[str, Any]:
    """fn_index and inputs of a Gradio `queue/join` POST, when its data holds no uploaded file."""
    if not path.endswith("/queue/join") or request.get("method") != "POST":
        return {}
    try:
        body = json.loads(request["postData"]["text"])
    except (KeyError, TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    if isinstance(body.get("fn_index"), int):
        out["fn_index"] = body["fn_index"]
    data = body.get("data")
    text = json.dumps(data)
    if isinstance(data, list) and "gradio.FileData" not in text and '"path"' not in text:
        out["inputs"] = data
    return out


def _mooncake(path: Path, spread: bool) -> Iterator[dict[str, Any]]:
    for number, text in enumerate(_read_text(path), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
            line: dict[str, Any] = {"t_s": float(row["timestamp"]) / 1000.0}
        except (ValueError, KeyError, TypeError):
            raise ScenarioError(f"{path}:{number}: expected Mooncake JSON with a timestamp (ms)") from None
        for source, target in (("input_length", "input_tokens"), ("output_length", "output_tokens")):
            if source in row:
                line[target] = row[source]
        yield line


def write_jsonl(lines: list[dict[str, Any]], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


# ---------------------------------------------------------------- the shape of a trace


@dataclass(frozen=True)
class TraceShape:
    """What `qbench trace show` prints."""

    requests: int
    span_s: float
    mean_rps: float
    peak_rps_1s: float  # most requests in any one-second window
    per_second: np.ndarray  # requests in each second from 0
    endpoints: dict[str, int]  # "api_name predict" -> count; "unnamed" for lines that name none
    with_inputs: int  # lines that carry their own inputs


def trace_shape(trace: Trace) -> TraceShape:
    times = trace.times - trace.times.min()
    span = float(times.max())
    per_second = np.bincount(np.floor(times).astype(np.int64))
    names = Counter(" ".join(f"{k} {v}" for k, v in e.items()) or "unnamed" for e in trace.endpoints)
    return TraceShape(
        requests=len(trace),
        span_s=span,
        mean_rps=len(trace) / span if span > 0 else float("nan"),
        peak_rps_1s=float(per_second.max()),
        per_second=per_second,
        endpoints=dict(names.most_common()),
        with_inputs=sum(values is not None for values in trace.inputs),
    )


def sparkline(values: np.ndarray, width: int = 60) -> str:
    """A one-line chart of `values` (resampled to at most `width` columns, by mean)."""
    if values.size == 0:
        return ""
    bins = np.array_split(values.astype(np.float64), min(width, values.size))
    means = np.array([b.mean() for b in bins])
    top = means.max()
    if top <= 0:
        return " " * means.size
    blocks = " ▁▂▃▄▅▆▇█"
    return "".join(blocks[int(round(v / top * (len(blocks) - 1)))] for v in means)
