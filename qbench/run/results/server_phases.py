"""The server's own phase timings: read from the server during and after a run, kept in a temporary file,
joined onto the records by event_id; never raises to the run. Design: docs/design/records-and-results.md."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import httpx
import numpy as np
import orjson

from qbench.run import control
from qbench.run.json_values import Readable, json_int, json_number
from qbench.run.protocols.base import upload_tag
from qbench.run.protocols.gradio_wire import parse_version
from qbench.run.records.schema import RequestRecord


class Progress(Protocol):
    """What the collector reads of the run's live figures (qbench.run.load.generator.LiveStats)."""

    sent: int


Hook = Callable[[Any], "str | None"]  # qbench.run.load.generator.StopHook, without importing the generator

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
    """One function's process time per Gradio's /monitoring/summary (the server's recent events)."""

    requests: int | None = None
    success_rate: float | None = None
    p50_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None


@dataclass
class TraceReport(Readable, tolerant=True):
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
    """Write the phases of `traces` onto their records (an upload by its tag); the number of records given
    phases. `traces` is read twice, never held."""
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
        value = json_number(trace.get(key))
        if value == 0.0 and key in UNTIMED_AT_ZERO:
            value = None  # the reference server writes 0 for a phase its workload does not have
        setattr(record, name, None if value is None else value / 1000.0)
    size = json_number(trace.get("batch_size"))
    record.server_batch_size = None if size is None else int(size)


def _uploads(record: RequestRecord, trace: Mapping[str, Any],
             entries: list[Mapping[str, Any]]) -> float | None:
    """Seconds of the uploads tagged for this record; None when none reported a duration."""
    own = json_number(trace.get("upload_ms"))  # a server that times the request's uploads itself
    start = json_number(trace.get("timestamp"))
    if not entries or start is None or record.sent_at_s is None or record.started_at_s is None:
        return None if own is None else own / 1000.0
    earliest = start - (record.started_at_s - record.sent_at_s) - UPLOAD_SLACK_S
    durations = [json_number(u.get("upload_ms")) for u in entries
                 if earliest <= (json_number(u.get("timestamp")) or 0.0) <= start + UPLOAD_SLACK_S]
    reported = [d for d in durations if d is not None]
    if not reported:
        return None if own is None else own / 1000.0
    return (sum(reported) + (own or 0.0)) / 1000.0


def expected(records: Iterable[RequestRecord]) -> int:
    """Requests a trace should exist for: given an event_id and seen to start on the server."""
    return sum(1 for r in records if _reached(r))


def matched(records: Iterable[RequestRecord]) -> int:
    """Of the `expected` requests, those that carry the server's phases."""
    return sum(1 for r in records if _reached(r) and r.server_total_s is not None)


def _reached(r: RequestRecord) -> bool:
    return r.event_id is not None and r.started_at_s is not None


class _OnRecords:
    """The join's interface over record objects (a run's records in memory)."""

    def __init__(self, records: Sequence[RequestRecord]) -> None:
        self.records = records

    def attach(self, traces: Iterable[Mapping[str, Any]]) -> int:
        return attach(self.records, traces)

    def expected(self) -> int:
        return expected(self.records)

    def matched(self) -> int:
        return matched(self.records)

    def sent(self) -> int:
        return sum(1 for r in self.records if r.sent_at_s is not None)


# ---------------------------------------------------------------- the join, column by column

PHASES: tuple[str, ...] = (*TRACE_FIELDS.values(), "server_batch_size", "server_upload_s")
CHUNK = 8_192  # traces parsed (~1 KB each as dicts), and event ids hashed, at a time


class PhaseJoin:
    """`attach` for a sealed records.parquet, without a record object: event ids hashed and sorted, each
    phase an array over the rows; `write` puts them into the file with the derived phases computed again."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.path = path
        file = pq.ParquetFile(path)
        self.n = file.metadata.num_rows
        keys = np.zeros(self.n, dtype=np.int64)
        has_event = np.zeros(self.n, dtype=bool)
        at = 0
        for batch in file.iter_batches(batch_size=CHUNK, columns=["event_id"]):
            ids = batch.column(0).to_pylist()
            hashed = (0 if e is None else hash(e) for e in ids)
            keys[at:at + len(ids)] = np.fromiter(hashed, np.int64, len(ids))
            has_event[at:at + len(ids)] = np.fromiter((e is not None for e in ids), bool, len(ids))
            at += len(ids)
        rows = np.flatnonzero(has_event)
        order = np.argsort(keys[rows], kind="stable")
        self.rows = rows[order]  # rows with an event id, by key
        self.sorted_keys = keys[self.rows]
        del keys
        from qbench.run.records.columns import Columns

        self.columns = Columns.read(path, keep=1)
        self.reached = has_event & ~np.isnan(self.columns.floats("started_at_s"))
        self.values: dict[str, np.ndarray] = {}
        for name in PHASES:  # a phase the file already has values for (the protocol's batch size)
            if _has_values(file, name):
                self.values[name] = self.columns.floats(name)
        self._row_times: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # for uploads only

    # the interface TraceCollector._join uses (as over records)

    def attach(self, traces: Iterable[Mapping[str, Any]]) -> int:
        """`attach` onto the rows: the rows given phases."""
        uploads: dict[str, dict[str, Mapping[str, Any]]] = {}
        for t in traces:
            if t.get("fn_name") == UPLOAD_FN:
                uploads.setdefault(str(t.get("session_hash") or ""), {})[_key(t)] = t
        hit = np.zeros(self.n, dtype=bool)
        chunk: list[Mapping[str, Any]] = []
        for t in traces:
            if t.get("fn_name") == UPLOAD_FN or t.get("event_id") is None:
                continue
            chunk.append(t)
            if len(chunk) >= CHUNK:
                self._apply(chunk, uploads, hit)
                chunk = []
        if chunk:
            self._apply(chunk, uploads, hit)
        return int(np.count_nonzero(hit))

    def expected(self) -> int:
        return int(np.count_nonzero(self.reached))

    def matched(self) -> int:
        total = self.values.get("server_total_s")
        return 0 if total is None else int(np.count_nonzero(self.reached & ~np.isnan(total)))

    def sent(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.columns.floats("sent_at_s"))))

    # the join

    def _apply(self, chunk: list[Mapping[str, Any]], uploads: dict[str, dict[str, Mapping[str, Any]]],
               hit: np.ndarray) -> None:
        """One chunk of prediction traces, in the order read: each onto the rows of its event id."""
        keys = np.fromiter((hash(str(t["event_id"])) for t in chunk), np.int64, len(chunk))
        lo = np.searchsorted(self.sorted_keys, keys, side="left")
        hi = np.searchsorted(self.sorted_keys, keys, side="right")
        counts = hi - lo
        if not counts.any():
            return
        which = np.repeat(np.arange(len(chunk)), counts)  # trace of each (row, trace) pair
        starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        rows = self.rows[starts + np.arange(which.size)]
        last = which.size - 1 - np.unique(rows[::-1], return_index=True)[1]  # a row's last trace wins
        rows, which = rows[last], which[last]
        hit[rows] = True
        for key, name in TRACE_FIELDS.items():
            values = _ms_column(chunk, key, zero_is_none=key in UNTIMED_AT_ZERO)
            self._set(name, rows, values[which])
        sizes = np.array([json_number(t.get("batch_size")) for t in chunk], dtype=np.float64)
        self._set("server_batch_size", rows, np.trunc(sizes[which]))
        own = _ms_column(chunk, "upload_ms", zero_is_none=False)
        upload = own[which]
        if uploads:
            upload = upload.copy()
            for i, (row, j) in enumerate(zip(rows.tolist(), which.tolist(), strict=True)):
                upload[i] = self._upload_s(row, chunk[j], uploads)
        self._set("server_upload_s", rows, upload)

    def _set(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        column = self.values.get(name)
        if column is None:
            if np.isnan(values).all():
                return  # nothing to write over a column of None
            column = self.values[name] = np.full(self.n, np.nan)
        column[rows] = values

    def _upload_s(self, row: int, trace: Mapping[str, Any],
                  uploads: dict[str, dict[str, Mapping[str, Any]]]) -> float:
        """`_uploads` for one row (its request id, send and process start read from the columns once)."""
        if self._row_times is None:
            cols = self.columns
            self._row_times = (cols.ints("request_id"), cols.floats("sent_at_s"), cols.floats("started_at_s"))
        ids, sent, started = self._row_times
        record = RequestRecord(request_id=int(ids[row]), user_id=0, session_id="", endpoint="",
                               warmup=False, intended_at_s=0.0, sent_at_s=_none(sent[row]),
                               started_at_s=_none(started[row]))
        entries = list(uploads.get(upload_tag(record.request_id), {}).values())
        value = _uploads(record, trace, entries)
        return np.nan if value is None else value

    def write(self) -> None:
        """The phases into records.parquet, a row group at a time (the derived ones computed again)."""
        import pyarrow.parquet as pq

        from qbench.run.records.spill import with_derived

        file = pq.ParquetFile(self.path)
        tmp = self.path.with_suffix(".parquet.tmp")
        at = 0
        with pq.ParquetWriter(tmp, file.schema_arrow) as writer:
            for g in range(file.metadata.num_row_groups):  # decoded a row group at a time, as sealed
                table = file.read_row_group(g)
                span = slice(at, at + table.num_rows)
                for name, column in self.values.items():
                    index = table.schema.get_field_index(name)
                    table = table.set_column(index, table.schema.field(index),
                                             _arrow(column[span], table.schema.field(index).type))
                writer.write_table(with_derived(table), row_group_size=max(table.num_rows, 1))
                at += table.num_rows
        del file
        tmp.replace(self.path)
        from qbench.run.records.columns import give_back_memory

        give_back_memory()  # what Arrow's pool kept of the row groups: the summary's and diagnosis's next


def _ms_column(chunk: list[Mapping[str, Any]], key: str, zero_is_none: bool) -> np.ndarray:
    """A trace key's milliseconds over a chunk as seconds (NaN: none; `zero_is_none`: 0 as none)."""
    values = np.array([json_number(t.get(key)) for t in chunk], dtype=np.float64)  # None -> nan
    if zero_is_none:
        values[values == 0.0] = np.nan
    return values / 1000.0


def _none(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _has_values(file: Any, name: str) -> bool:
    """Whether a column of the file holds any value (statistics where written, else a read)."""
    if name not in file.schema_arrow.names:
        return False
    index = file.schema_arrow.names.index(name)
    meta = file.metadata
    nulls = 0
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        if stats is None or not stats.has_null_count:
            return True  # unknown: read it
        nulls += int(stats.null_count)
    return nulls < int(meta.num_rows)


def _arrow(values: np.ndarray, kind: Any) -> Any:
    """Values (NaN: null) as an Arrow array of the column's type, from the array's own buffer."""
    import pyarrow as pa

    from qbench.run.records.spill import nullable

    if not pa.types.is_integer(kind):
        return nullable(values)
    valid = ~np.isnan(values)
    ints = np.ascontiguousarray(np.where(valid, values, 0), dtype=np.int64)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.int64(), ints.size, [bitmap, pa.py_buffer(ints)],
                                 null_count=int(ints.size - np.count_nonzero(valid)))


# ---------------------------------------------------------------- reading the server


def read_traces(http: httpx.Client, api_url: str, last_n: int) -> list[dict[str, Any]] | int:
    """The server's last `last_n` entries (the body read as a stream); else the refusing status (0: none)."""
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
        out[str(name)] = FunctionTimes(
            requests=json_int(f.get("total_requests")), success_rate=json_number(f.get("success_rate")),
            p50_s=json_number(p.get("50th")), p90_s=json_number(p.get("90th")),
            p99_s=json_number(p.get("99th")))
    return out


class TraceStore:
    """The traces a run read, a JSON line each in an anonymous temporary file; each entry written once."""

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
    """A run's traces: read every `every` requests sent (in a thread) and after it (`finish`), then joined."""

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
        self._finished = False  # finish() ran: no more reads

    def point_at(self, server: Mapping[str, Any]) -> None:
        """Aim at the target's discovery (run.json's `server`): a Gradio front's API prefix, release."""
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
        if (not self.enabled or self.available is False or self._finished
                or stats.sent - self._sent_at_fetch < self.every):
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

    def finish(self, records: Sequence[RequestRecord] | PhaseJoin) -> TraceReport:
        """Read what is left, join it onto `records` (or a PhaseJoin), say how it went; never raises."""
        self._finished = True  # a tick after this reads nothing (its client would never be closed)
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            return self._join(records if isinstance(records, PhaseJoin) else _OnRecords(records))
        finally:
            self.traces.close()
            if self._http is not None:
                self._http.close()
                self._http = None

    def _join(self, target: PhaseJoin | _OnRecords) -> TraceReport:
        want = target.expected()
        if want == 0 or not self.enabled:
            return TraceReport()
        if self.available is False:  # a read during the run found no trace endpoint
            return self._monitoring()
        last_n = min(BUFFER, 3 * max(target.sent() - self._sent_at_fetch, 0) + 1000)
        got_phases = 0
        for attempt in range(TRIES):
            got = self._fetch(last_n)
            if got is None and not self.traces:
                return self._refused() if self.refused in (401, 403) else self._monitoring()
            target.attach(self.traces)
            got_phases = target.matched()
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
    """An entry's identity across reads: its event_id, else (an upload) its tag, stamp and duration."""
    event = trace.get("event_id")
    if event:
        return str(event)
    return "|".join(str(trace.get(k)) for k in ("fn_name", "session_hash", "timestamp", "upload_ms"))
