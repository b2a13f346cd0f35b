"""Per-event phase traces, in the shape of Gradio's own (`GRADIO_PROFILING=1`, Gradio >= 6.10).

Gradio keeps one trace per processed event (`gradio/profiling.py`) and serves them at
`GET /gradio_api/profiling/traces?last_n=N`, `GET /gradio_api/profiling/summary` and
`POST /gradio_api/profiling/clear`. This server always does (a bounded deque; timing costs a few
`perf_counter` calls per event), with the same keys, so one reader in qbench reads both, plus its own:

    queue_wait_ms      joined -> dispatched (Gradio: enqueue -> process start)
    preprocess_ms      the event's component conversion: file read and image/audio decode
    prepare_ms         the workload's per-request preparation (`prepare_row`: e.g. decoded image ->
                       uint8 array) in a worker thread or process
    fn_call_ms         the workload call (the whole batch's, for every event of a batch)
    batch_prepare_ms   inside that call: stacking and normalising the batch, on the host or device
    h2d_ms             inside that call: the host-to-device copy (CUDA events on a GPU)
    forward_ms         inside that call: the model's forward pass (CUDA events on a GPU)
    postprocess_ms     outputs -> wire values (image encoding and file writes included)
    streaming_diff_ms  a generator's diffs between steps
    total_ms           dispatched -> terminal message
    batch_size         the events that ran in the same call

The extra phases are null (and absent from the summary) where a workload has no such step.

Preprocess and prepare of a batch function's waiting events are read ahead (jobs.read_ahead): they
run while the event still waits, so they overlap its queue_wait instead of adding to its total.
Unlike Gradio, which keeps one trace per batch (its first event's), every event of a batch has its
own. An upload is a trace of its own (`fn_name` "gradio_file_upload", keyed by the `session_hash`
request header when the client sends one), as in Gradio.

Workloads report the phases inside their call through `batch_phase()`: the job runner sets a fresh
`BATCH_PHASES` dict per call, and anyio runs the call's thread in a copy of the caller's context.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

UPLOAD_FN = "gradio_file_upload"
MAX_TRACES = 100_000  # Gradio's deque length
#: Gradio 6.31's RequestTrace keys with a duration, in its order (each `<name>_ms` in a trace).
GRADIO_PHASES = (
    "queue_wait", "preprocess", "fn_call", "postprocess", "streaming_diff", "total", "upload",
    "preprocess_move_to_cache", "preprocess_format_image", "postprocess_save_img_array_to_cache",
    "preprocess_audio_from_file", "postprocess_save_audio_to_cache", "preprocess_video",
    "postprocess_video_convert_video_to_playable_mp4", "postprocess_update_state_in_config",
    "postprocess_move_to_cache", "postprocess_video", "postprocess_save_pil_to_cache",
    "postprocess_save_bytes_to_cache", "save_file_to_cache",
)
#: This server's extra phases (see the module docstring).
EXTRA_PHASES = ("prepare", "batch_prepare", "h2d", "forward")
SUMMARY_PHASES = ("queue_wait", "preprocess", "prepare", "fn_call", "batch_prepare", "h2d", "forward",
                  "postprocess", "streaming_diff", "total")

#: The phases of the workload call in progress (name -> seconds); None outside a traced call.
BATCH_PHASES: ContextVar[dict[str, float] | None] = ContextVar("reference_server_batch_phases", default=None)


def batch_phase(name: str, seconds: float) -> None:
    """Add `seconds` to phase `name` of the current workload call (no-op outside a traced call)."""
    phases = BATCH_PHASES.get()
    if phases is not None:
        phases[name] = phases.get(name, 0.0) + seconds


@dataclass
class Trace:
    """One event's phases, accumulated in seconds while it runs."""

    event_id: str
    fn_name: str
    session_hash: str | None
    timestamp: float = field(default_factory=time.time)  # wall clock at creation (Gradio's)
    seconds: dict[str, float] = field(default_factory=dict)
    n_iterations: int = 0
    batch_size: int | None = None
    _json: bytes | None = field(default=None, init=False, repr=False, compare=False)  # to_json's, once

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def to_dict(self) -> dict[str, Any]:
        """Gradio's trace shape (its phases in ms, 0 where not measured; the extra phases null there).
        Kept lean: `/profiling/traces` turns up to MAX_TRACES of them into JSON in the event loop."""
        seconds = self.seconds
        out: dict[str, Any] = {"event_id": self.event_id, "fn_name": self.fn_name,
                               "session_hash": self.session_hash, "timestamp": self.timestamp}
        for phase, key in _GRADIO_KEYS:
            out[key] = seconds.get(phase, 0.0) * 1000
        for phase, key in _EXTRA_KEYS:  # null where the workload has no such phase (not a measured 0)
            value = seconds.get(phase)
            out[key] = None if value is None else value * 1000
        out["n_iterations"] = self.n_iterations
        out["batch_size"] = self.batch_size
        return out


    def to_json(self) -> bytes:
        """`to_dict` as JSON, made once: a trace is final once the collector has it, and qbench reads
        the last traces again and again during a run (each read overlapping the one before)."""
        if self._json is None:
            self._json = orjson.dumps(self.to_dict())
        return self._json


_GRADIO_KEYS = [(phase, f"{phase}_ms") for phase in GRADIO_PHASES]
_EXTRA_KEYS = [(phase, f"{phase}_ms") for phase in EXTRA_PHASES]


class TraceCollector:
    """The last MAX_TRACES finished traces, oldest first."""

    def __init__(self, maxlen: int = MAX_TRACES) -> None:
        self._traces: deque[Trace] = deque(maxlen=maxlen)
        self.added = 0  # ever added (a reader can tell how many fell out of the deque)

    def add(self, trace: Trace) -> None:
        self._traces.append(trace)
        self.added += 1

    def upload(self, session_hash: str | None, seconds: float) -> None:
        trace = Trace("", UPLOAD_FN, session_hash)
        trace.add("upload", seconds)
        self.add(trace)

    def get_all(self, last_n: int | None = None) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self._last(last_n)]

    def get_all_json(self, last_n: int | None = None) -> bytes:
        """`get_all` as a JSON array, each trace's JSON made once (Trace.to_json), in one join (a read of
        16,000 traces is ~10 MB: each `+` would copy it again)."""
        parts = [b"["]
        for trace in self._last(last_n):
            parts += (trace.to_json(), b",")
        parts[-1] = b"]" if len(parts) > 1 else b"[]"
        return b"".join(parts)

    def _last(self, last_n: int | None) -> list[Trace]:
        if last_n is None:
            return list(self._traces)
        if last_n <= 0:
            return []
        last = list(itertools.islice(reversed(self._traces), last_n))  # without copying the whole deque
        last.reverse()
        return last

    def summary(self) -> dict[str, Any]:
        """Gradio's summary shape: count and per-phase percentiles (ms) of the event traces, and the
        uploads' (this server adds its extra phases and the mean batch size)."""
        events = [t for t in self._traces if t.fn_name != UPLOAD_FN]
        uploads = [t.seconds.get("upload", 0.0) * 1000 for t in self._traces if t.fn_name == UPLOAD_FN]
        out: dict[str, Any] = {"count": len(events), "phases": {}}
        for phase in SUMMARY_PHASES:
            if phase in EXTRA_PHASES:
                values = [t.seconds[phase] * 1000 for t in events if phase in t.seconds]
                if not values:
                    continue
            else:
                values = [t.seconds.get(phase, 0.0) * 1000 for t in events]
            out["phases"][phase] = _percentiles(values)
        sizes = [t.batch_size for t in events if t.batch_size]
        if sizes:
            out["mean_batch_size"] = float(np.mean(sizes))
        if uploads:
            out["upload"] = {"count": len(uploads), **_percentiles(uploads)}
        return out

    def clear(self) -> None:
        self._traces.clear()


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return dict.fromkeys(("p50", "p90", "p95", "p99", "mean", "min", "max"), 0.0)
    arr = np.asarray(values, dtype=float)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(arr, [50, 90, 95, 99]))
    return {"p50": p50, "p90": p90, "p95": p95, "p99": p99, "mean": float(arr.mean()),
            "min": float(arr.min()), "max": float(arr.max())}
