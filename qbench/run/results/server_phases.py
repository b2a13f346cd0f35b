"""The server's own phase timings: fetched from the server, joined onto the records, one reader for all.

Sources, the first that answers:

    GET <api>/profiling/traces?last_n=N   per event: Gradio >= 6.10 started with GRADIO_PROFILING=1, and
                                          the reference server (always on, with its batch's phases too)
    GET /monitoring/summary               per function only (Gradio >= 5.44, monitoring on by default):
                                          process-time percentiles over the server's recent events

A trace is one JSON object per event, durations in milliseconds: `queue_wait_ms` (enqueued -> taken
by a worker), `preprocess_ms`, `fn_call_ms`, `postprocess_ms`, `streaming_diff_ms` (each summed over
a generator's iterations), `total_ms` (the processing after the queue), `event_id`, `session_hash`,
`fn_name`, `timestamp` (wall clock, at process start); the reference server adds `prepare_ms`,
`batch_prepare_ms`, `h2d_ms`, `forward_ms` (0 where its workload has no such phase: read as None)
and `batch_size`. A file upload is an entry of its own
(`fn_name` "gradio_file_upload", `upload_ms`) keyed only by the `session_hash` header of the upload,
so qbench sends `session_hash: qbench-<request_id>` with each upload (`upload_tag`) and sums the
uploads with that tag made between the request's send and its process start. Gradio 6.31 lists upload
entries without `upload_ms` (only its /profiling/summary has it): there `server_upload_s` stays None.
Gradio traces a batched function's batch once (as its first event); the reference server every event.

Traces join records by `event_id`. Durations need no clock alignment. The server keeps the last
100,000 entries (Gradio's deque): the runner reads them after the run, and during it whenever another
`FETCH_EVERY` requests were sent (`TraceCollector.watch`), so a long run loses none; those it still
could not match are counted in the `TraceReport`. What is read waits in a temporary file
(`TraceStore`), not in memory, until the join streams it onto the records once the run is over.
Nothing here raises to the run: a server that does not answer (or refuses: an app behind a Gradio
login) leaves the records as they were, and the report says so.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Protocol

import httpx
import orjson

from qbench.run import control
from qbench.run.protocols.base import upload_tag
from qbench.run.protocols.gradio_wire import parse_version
from qbench.run.records import RequestRecord


class Progress(Protocol):
    """What the collector reads of the run's live figures (qbench.run.load.loadgen.LiveStats)."""

    sent: int


Hook = Callable[[Any], "str | None"]  # qbench.run.load.loadgen.StopHook, without importing the generator

#: trace key (ms) -> record field (s)
TRACE_FIELDS = {
    "queue_wait_ms": "server_queue_wait_s",
    "preprocess_ms": "server_preprocess_s",
    "fn_call_ms": "server_fn_s",
    "postprocess_ms": "server_postprocess_s",
    "streaming_diff_ms": "server_streaming_diff_s",
    "total_ms": "server_total_s",
    "prepare_ms": "server_prepare_s",
    "batch_prepare_ms": "server_batch_prepare_s",
    "h2d_ms": "server_h2d_s",
    "forward_ms": "server_forward_s",
}
#: The reference server's own phases: exactly 0 means its workload has no such phase (a synthetic
#: workload has no forward pass), which the records keep as None, not as a 0 ms model.
UNTIMED_AT_ZERO = ("prepare_ms", "batch_prepare_ms", "h2d_ms", "forward_ms")
UPLOAD_FN = "gradio_file_upload"
BUFFER = 100_000  # entries the server keeps (gradio.profiling.TraceCollector's deque)
#: Requests sent between reads during a run. A read (~3x as many entries) is parsed at once, ~2 KB an
#: entry while it is: reads of 76,000 entries stepped qbench's RSS up by ~80 MB; small reads keep it flat.
FETCH_EVERY = 2_000
TIMEOUT_S = 15.0  # 100,000 traces are ~90 MB of JSON
SETTLE_S = 0.3  # a trace is stored just after the client got its result: wait, then read again
TRIES = 3
UPLOAD_SLACK_S = 1.0  # an upload entry's wall-clock stamp vs. the request's send, either side
HINT = ("per-request server phases: start the app with GRADIO_PROFILING=1 (Gradio >= 6.10); "
        "`qbench sweep --app` does so")


@dataclass
class FunctionTimes:
    """One function's process time as Gradio's /monitoring/summary reports it (the server's recent
    events, not only this run's)."""

    requests: int | None = None
    success_rate: float | None = None
    p50_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None


@dataclass
class TraceReport:
    """Where a run's server phases came from and how many requests got them."""

    source: str = "none"  # "traces" (per event), "monitoring" (per function), "none"
    traces: int = 0  # prediction traces read (this run's and older ones)
    expected: int = 0  # requests that reached a worker (process start seen) with an event_id
    matched: int = 0  # of those, the ones given the server's phases
    fetches_during_run: int = 0
    buffer_full: bool = False  # the server held as many entries as it keeps: older ones were dropped
    functions: dict[str, FunctionTimes] = field(default_factory=dict)  # source "monitoring"
    note: str | None = None  # one line for the summary: what is missing, how to get it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceReport:
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in data.items() if k in known}
        values["functions"] = {k: FunctionTimes(**v) for k, v in (data.get("functions") or {}).items()}
        return cls(**values)

    def line(self) -> str:
        """One line for the console and the report."""
        if self.source == "traces":
            text = f"server phases: {self.matched} of {self.expected} requests that reached the server"
            text += " matched its traces"
            if self.fetches_during_run:
                text += f" (read {self.fetches_during_run + 1} times)"
            return text + (f"; {self.note}" if self.note else "")
        return self.note or "server phases: none reported"


# ---------------------------------------------------------------- the join (pure)


def attach(records: Sequence[RequestRecord], traces: Iterable[Mapping[str, Any]]) -> int:
    """Write the phases of `traces` onto the records they belong to; the number of records given phases.

    A prediction trace belongs to the record of its `event_id` (the last one read wins); an upload entry
    to the record whose `upload_tag` it carries, made between that record's send and its process start
    (`UPLOAD_SLACK_S` either side, on the server's clock: the prediction trace's stamp is its process
    start). `traces` is read twice (the uploads, then the predictions) and never held: it may be a
    `TraceStore` of a whole long run."""
    uploads: dict[str, dict[str, Mapping[str, Any]]] = {}  # upload tag -> its entries by _key
    for t in traces:
        if t.get("fn_name") == UPLOAD_FN:
            uploads.setdefault(str(t.get("session_hash") or ""), {})[_key(t)] = t
    index: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.event_id is not None:
            index.setdefault(r.event_id, []).append(r)
    hit: set[int] = set()  # id() of the records given phases
    for t in traces:
        if t.get("fn_name") == UPLOAD_FN or t.get("event_id") is None:
            continue
        for r in index.get(str(t["event_id"]), ()):
            _apply(r, t)
            r.server_upload_s = _uploads(r, t, list(uploads.get(upload_tag(r.request_id), {}).values()))
            hit.add(id(r))
    return len(hit)


def _apply(record: RequestRecord, trace: Mapping[str, Any]) -> None:
    for key, name in TRACE_FIELDS.items():
        value = _num(trace.get(key))
        if value == 0.0 and key in UNTIMED_AT_ZERO:
            value = None  # the reference server writes 0 for a phase its workload does not have
        setattr(record, name, None if value is None else value / 1000.0)
    size = _num(trace.get("batch_size"))
    record.server_batch_size = None if size is None else int(size)


def _uploads(record: RequestRecord, trace: Mapping[str, Any],
             entries: list[Mapping[str, Any]]) -> float | None:
    """Seconds of the uploads tagged for this record; None when none reported a duration (Gradio
    6.31's trace list leaves `upload_ms` out of its entries: only /profiling/summary has it)."""
    own = _num(trace.get("upload_ms"))  # a server that times the request's uploads itself
    start = _num(trace.get("timestamp"))
    if not entries or start is None or record.sent_at_s is None or record.started_at_s is None:
        return None if own is None else own / 1000.0
    earliest = start - (record.started_at_s - record.sent_at_s) - UPLOAD_SLACK_S
    durations = [_num(u.get("upload_ms")) for u in entries
                 if earliest <= (_num(u.get("timestamp")) or 0.0) <= start + UPLOAD_SLACK_S]
    reported = [d for d in durations if d is not None]
    if not reported:
        return None if own is None else own / 1000.0
    return (sum(reported) + (own or 0.0)) / 1000.0


def _num(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (null, a string, a bool)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def expected(records: Iterable[RequestRecord]) -> int:
    """Requests a trace should exist for: given an event_id and seen to start on the server."""
    return sum(1 for r in records if _reached(r))


def matched(records: Iterable[RequestRecord]) -> int:
    """Of the `expected` requests, those that carry the server's phases."""
    return sum(1 for r in records if _reached(r) and r.server_total_s is not None)


def _reached(r: RequestRecord) -> bool:
    return r.event_id is not None and r.started_at_s is not None


# ---------------------------------------------------------------- reading the server


def read_traces(http: httpx.Client, api_url: str, last_n: int) -> list[dict[str, Any]] | int:
    """The server's last `last_n` entries; else the HTTP status that refused them (0: no answer).

    The body is read as a stream, not kept on the response: a response sits in a reference cycle,
    which the run's paused collector (qbench.run.load.loadgen.paused_gc) frees only after the run, and a
    read of 16,000 entries is ~15 MB."""
    try:
        with http.stream("GET", f"{api_url}/profiling/traces", params={"last_n": last_n}) as response:
            status = response.status_code
            body = orjson.loads(b"".join(response.iter_bytes())) if status == 200 else None
    except (httpx.HTTPError, ValueError):
        return 0
    if not isinstance(body, list):
        return status if status != 200 else 0
    return [t for t in body if isinstance(t, dict)]


def read_monitoring(http: httpx.Client, base_url: str) -> dict[str, FunctionTimes] | None:
    """Gradio's /monitoring/summary per function; None where it does not answer."""
    try:
        response = http.get(f"{base_url}/monitoring/summary")
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    functions = body.get("functions") if isinstance(body, dict) else None
    if not isinstance(functions, dict):
        return None
    out = {}
    for name, f in functions.items():
        if not isinstance(f, dict):
            continue
        p = f.get("process_time_percentiles") or {}
        requests = _num(f.get("total_requests"))
        out[str(name)] = FunctionTimes(
            requests=None if requests is None else int(requests), success_rate=_num(f.get("success_rate")),
            p50_s=_num(p.get("50th")), p90_s=_num(p.get("90th")), p99_s=_num(p.get("99th")))
    return out


class TraceStore:
    """The traces a run read, in an anonymous temporary file (one JSON line each): iterating reads them
    back one at a time. Reads overlap: an entry already written is not written again (its key is
    remembered while the server may still hold it, its last `BUFFER` entries: ~7 MB at most)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._seen: set[int] = set()  # hash(_key) of the last BUFFER entries written
        self._order: deque[int] = deque()  # the same, oldest first
        self.written = 0
        self.predictions = 0  # of which prediction traces (not uploads)

    def add(self, traces: Iterable[Mapping[str, Any]]) -> None:
        new = []
        for t in traces:
            key = hash(_key(t))
            if key not in self._seen:
                self._seen.add(key)
                self._order.append(key)
                new.append(t)
        while len(self._order) > BUFFER:
            self._seen.discard(self._order.popleft())
        if not new:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="qbench-traces-")
        self._file.seek(0, os.SEEK_END)
        self._file.write(b"".join(_line(t) for t in new))
        self.written += len(new)
        self.predictions += sum(1 for t in new if t.get("fn_name") != UPLOAD_FN)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._file is None:
            return
        self._file.flush()
        self._file.seek(0)
        for line in self._file:
            yield orjson.loads(line)

    def __bool__(self) -> bool:
        return self.written > 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._seen, self._order = set(), deque()
        self.written = self.predictions = 0


def _line(trace: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(trace) + b"\n"
    except TypeError:  # what orjson refuses (an integer past 64 bits): Python's json writes it
        return json.dumps(trace).encode() + b"\n"


class TraceCollector:
    """A run's traces: read during the run every `every` requests sent (in a thread, off the event
    loop), and after it (`finish`), joined onto the records; in between they wait in a `TraceStore`."""

    def __init__(self, base_url: str, api_prefix: str = "/gradio_api", *,
                 headers: Mapping[str, str] | None = None, cookies: Mapping[str, str] | None = None,
                 every: int = FETCH_EVERY, gradio_version: str | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.api = self.base + api_prefix
        self.every = every
        self.gradio_version = gradio_version
        self._credentials: dict[str, Any] = dict(headers=dict(headers or {}), cookies=dict(cookies or {}))
        self.traces = TraceStore()  # what was read (a trace read twice is joined once)
        self.enabled = True  # False: not a Gradio front (plain HTTP, OpenAI): nothing to read
        self.available: bool | None = None  # has the trace endpoint (None: not known yet)
        self.fetches_during_run = 0
        self.buffer_full = False
        self.batched = False  # the app has a batched function: Gradio traces a batch once
        self.refused = 0  # the status of the last read that brought no traces (0: no answer)
        self._sent_at_fetch = 0
        self._thread: threading.Thread | None = None
        self._http: httpx.Client | None = None  # one client for every read (see `read_traces`)

    def point_at(self, server: Mapping[str, Any]) -> None:
        """The target's discovery (run.json's `server`): a Gradio front's API prefix and release; a
        target without one (plain HTTP, OpenAI) has no traces to read."""
        gradio = server.get("gradio")
        if not isinstance(gradio, dict):
            self.enabled = False
            return
        self.api = self.base + str(gradio.get("api_prefix") or "")
        self.gradio_version = str(gradio.get("version") or "") or None
        config = server.get("config")
        deps = config.get("dependencies") if isinstance(config, dict) else None
        self.batched = any(isinstance(d, dict) and d.get("batch") for d in deps or ())

    def watching(self, hook: Hook | None) -> Hook:
        """The run's stop hook, reading the traces on the way (`watch`)."""
        def stop_when(stats: Any) -> str | None:
            self.watch(stats)
            return hook(stats) if hook is not None else None
        return stop_when

    def watch(self, stats: Progress) -> None:
        """Called on the run's ticks: read the traces once another `every` requests were sent."""
        if not self.enabled or self.available is False or stats.sent - self._sent_at_fetch < self.every:
            return
        if self._thread is not None and self._thread.is_alive():
            return
        last_n = min(BUFFER, 3 * (stats.sent - self._sent_at_fetch) + 1000)
        self._sent_at_fetch = stats.sent
        self.fetches_during_run += 1
        self._thread = threading.Thread(target=self._fetch, args=(last_n,), daemon=True,
                                        name="qbench-traces")
        self._thread.start()

    def _fetch(self, last_n: int) -> int | None:
        """Read and keep the last `last_n` entries; how many came (None: none, see `refused`)."""
        if self._http is None:
            self._http = control.client(TIMEOUT_S, **self._credentials)
        traces = read_traces(self._http, self.api, last_n)
        if isinstance(traces, int):
            self.refused = traces
            if traces == 404:
                self.available = False
            return None
        self.available = True
        self.buffer_full = self.buffer_full or len(traces) >= BUFFER
        self.traces.add(traces)
        return len(traces)

    def finish(self, records: Sequence[RequestRecord]) -> TraceReport:
        """Read what is left, join it onto `records` and say how it went; never raises."""
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            return self._join(records)
        finally:
            self.traces.close()
            if self._http is not None:
                self._http.close()
                self._http = None

    def _join(self, records: Sequence[RequestRecord]) -> TraceReport:
        want = expected(records)
        if want == 0 or not self.enabled:
            return TraceReport()
        if self.available is False:  # a read during the run found no trace endpoint
            return self._monitoring()
        sent = sum(1 for r in records if r.sent_at_s is not None)
        last_n = min(BUFFER, 3 * max(sent - self._sent_at_fetch, 0) + 1000)
        got_phases = 0
        for attempt in range(TRIES):
            got = self._fetch(last_n)
            if got is None and not self.traces:
                return self._refused() if self.refused in (401, 403) else self._monitoring()
            attach(records, self.traces)
            got_phases = matched(records)
            if got_phases >= want or got is None:
                break
            if got >= last_n:  # more may be stored than asked for
                last_n = BUFFER
            if attempt < TRIES - 1:
                time.sleep(SETTLE_S * (attempt + 1))
        return self._report(want, got_phases)

    def _report(self, want: int, got: int) -> TraceReport:
        note = None
        if got < want:
            note = f"{want - got} had no trace"
            if self.buffer_full:
                note += f" (the server keeps its last {BUFFER:,} entries: older ones were dropped)"
            elif self.batched and self.gradio_version:
                note += " (Gradio traces a batch of a batched function once, as its first event)"
        predictions = self.traces.predictions
        return TraceReport("traces", traces=predictions, expected=want, matched=got,
                           fetches_during_run=self.fetches_during_run, buffer_full=self.buffer_full,
                           note=note)

    def _refused(self) -> TraceReport:
        return TraceReport("none", note=f"server phases: the server refused its traces (HTTP {self.refused}: "
                                        "a login qbench could not pass on)")

    def _monitoring(self) -> TraceReport:
        """No trace endpoint: the per-function figures of /monitoring/summary, and how to get more."""
        try:
            with control.client(TIMEOUT_S, **self._credentials) as http:
                functions = read_monitoring(http, self.base)
        except httpx.HTTPError:
            functions = None
        hint = HINT
        if self.gradio_version and parse_version(self.gradio_version) < (6, 10):
            hint = f"{HINT.split(':')[0]}: Gradio {self.gradio_version} has none; 6.10 and later with " \
                   "GRADIO_PROFILING=1 time each request"
        if functions:
            return TraceReport("monitoring", functions=functions,
                               note=f"the server's process time per function (/monitoring/summary); {hint}")
        return TraceReport("none", note=hint)


def _key(trace: Mapping[str, Any]) -> str:
    """An entry's identity across reads: its event_id; for an upload without one (the reference
    server's), its tag, stamp and duration."""
    event = trace.get("event_id")
    if event:
        return str(event)
    return "|".join(str(trace.get(k)) for k in ("fn_name", "session_hash", "timestamp", "upload_ms"))
