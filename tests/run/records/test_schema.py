"""The record files: JSONL written while running and Parquet at the end round-trip every field."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.run.records.schema import (
    SCHEMA_VERSION,
    JsonlWriter,
    RecordsFormatError,
    RequestRecord,
    read_jsonl,
    read_parquet,
    read_records,
    records_from_ipc,
    records_table,
    records_to_ipc,
    write_parquet,
)


def sample() -> list[RequestRecord]:
    ok = RequestRecord(0, 0, "s0", "/predict", False, 0.5, sent_at_s=0.501, joined_at_s=0.51, rank=2,
                       queue_size=3, rank_eta_s=1.5, started_at_s=0.9, completed_at_s=1.7, outcome="ok",
                       http_status=200, bytes_sent=120, bytes_received=900, server_duration_s=0.79,
                       event_id="e0")
    failed = RequestRecord(1, 1, "s1", "/predict", True, 0.0, sent_at_s=0.01, completed_at_s=0.02,
                           error_kind="queue_full", error_message="Queue is full.", http_status=503)
    unsent = RequestRecord(2, 0, "", "/predict", False, 9.0, error_kind="interrupted")
    return [ok, failed, unsent]


def test_jsonl_round_trip_and_a_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "run" / "records.jsonl"
    records = sample()
    with JsonlWriter(path) as writer:  # creates the folder, appends, flushes per call
        writer.write(records[:2])
        writer.write(records[2:])
    assert read_jsonl(path) == records
    with path.open("ab") as fh:
        fh.write(b'{"request_id": 3, "user_')  # the process died mid-write
    assert read_jsonl(path) == records


def test_jsonl_read_from_an_offset_and_rows_of_other_writers(tmp_path: Path) -> None:
    """A run reads back only what it appended; a row with an unknown column, or NaN (Python's json),
    still reads as `from_row` would (NaN as None)."""
    path = tmp_path / "records.jsonl"
    records = sample()
    with JsonlWriter(path) as writer:
        writer.write(records[:1])
    start = path.stat().st_size
    with JsonlWriter(path) as writer:
        writer.write(records[1:])
    assert read_jsonl(path, start) == records[1:]
    with path.open("ab") as fh:
        fh.write(b'{"request_id": 3, "user_id": 0, "session_id": "", "endpoint": "e", "warmup": false, '
                 b'"intended_at_s": 1.0, "rank_eta_s": NaN, "from_a_later_version": 1}\n')
    extra = read_jsonl(path, start)[-1]
    assert extra.request_id == 3 and extra.rank_eta_s is None


def test_parquet_round_trip_keeps_none_and_adds_derived_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    records = sample()
    write_parquet(records, tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == records
    assert read_records(tmp_path) == records  # a run folder prefers the Parquet file
    table = pq.read_table(tmp_path / "records.parquet")
    assert table.column("latency_s").to_pylist()[0] == pytest.approx(1.2)
    assert table.column("queue_wait_s").to_pylist()[2] is None


def test_parquet_is_written_a_batch_at_a_time_and_reads_back_whole(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from qbench.run.records import schema as module

    monkeypatch.setattr(module, "BATCH_ROWS", 2)
    path = tmp_path / "records.parquet"
    write_parquet(sample(), path)
    assert pq.ParquetFile(path).metadata.num_row_groups == 2 and read_parquet(path) == sample()
    write_parquet([], path)
    assert read_parquet(path) == []


def test_parquet_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"request_id": [0]}).replace_schema_metadata(
        {b"qbench_schema_version": str(SCHEMA_VERSION + 1).encode()}
    )
    pq.write_table(table, tmp_path / "records.parquet")
    with pytest.raises(RecordsFormatError, match="schema version"):
        read_parquet(tmp_path / "records.parquet")


def test_parquet_v1_reads_with_token_fields_empty(tmp_path: Path) -> None:
    """A v1 file (before the token fields) still reads: the new fields take their defaults."""
    import pyarrow.parquet as pq

    records = sample()
    table = records_table(records)
    v1 = table.drop_columns(
        ["input_tokens", "output_tokens", "tokens_from", "finish_reason", "itl_count", "itl_mean_s",
         "itl_p50_s", "itl_p99_s", "itl_max_s", "ttft_s", "tpot_s", "output_tps"]
    ).replace_schema_metadata({b"qbench_schema_version": b"1"})
    pq.write_table(v1, tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == records


def test_token_fields_round_trip_and_derive(tmp_path: Path) -> None:
    r = RequestRecord(0, 0, "s", "chat", False, intended_at_s=1.0, sent_at_s=1.5, first_output_at_s=2.0,
                      completed_at_s=4.0, outcome="ok", input_tokens=7, output_tokens=5, tokens_from="usage",
                      finish_reason="length", itl_count=4, itl_mean_s=0.5, itl_p50_s=0.5, itl_p99_s=0.6,
                      itl_max_s=0.6, itl_hist="-70:3 -51:1")
    assert r.ttft_s == 0.5 and r.ttfo_s == 1.0
    assert r.tpot_s == pytest.approx(0.5) and r.output_tps == pytest.approx(5 / 2.5)
    write_parquet([r], tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == [r]
    assert read_jsonl_roundtrip(r, tmp_path) == [r] and records_from_ipc(records_to_ipc([r])) == [r]


def test_parquet_v5_reads_without_the_gap_histogram(tmp_path: Path) -> None:
    """A v5 file (before `itl_hist`) still reads: the histogram reads as None (the summary then pools
    the per-request statistics)."""
    import pyarrow.parquet as pq

    records = sample()
    v5 = records_table(records).drop_columns(["itl_hist"]).replace_schema_metadata(
        {b"qbench_schema_version": b"5"})
    pq.write_table(v5, tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == records


def test_arrow_ipc_batches_round_trip_exactly() -> None:
    """How Ray workers stream records to the driver: every field back as it was, None included."""
    assert records_from_ipc(records_to_ipc(sample())) == sample()


def test_parquet_v2_reads_with_journey_and_download_fields_empty(tmp_path: Path) -> None:
    """A v2 file (before journeys and fetched outputs) still reads: the new fields take their defaults."""
    import pyarrow.parquet as pq

    records = sample()
    v2 = records_table(records).drop_columns(
        ["result_at_s", "download_bytes", "downloads", "journey_id", "step", "turn", "download_s"]
    ).replace_schema_metadata({b"qbench_schema_version": b"2"})
    pq.write_table(v2, tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == records


def test_journey_and_download_fields_round_trip(tmp_path: Path) -> None:
    r = RequestRecord(0, 0, "s", "chat", False, intended_at_s=1.0, sent_at_s=1.0, started_at_s=1.2,
                      result_at_s=2.0, completed_at_s=2.5, outcome="ok", download_bytes=4096, downloads=1,
                      journey_id=3, step=1, turn=2)
    assert r.service_s == pytest.approx(0.8) and r.download_s == pytest.approx(0.5) and r.latency_s == 1.5
    write_parquet([r], tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == [r]
    assert read_jsonl_roundtrip(r, tmp_path) == [r]


def read_jsonl_roundtrip(record: RequestRecord, tmp_path: Path) -> list[RequestRecord]:
    from qbench.run.records.schema import JsonlWriter, read_jsonl

    with JsonlWriter(tmp_path / "records.jsonl") as writer:
        writer.write([record])
    return read_jsonl(tmp_path / "records.jsonl")


STREAM_FIELDS = ["chunks_sent", "chunks_answered", "chunk_latency_count", "chunk_latency_mean_s",
                 "chunk_latency_p50_s", "chunk_latency_p95_s", "chunk_latency_max_s", "output_gap_p95_s"]


def test_parquet_v4_reads_with_the_streamed_input_fields_empty(tmp_path: Path) -> None:
    """A v4 file (before streamed inputs) still reads: the new fields take their defaults."""
    import pyarrow.parquet as pq

    records = sample()
    v4 = records_table(records).drop_columns(STREAM_FIELDS).replace_schema_metadata(
        {b"qbench_schema_version": b"4"})
    pq.write_table(v4, tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == records


def test_streamed_input_fields_round_trip(tmp_path: Path) -> None:
    r = RequestRecord(0, 0, "s", "level", False, intended_at_s=1.0, sent_at_s=1.0, completed_at_s=6.0,
                      outcome="ok", chunks_sent=10, chunks_answered=9, chunk_latency_count=8,
                      chunk_latency_mean_s=0.05, chunk_latency_p50_s=0.04, chunk_latency_p95_s=0.09,
                      chunk_latency_max_s=0.1, output_gap_p95_s=0.6)
    write_parquet([r], tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == [r]
    assert read_jsonl_roundtrip(r, tmp_path) == [r]


def many(n: int) -> list[RequestRecord]:
    """`n` records of a busy run: every phase, distinct session and event ids."""
    return [RequestRecord(i, i % 64, f"session{i % 64}", "/predict", False, i * 0.001,
                          sent_at_s=i * 0.001 + 1e-4, joined_at_s=i * 0.001 + 2e-3,
                          estimation_at_s=i * 0.001 + 3e-3, rank=i % 7,
                          queue_size=i % 9, rank_eta_s=0.5, started_at_s=i * 0.001 + 0.01,
                          first_output_at_s=i * 0.001 + 0.02, completed_at_s=i * 0.001 + 0.1, outputs=12,
                          outcome="ok", http_status=200, bytes_sent=300, bytes_received=4000,
                          server_duration_s=0.08, event_id=f"{i:032x}") for i in range(n)]


def test_parquet_reads_back_a_batch_of_rows_at_a_time(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a big run's records.parquet holds the records, not every row as a dict besides them
    (~2.4 KB more a record: 9 GB at 3.6 M): the Python heap's peak while reading stays near what the
    records hold in the end (bench/end_of_run.py measures the whole: bench/RESULTS.md)."""
    import tracemalloc

    from qbench.run.records import schema as module

    monkeypatch.setattr(module, "READ_ROWS", 500, raising=False)  # (raising: the old code had none)
    records = many(6000)
    write_parquet(records, tmp_path / "records.parquet")
    tracemalloc.start()
    try:
        back = read_parquet(tmp_path / "records.parquet")
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert back == records
    assert peak < 1.5 * held, (peak, held)
    assert records_from_ipc(records_to_ipc(records)) == records


def old_records_table(records: list[RequestRecord]) -> object:
    """records_table as it was until 2026-11-27 (a dict of every column's values, row by row): the
    reference the Parquet file must still equal."""
    import pyarrow as pa

    from qbench.run.records.schema import _arrow_schema, to_row

    schema = _arrow_schema()
    columns: dict[str, list[object]] = {name: [] for name in schema.names}
    for record in records:
        row = to_row(record, derived=True)
        for name in schema.names:
            columns[name].append(row[name])
    return pa.Table.from_pydict(columns, schema=schema)


def test_parquet_file_is_the_one_written_before_column_by_column(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Same rows, columns, types, schema metadata and row groups as the row-by-row conversion wrote."""
    import pyarrow.parquet as pq

    from qbench.run.records import schema as module

    monkeypatch.setattr(module, "BATCH_ROWS", 1000)
    token = RequestRecord(7, 0, "s", "chat", False, intended_at_s=1.0, sent_at_s=1.5, first_output_at_s=2.0,
                          completed_at_s=4.0, outcome="ok", input_tokens=7, output_tokens=5,
                          tokens_from="usage", itl_count=4, itl_mean_s=0.5, itl_hist="-70:3 -51:1",
                          journey_id=2, step=1, turn=0)
    records = [*sample(), token, *many(2500)]
    path = tmp_path / "records.parquet"
    write_parquet(records, path)
    written = pq.read_table(path)
    assert written.equals(old_records_table(records), check_metadata=True)
    assert written.schema.metadata == {b"qbench_schema_version": str(SCHEMA_VERSION).encode()}
    assert pq.ParquetFile(path).metadata.num_row_groups == 3 and read_parquet(path) == records


def test_parquet_is_written_without_every_column_in_python_at_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Converting a batch of records holds one column's Python values at a time, not all 72 (~0.9 KB a
    record: 55 MiB for a row group of 65,536)."""
    import tracemalloc

    from qbench.run.records import schema as module

    records = many(6000)
    monkeypatch.setattr(module, "BATCH_ROWS", len(records))
    write_parquet(records[:10], tmp_path / "warm.parquet")  # pyarrow imported before measuring
    tracemalloc.start()
    try:
        write_parquet(records, tmp_path / "records.parquet")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / len(records) < 300, peak / len(records)  # was ~850 B


def test_jsonl_read_back_shares_one_string_per_label(tmp_path: Path) -> None:
    """A run's records read back (JSONL, Parquet, Arrow) hold one string object per endpoint, session,
    outcome and error kind (not each row's own copy: ~190 B a record, 17% of the records' memory)."""
    records = [*many(130), *sample(), *sample()]
    with JsonlWriter(tmp_path / "records.jsonl") as writer:
        writer.write(records)
    back = read_jsonl(tmp_path / "records.jsonl")
    assert back == records
    assert back[0].endpoint is back[129].endpoint is back[130].endpoint
    assert back[0].outcome is back[129].outcome
    assert back[0].session_id is back[64].session_id is back[128].session_id  # "session0"
    assert back[131].error_kind is back[134].error_kind == "queue_full"
    assert back[131].outcome is back[132].outcome == "error"
    write_parquet(records, tmp_path / "records.parquet")
    for back in (read_parquet(tmp_path / "records.parquet"), records_from_ipc(records_to_ipc(records))):
        assert back == records and back[0].endpoint is back[130].endpoint
        assert back[0].session_id is back[64].session_id
