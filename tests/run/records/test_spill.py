"""qbench.run.records.spill: records spilled as they finish, sealed into the records.parquet that
`write_parquet` writes from the records sorted as the executors sort them, row group for row group."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from qbench.run.load.executor import PartInfo, PartResult, merge, plan_order
from qbench.run.records import spill as record_spill
from qbench.run.records.schema import RequestRecord, read_records, write_parquet
from qbench.run.records.spill import RecordSpill, RowOrder, seal
from qbench.run.results.summary import GeneratorStats, WorkerStats
from qbench.run.scenario.schedule import OpenPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from end_of_run import chunk_records  # noqa: E402  (the benchmark's realistic Gradio records)


def varied(n: int, seed: int) -> list[RequestRecord]:
    """Realistic records in the order they finished, with what else a run holds: token streams, server
    phases, journeys, streamed inputs, output files, lost requests, secrets in error messages."""
    rows, _ = chunk_records(np.random.default_rng(seed), 0, n, 0.0, 800.0, 1.0, 0.4)
    pick = random.Random(seed)
    for r in rows:
        k = pick.randrange(8)
        if k == 0:
            r.output_tokens, r.input_tokens, r.tokens_from = pick.randrange(40), 12, "usage"
            r.finish_reason = "stop"
            r.itl_count, r.itl_mean_s, r.itl_hist = 5, 0.01, "12:3 14:1"
        elif k == 1:
            r.server_total_s, r.server_queue_wait_s, r.server_fn_s, r.server_batch_size = 0.05, 0.01, 0.04, 4
        elif k == 2:
            r.journey_id, r.step, r.turn = pick.randrange(50), pick.randrange(3), 0
        elif k == 3:
            r.chunks_sent, r.chunks_answered, r.chunk_latency_mean_s = 9, 8, 0.02
        elif k == 4:
            r.result_at_s, r.downloads, r.download_bytes = r.completed_at_s, 1, 4096
        elif k == 5:
            r.error_kind, r.error_message, r.outcome = "connect", "http://user:hunter2@host refused", "error"
    return rows


def _spilled(tmp: Path, parts: list[list[RequestRecord]], sizes: tuple[int, ...] = (1, 7, 300)) -> Path:
    """Each part's records through its own spill, handed over in batches of varying sizes."""
    for index, records in enumerate(parts):
        with RecordSpill(tmp, str(index)) as spill:
            start, k = 0, 0
            while start < len(records):
                step = sizes[k % len(sizes)]
                spill.write(records[start:start + step])
                start, k = start + step, k + 1
    return tmp


def _same_file(got: Path, want: Path) -> None:
    a, b = pq.ParquetFile(got), pq.ParquetFile(want)
    assert a.schema_arrow.equals(b.schema_arrow, check_metadata=True)
    assert a.metadata.num_row_groups == b.metadata.num_row_groups
    sizes = [a.metadata.row_group(g).num_rows for g in range(a.metadata.num_row_groups)]
    assert sizes == [b.metadata.row_group(g).num_rows for g in range(b.metadata.num_row_groups)]
    assert a.read().equals(b.read())


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many spill and output row groups from a few thousand records."""
    monkeypatch.setattr(record_spill, "SPILL_ROWS", 500)
    monkeypatch.setattr(record_spill, "BATCH_ROWS", 1_000)
    monkeypatch.setattr("qbench.run.records.schema.BATCH_ROWS", 1_000)
    monkeypatch.setattr(record_spill, "CACHE_GROUPS", 3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_part_is_sealed_in_the_plans_order_as_write_parquet_wrote_it(seed: int, tmp_path: Path) -> None:
    records = varied(3_456, seed)
    stragglers = records[:40]  # requests that finished long after the others (timeouts, a stop)
    records = records[40:] + stragglers
    plan = OpenPlan(offsets=np.sort(np.array([r.intended_at_s for r in records])))
    seal(_spilled(tmp_path / "new", [records]), RowOrder())
    old = sorted(records, key=plan_order(plan))
    write_parquet(old, tmp_path / "old" / "records.parquet")
    _same_file(tmp_path / "new" / "records.parquet", tmp_path / "old" / "records.parquet")
    assert not list((tmp_path / "new").glob(".records-spill-*"))  # the spill is gone


def test_a_replayed_plan_keeps_its_ids_time_order(tmp_path: Path) -> None:
    records = varied(2_100, 4)
    ids = np.array([r.request_id for r in records])
    shuffled = ids.copy()
    np.random.default_rng(0).shuffle(shuffled)
    plan = OpenPlan(offsets=np.arange(len(ids), dtype=float), ids=shuffled[:-5])  # 5 ids not in the plan
    seal(_spilled(tmp_path / "new", [records]), RowOrder(plan_ids=plan.ids))
    write_parquet(sorted(records, key=plan_order(plan)), tmp_path / "old" / "records.parquet")
    _same_file(tmp_path / "new" / "records.parquet", tmp_path / "old" / "records.parquet")


def _results(parts: int) -> list[PartResult]:
    stats = GeneratorStats()
    return [PartResult(k, [], stats, PartInfo(), WorkerStats(index=k, where="here", requests=0))
            for k in range(parts)]


@pytest.mark.parametrize("open_loop", [True, False])
def test_several_parts_are_merged_as_merge_merged_them(open_loop: bool, tmp_path: Path) -> None:
    records = varied(3_000, 5)
    parts = [records[k::3] for k in range(3)]
    if not open_loop:  # each part numbers its own requests
        for part in parts:
            for i, r in enumerate(part):
                r.request_id = i
    order = RowOrder(renumber=not open_loop)
    seal(_spilled(tmp_path / "new", parts, sizes=(13, 250)), order)
    old = merge(_results(3), open_loop, "processes", [r for part in parts for r in part]).records
    write_parquet(old, tmp_path / "old" / "records.parquet")
    _same_file(tmp_path / "new" / "records.parquet", tmp_path / "old" / "records.parquet")


def test_arrival_order_kept_and_error_messages_masked(tmp_path: Path) -> None:
    records = varied(1_500, 6)
    seal(_spilled(tmp_path, [records]), RowOrder(sort=False), mask=lambda s: s.replace("hunter2", "***"))
    back = read_records(tmp_path)
    assert [r.request_id for r in back] == [r.request_id for r in records]
    messages = {r.error_message for r in back if r.error_message}
    assert messages and not any("hunter2" in m for m in messages)
    assert "http://user:***@host refused" in messages


def test_no_records_is_an_empty_file_like_write_parquets(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    with RecordSpill(tmp_path / "new") as spill:
        spill.write([])
    assert seal(tmp_path / "new", RowOrder()) == 0
    write_parquet([], tmp_path / "old" / "records.parquet")
    _same_file(tmp_path / "new" / "records.parquet", tmp_path / "old" / "records.parquet")


def test_a_spill_writes_a_row_group_once_spill_rows_wait_and_raises_what_its_thread_raised(
    tmp_path: Path,
) -> None:
    records = varied(1_200, 8)
    spill = RecordSpill(tmp_path)
    spill.write(records[:400])
    assert not spill.path.exists()  # fewer than SPILL_ROWS wait, as the lines records.jsonl got
    spill.write(records[400:800])  # a row group, written by the spill's thread
    spill.write(records[800:])
    spill.close()
    file = pq.ParquetFile(spill.path)
    assert [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)] == [800, 400]
    bad = RecordSpill(tmp_path, "bad")
    bad.write_lines(b"not json\n", 1)
    with pytest.raises(Exception, match="JSON"):
        bad.close()


def test_a_spill_whose_thread_falls_behind_waits_for_it_instead_of_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records handed over faster than the thread writes them: at most MAX_WAITING_GROUPS row groups wait
    in memory; the next hand-over waits for the oldest (a generator that outruns its spill is slowed,
    and its loop lag says so, rather than the run's memory growing without bound)."""
    import threading

    gate = threading.Event()
    written: list[int] = []
    real = RecordSpill._write_group

    def slow(self: RecordSpill, items: list[object]) -> None:
        gate.wait(5)
        real(self, items)  # type: ignore[arg-type]
        written.append(len(items))

    monkeypatch.setattr(record_spill, "SPILL_ROWS", 100)
    monkeypatch.setattr(record_spill, "MAX_WAITING_GROUPS", 3)
    monkeypatch.setattr(RecordSpill, "_write_group", slow)
    records = varied(1_000, 9)
    spill = RecordSpill(tmp_path)
    threading.Timer(0.3, gate.set).start()
    for k in range(0, 1_000, 100):  # ten row groups; the fourth hand-over waits for the gate
        spill.write(records[k:k + 100])
        waiting = [f for f in spill._done if not f.done()]
        assert len(waiting) <= 3
    spill.close()
    assert len(read_records(spill.path)) == 1_000
