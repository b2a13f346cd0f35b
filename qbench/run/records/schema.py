"""`RequestRecord`, the one flat contract between the load generator and every later stage, and its files
(records.jsonl, records.parquet). Design: docs/design/records-and-results.md."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Final, Literal, cast

import orjson

SCHEMA_VERSION: Final = 7
BATCH_ROWS = 65_536  # records per row group of records.parquet (one group up to this many)
READ_ROWS = 8_192  # records made from Parquet / Arrow rows at a time (their rows as dicts only so many)
#: Versions `read_parquet` reads: v1 lacks the token fields (they read as None / 0), v2 the journey
#: fields, v3 the server's phases, v4 the streamed-input figures, v5 the gap histogram `itl_hist`, v6
#: the streamed inputs' histograms and output-gap statistics (they read as None / 0).
READABLE_VERSIONS: Final = (1, 2, 3, 4, 5, 6, 7)

Outcome = Literal["ok", "error"]

#: Error kinds the load generator writes onto records (never raised per request).
ERROR_KINDS: Final = (
    "connect",        # could not open a connection (refused, DNS, reset before any response)
    "timeout",        # the per-request timeout fired (the request was cancelled on the server if possible)
    "http_4xx",       # the server refused the request with a 4xx (other than queue_full)
    "http_5xx",       # the server answered 5xx (other than queue_full)
    "queue_full",     # 503 "Queue is full" (Gradio join, or an HTTP 503 whose body says so)
    "stream_broken",  # the SSE stream ended or broke before the terminal message
    "server_error",   # the job ran and failed: process_completed success=false / unexpected_error
    "deadline",       # the run's duration ended before the request completed
    "interrupted",    # the run was stopped (Ctrl-C, SIGTERM) before the request completed or was sent
    "cancelled",      # the client cancelled the request on purpose (abandonment model)
    "client",         # a bug or unexpected exception inside the generator itself
    "generator_lost", # the generator worker (a Ray actor or its node) died before reporting the request
)


@dataclass(slots=True)
class RequestRecord:
    """One scheduled request: the plan, what happened, and what the server said."""

    request_id: int  # index of the request in the schedule (0-based, unique within a run)
    user_id: int  # closed-loop user / session-pool slot that sent it (open loop: session slot)
    session_id: str  # Gradio session_hash (or an HTTP connection label)
    endpoint: str  # api_name (gradio) or "METHOD /path" (http)
    warmup: bool  # True for requests in the warm-up window (excluded from summaries)
    intended_at_s: float  # intended send time, offset from run start (s)
    sent_at_s: float | None = None  # actual send time (s); None if never sent
    joined_at_s: float | None = None  # join acknowledged / HTTP response headers received (s)
    estimation_at_s: float | None = None  # first `estimation` message received (s)
    rank: int | None = None  # rank in the first estimation (0 = next to run)
    queue_size: int | None = None  # queue size in the first estimation
    rank_eta_s: float | None = None  # server's ETA in the first estimation (s from that message)
    started_at_s: float | None = None  # `process_starts` received (s)
    start_eta_s: float | None = None  # eta carried by process_starts (server's average job time, s)
    first_output_at_s: float | None = None  # first `process_generating` received (s)
    completed_at_s: float | None = None  # terminal message / end of body / given up (s)
    outputs: int = 0  # number of intermediate outputs (process_generating messages / stream chunks)
    outcome: Outcome = "error"  # "ok" only when the request completed successfully
    error_kind: str | None = None  # one of ERROR_KINDS, None when ok
    error_message: str | None = None  # human-readable detail (server message, exception text)
    http_status: int | None = None  # status of the join / HTTP response (None if no response)
    bytes_sent: int = 0  # request body bytes (uploads included)
    bytes_received: int = 0  # response bytes attributed to this request (SSE payload bytes for gradio)
    server_duration_s: float | None = None  # duration reported by the server (gradio output.duration)
    event_id: str | None = None  # Gradio event_id assigned by the server
    # ---- token streams (protocol: openai); None / 0 elsewhere (schema v2) ----
    input_tokens: int | None = None  # prompt tokens (usage.prompt_tokens), None when not reported
    output_tokens: int | None = None  # generated tokens: usage.completion_tokens, else content chunks
    tokens_from: str | None = None  # where output_tokens came from: "usage" (server) or "chunks" (counted)
    finish_reason: str | None = None  # the last choice's finish_reason ("stop", "length", ...)
    itl_count: int = 0  # inter-token gaps measured: content chunks - 1
    itl_mean_s: float | None = None  # mean gap between consecutive content chunks (s)
    itl_p50_s: float | None = None  # median gap (s), type-7 percentile over this request's gaps
    itl_p99_s: float | None = None  # 99th percentile gap (s)
    itl_max_s: float | None = None  # longest gap (s)
    itl_hist: str | None = None  # every gap as "bucket:count ..." (records.gap_histogram, 0.5%; schema v6)
    # ---- output files fetched (gradio file outputs; scenario fetch_outputs) (schema v3) ----
    result_at_s: float | None = None  # process_completed received, before the output files were fetched (s)
    download_bytes: int = 0  # bytes of the output files fetched (also counted in bytes_received)
    downloads: int = 0  # output files fetched
    # ---- journeys (scenario `journey:`, qbench.run.load.generator journeys); None elsewhere (schema v3) ----
    journey_id: int | None = None  # which journey (one user's session) sent it, unique within a run
    step: int | None = None  # the journey step (0-based index in the scenario's journey list)
    turn: int | None = None  # which call of the step (0-based; a step repeats `repeat` times)
    # ---- the server's own phase durations (qbench.run.results.server_phases: Gradio >= 6.10 with
    # GRADIO_PROFILING=1, the reference server); None where the server did not report (schema v4) ----
    server_queue_wait_s: float | None = None  # enqueued -> taken by a worker, on the server's clock (s)
    server_upload_s: float | None = None  # the request's file uploads, received and stored (s, summed)
    server_preprocess_s: float | None = None  # inputs decoded for the function (s; summed over a stream)
    server_fn_s: float | None = None  # the user's function (s; summed over a generator's iterations)
    server_postprocess_s: float | None = None  # outputs encoded and cached (s; summed)
    server_streaming_diff_s: float | None = None  # diffs between a stream's successive outputs (s)
    server_total_s: float | None = None  # processing after the queue: pre + fn + post + diff + the rest (s)
    server_prepare_s: float | None = None  # reference server: this request's own decode/prepare (s)
    server_batch_prepare_s: float | None = None  # reference server: its batch's collation (s)
    server_h2d_s: float | None = None  # reference server: its batch's host-to-device copy (s)
    server_forward_s: float | None = None  # reference server: its batch's forward pass (s, CUDA-timed on GPU)
    server_batch_size: int | None = None  # reference server: requests in the batch it ran in
    # ---- streamed inputs (endpoint `chunks`: a Gradio .stream() event, qbench.run.protocols.
    # gradio_stream); 0 / None elsewhere (schema v5) ----
    chunks_sent: int = 0  # input chunks sent into the event, the one that joined the queue included
    chunks_answered: int = 0  # chunks an output answered (one sent while the function ran may be replaced)
    chunk_latency_count: int = 0  # chunk latencies measured: answered chunks but the join's
    chunk_latency_mean_s: float | None = None  # chunk sent -> the output that answered it (s), mean
    chunk_latency_p50_s: float | None = None  # median of those (s), type-7 percentile over this event's
    chunk_latency_p95_s: float | None = None  # 95th percentile (s)
    chunk_latency_max_s: float | None = None  # slowest answered chunk (s)
    output_gap_p95_s: float | None = None  # 95th percentile gap between consecutive outputs (s)
    chunk_latency_hist: str | None = None  # every chunk latency as "bucket:count ..." (gap_histogram; v7)
    output_gap_count: int = 0  # gaps between consecutive outputs: outputs - 1 (schema v7)
    output_gap_mean_s: float | None = None  # mean gap between consecutive outputs (s; v7)
    output_gap_max_s: float | None = None  # longest gap between consecutive outputs (s; v7)
    output_gap_hist: str | None = None  # every output gap as "bucket:count ..." (gap_histogram; v7)

    # ---- derived phases (seconds); None when a phase is missing ----

    @property
    def latency_s(self) -> float | None:
        """End-to-end latency from the INTENDED send time (the open-loop headline)."""
        return _diff(self.completed_at_s, self.intended_at_s)

    @property
    def latency_from_send_s(self) -> float | None:
        """End-to-end latency from the ACTUAL send time (what a closed-loop tool would report)."""
        return _diff(self.completed_at_s, self.sent_at_s)

    @property
    def send_lag_s(self) -> float | None:
        """Actual - intended send time; large values flag a saturated client."""
        return _diff(self.sent_at_s, self.intended_at_s)

    @property
    def queue_wait_s(self) -> float | None:
        """Time waiting in the server's queue: send -> process_starts."""
        return _diff(self.started_at_s, self.sent_at_s)

    @property
    def service_s(self) -> float | None:
        """process_starts -> its result, as the client saw it (before any output file was fetched)."""
        return _diff(self.result_at_s if self.result_at_s is not None else self.completed_at_s,
                     self.started_at_s)

    @property
    def download_s(self) -> float | None:
        """Time to fetch the output files after the result arrived (None when none were fetched)."""
        return _diff(self.completed_at_s, self.result_at_s)

    @property
    def ttfo_s(self) -> float | None:
        """Time to first output from the intended send time (streaming functions)."""
        return _diff(self.first_output_at_s, self.intended_at_s)

    @property
    def ttft_s(self) -> float | None:
        """Time to first token from the ACTUAL send (what LLM benchmarks quote; ttfo_s: intended)."""
        return _diff(self.first_output_at_s, self.sent_at_s)

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (completion - first token) / (output_tokens - 1)."""
        span = _diff(self.completed_at_s, self.first_output_at_s)
        if span is None or self.output_tokens is None or self.output_tokens < 2:
            return None
        return span / (self.output_tokens - 1)

    @property
    def output_tps(self) -> float | None:
        """Output tokens per second of this request, from the actual send to the end of the stream."""
        span = self.latency_from_send_s
        if span is None or span <= 0 or not self.output_tokens:
            return None
        return self.output_tokens / span

    @property
    def eta_error_s(self) -> float | None:
        """First estimation's predicted result time minus the real one (positive = server was pessimistic)."""
        if self.rank_eta_s is None or self.estimation_at_s is None or self.completed_at_s is None:
            return None
        return self.estimation_at_s + self.rank_eta_s - self.completed_at_s

    @property
    def client_only_s(self) -> float | None:
        """Actual send -> result, less the server's queue wait, uploads and processing; None without them."""
        span = _diff(self.result_at_s if self.result_at_s is not None else self.completed_at_s,
                     self.sent_at_s)
        if span is None or self.server_total_s is None:
            return None
        return span - self.server_total_s - (self.server_queue_wait_s or 0.0) - (self.server_upload_s or 0.0)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


DERIVED: Final = (
    "latency_s",
    "latency_from_send_s",
    "send_lag_s",
    "queue_wait_s",
    "service_s",
    "ttfo_s",
    "eta_error_s",
    "ttft_s",
    "tpot_s",
    "output_tps",
    "download_s",
    "client_only_s",
)

FIELD_NAMES: Final = tuple(f.name for f in fields(RequestRecord))


def _diff(end: float | None, start: float | None) -> float | None:
    if end is None or start is None:
        return None
    return end - start


def to_row(record: RequestRecord, derived: bool = False) -> dict[str, Any]:
    """The record as a flat dict (stored fields; derived phases too when asked)."""
    # Every field is a scalar: a shallow dict is what asdict() returns, ~10x cheaper (no deepcopy).
    row = {name: getattr(record, name) for name in FIELD_NAMES}
    if derived:
        for name in DERIVED:
            row[name] = getattr(record, name)
    return row


def from_row(row: dict[str, Any]) -> RequestRecord:
    """Build a record from a stored row, ignoring derived and unknown columns."""
    values = {}
    for name in FIELD_NAMES:
        if name in row:
            value = row[name]
            if isinstance(value, float) and math.isnan(value):
                value = None
            values[name] = value
    return RequestRecord(**values)


# ---------------------------------------------------------------- JSON Lines (written while running)


class JsonlWriter:
    """Appends records to a JSONL file as they finish, flushed so a killed run loses nothing written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None

    def __enter__(self) -> JsonlWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("ab")
        return self

    def write(self, records: Iterable[RequestRecord]) -> bytes:
        """Append the records; returns the lines written."""
        return self.write_lines(b"".join(orjson.dumps(r) + b"\n" for r in records))

    def write_rows(self, rows: Iterable[dict[str, Any]]) -> bytes:
        """Rows of every stored field in FIELD_NAMES' order (an Arrow batch's), as `write` writes records."""
        return self.write_lines(b"".join(orjson.dumps(row) + b"\n" for row in rows))

    def write_lines(self, data: bytes) -> bytes:
        assert self._fh is not None, "JsonlWriter used outside 'with'"
        self._fh.write(data)
        self._fh.flush()
        return data

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_jsonl(path: Path, start: int = 0) -> list[RequestRecord]:
    """Records of a JSONL file from byte `start`; a truncated last line (a killed writer) is skipped."""
    records: list[RequestRecord] = []
    shared: dict[str, str] = {}
    with path.open("rb") as fh:
        fh.seek(start)
        for line in fh:
            record = _jsonl_record(line)
            if record is not None:
                _share_labels(record, shared)
                records.append(record)
    return records


def _share_labels(record: RequestRecord, shared: dict[str, str]) -> None:
    """One string object per distinct endpoint, session, outcome and error kind across the records read."""
    record.endpoint = shared.setdefault(record.endpoint, record.endpoint)
    record.session_id = shared.setdefault(record.session_id, record.session_id)
    record.outcome = cast(Outcome, shared.setdefault(record.outcome, record.outcome))
    if record.error_kind is not None:
        record.error_kind = shared.setdefault(record.error_kind, record.error_kind)


def _jsonl_record(line: bytes) -> RequestRecord | None:
    """One line as JsonlWriter wrote it as a record (NaN read by Python's json); None: blank or cut."""
    if not line.strip():
        return None
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return from_row(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    if isinstance(row, dict) and list(row) == _FIELD_LIST:
        return RequestRecord(*row.values())
    return from_row(row)  # another schema version's fields, or another writer's order


_FIELD_LIST: Final = list(FIELD_NAMES)


# ---------------------------------------------------------------- Parquet (the file to re-analyse)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {
        "request_id": pa.int64(),
        "user_id": pa.int64(),
        "session_id": pa.string(),
        "endpoint": pa.string(),
        "warmup": pa.bool_(),
        "rank": pa.int64(),
        "queue_size": pa.int64(),
        "outputs": pa.int64(),
        "outcome": pa.string(),
        "error_kind": pa.string(),
        "error_message": pa.string(),
        "http_status": pa.int64(),
        "bytes_sent": pa.int64(),
        "bytes_received": pa.int64(),
        "event_id": pa.string(),
        "input_tokens": pa.int64(),
        "output_tokens": pa.int64(),
        "tokens_from": pa.string(),
        "finish_reason": pa.string(),
        "itl_count": pa.int64(),
        "itl_hist": pa.string(),
        "download_bytes": pa.int64(),
        "downloads": pa.int64(),
        "journey_id": pa.int64(),
        "step": pa.int64(),
        "turn": pa.int64(),
        "server_batch_size": pa.int64(),
        "chunks_sent": pa.int64(),
        "chunks_answered": pa.int64(),
        "chunk_latency_count": pa.int64(),
        "chunk_latency_hist": pa.string(),
        "output_gap_count": pa.int64(),
        "output_gap_hist": pa.string(),
    }
    cols = [pa.field(name, types.get(name, pa.float64())) for name in FIELD_NAMES]
    cols += [pa.field(name, pa.float64()) for name in DERIVED]
    return pa.schema(cols, metadata={b"qbench_schema_version": str(SCHEMA_VERSION).encode()})


def records_table(records: Sequence[RequestRecord]) -> Any:
    """Records as a pyarrow Table: stored fields plus derived phases, with the versioned schema."""
    import pyarrow as pa

    schema = _arrow_schema()
    # One column at a time: besides the Arrow arrays, one column's Python values at once (not every
    # column's: ~0.9 KB a record of lists and derived floats at 65,536 records a batch).
    arrays = [pa.array(list(map(attrgetter(column.name), records)), type=column.type) for column in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(records: Sequence[RequestRecord], path: Path) -> None:
    """Write records (stored fields plus derived phases) to Parquet, `BATCH_ROWS` a row group."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    with pq.ParquetWriter(tmp, _arrow_schema()) as writer:
        for start in range(0, max(len(records), 1), BATCH_ROWS):
            writer.write_table(records_table(records[start:start + BATCH_ROWS]))
    tmp.replace(path)


def records_to_ipc(records: Sequence[RequestRecord]) -> bytes:
    """A batch of records as an Arrow IPC stream (how Ray workers stream records to the driver)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    table = records_table(records)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def records_from_ipc(data: bytes) -> list[RequestRecord]:
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    shared: dict[str, str] = {}
    return [record for batch in table.to_batches(READ_ROWS) for record in _batch_records(batch, shared)]


def _batch_records(batch: Any, shared: dict[str, str]) -> list[RequestRecord]:
    """A pyarrow RecordBatch's rows as records (stored fields; an older version's missing ones: defaults)."""
    names = [name for name in FIELD_NAMES if name in batch.schema.names]
    columns = [batch.column(name).to_pylist() for name in names]
    records = [from_row(dict(zip(names, values, strict=True))) for values in zip(*columns, strict=True)]
    for record in records:
        _share_labels(record, shared)
    return records


class RecordsFormatError(ValueError):
    """A records file that this version of qbench cannot read."""


def read_parquet(path: Path) -> list[RequestRecord]:
    """Every record of a records.parquet, read `READ_ROWS` rows at a time."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    meta = file.schema_arrow.metadata or {}
    version = int(meta.get(b"qbench_schema_version", b"0"))
    if version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS)
        raise RecordsFormatError(
            f"{path}: records schema version {version}, this qbench reads versions {readable}"
        )
    columns = [name for name in FIELD_NAMES if name in file.schema_arrow.names]
    shared: dict[str, str] = {}
    batches = file.iter_batches(READ_ROWS, columns=columns)
    return [record for batch in batches for record in _batch_records(batch, shared)]


def read_records(path: Path) -> list[RequestRecord]:
    """Read records from a run directory or a file (.parquet preferred, .jsonl as the fallback)."""
    if path.is_dir():
        parquet, jsonl = path / "records.parquet", path / "records.jsonl"
        if parquet.exists():
            return read_parquet(parquet)
        if jsonl.exists():
            return read_jsonl(jsonl)
        raise FileNotFoundError(f"{path}: no records.parquet or records.jsonl")
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    return read_parquet(path)


def iter_measured(records: Iterable[RequestRecord]) -> Iterator[RequestRecord]:
    """Records outside the warm-up window: what summaries are computed from."""
    return (r for r in records if not r.warmup)
