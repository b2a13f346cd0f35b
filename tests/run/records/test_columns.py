"""qbench.run.records.columns: a run's records as columns, from the records or from disk, value for value."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from qbench.run.records import columns
from qbench.run.records.columns import Columns, Held
from qbench.run.records.schema import DERIVED, FIELD_NAMES, RequestRecord, write_parquet

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from end_of_run import chunk_records  # noqa: E402  (the benchmark's realistic Gradio records)


@pytest.fixture(scope="module")
def records() -> list[RequestRecord]:
    rows, _ = chunk_records(np.random.default_rng(7), 0, 3_000, 0.0, 1000.0, 1.0, 0.5)
    rows[5].result_at_s = rows[5].completed_at_s  # output files fetched: service ends at the result
    rows[6].itl_hist = "12:3 14:1"
    for k, r in enumerate(rows[10:200]):  # token streams: 0, 1 and more tokens
        r.output_tokens, r.input_tokens = k % 40, 12
    return rows


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return a == b


def _expected(records: list[RequestRecord], name: str) -> list[object]:
    return [math.nan if getattr(r, name) is None and name not in _TEXT else getattr(r, name) for r in records]


_TEXT = {"session_id", "endpoint", "outcome", "error_kind", "error_message", "event_id", "tokens_from",
         "finish_reason", "itl_hist"}


@pytest.mark.parametrize("source", ["records", "parquet", "parquet-in-batches"])
def test_every_stored_field_and_derived_phase_reads_as_the_records_hold_it(
    records: list[RequestRecord], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From disk a file of up to TEXT_ROWS rows is read whole, a larger one a batch of TEXT_ROWS at a
    time (here 700 of 3,000): both as the records hold them."""
    if source == "parquet-in-batches":
        monkeypatch.setattr(columns, "TEXT_ROWS", 700)
    if source != "records":
        write_parquet(records, tmp_path / "records.parquet")
        cols = Columns.read(tmp_path, keep=3)
    else:
        cols = Columns.of(records)
    assert len(cols) == len(records)
    for name in [*FIELD_NAMES, *DERIVED]:
        if name in _TEXT:
            got = list(cols.strings(name))
        elif name in ("warmup",):
            got = cols.bools(name).tolist()
        else:
            got = cols.floats(name).tolist()
        want = _expected(records, name)
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), name
    codes, names = cols.labels("endpoint")
    assert [names[c] for c in codes] == [r.endpoint for r in records]
    assert cols.ok().tolist() == [r.ok for r in records]
    assert cols.measured().tolist() == [not r.warmup for r in records]
    assert cols.ints("outputs").tolist() == [r.outputs for r in records]
    with pytest.raises(ValueError, match="holds None"):
        cols.ints("rank")


def test_a_view_selects_rows_of_every_column(records: list[RequestRecord], tmp_path: Path) -> None:
    write_parquet(records, tmp_path / "records.parquet")
    cols = Columns.read(tmp_path / "records.parquet")
    chat = cols.labels("endpoint")
    view = cols.where(chat[0] == chat[1].index("chat"))
    picked = [r for r in records if r.endpoint == "chat"]
    assert len(view) == len(picked)
    assert np.array_equal(view.floats("latency_s"), np.array([r.latency_s for r in picked], dtype=float),
                          equal_nan=True)
    ok = view.where(view.ok())
    assert ok.floats("service_s").tolist() == [r.service_s for r in picked if r.ok]


def test_a_run_in_parts_reads_as_one(records: list[RequestRecord], tmp_path: Path) -> None:
    write_parquet(records[:1000], tmp_path / "records-00001.parquet")
    write_parquet(records[1000:], tmp_path / "records-00002.parquet")
    cols = Columns.read(tmp_path)
    assert len(cols) == len(records)
    assert cols.floats("completed_at_s").tolist() == [r.completed_at_s for r in records]


def test_a_view_from_disk_keeps_only_a_few_columns(records: list[RequestRecord], tmp_path: Path) -> None:
    write_parquet(records, tmp_path / "records.parquet")
    cols = Columns.read(tmp_path, keep=2)
    for name in ("sent_at_s", "started_at_s", "completed_at_s", "intended_at_s"):
        cols.floats(name)
    assert len(cols._cache) == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("source", ["records", "parquet", "parts", "parts-in-batches"])
def test_labels_and_texts_of_a_view_read_as_the_records_hold_them(
    records: list[RequestRecord], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From disk, labels are Arrow's dictionary codes and texts Arrow batches (no Python string a row):
    the same strings in the same order as from the records, over the whole run and over a view."""
    if source == "records":
        cols = Columns.of(records)
    else:
        if source == "parts-in-batches":
            monkeypatch.setattr(columns, "TEXT_ROWS", 700)
        parts = [records] if source == "parquet" else [records[:1000], records[1000:]]
        for i, part in enumerate(parts):
            write_parquet(part, tmp_path / f"records-{i:05}.parquet")
        cols = Columns.read(tmp_path, keep=2)
    failed = [r for r in records if not r.ok]
    view = cols.where(~cols.ok())
    for name in ("error_kind", "endpoint", "outcome"):
        for picked, rows in ((records, cols), (failed, view)):
            codes, names = rows.labels(name)
            firsts = list(dict.fromkeys(getattr(r, name) for r in picked if getattr(r, name) is not None))
            assert names == firsts
            assert [None if c < 0 else names[c] for c in codes] == [getattr(r, name) for r in picked]
    every_third = np.arange(len(view)) % 3 == 0
    texts = [v for batch in view.texts("error_message", every_third) for v in batch.to_pylist()]
    assert texts == [r.error_message for r in failed[::3]]
    assert [v for b in cols.texts("itl_hist", cols.ok()) for v in b.to_pylist()] == [
        r.itl_hist for r in records if r.ok]


def test_labels_read_from_parquet_parts_are_the_records_labels(records: list[RequestRecord],
                                                               tmp_path: Path) -> None:
    """Arrow's dictionary encoding, part by part: the codes and strings (in order of first sight) the
    records give, None as -1, a field an older file lacks as None."""
    from dataclasses import replace

    import pyarrow.parquet as pq

    rows = [replace(r) for r in records[:900]]  # copies: the fixture is the module's
    for k, r in enumerate(rows[:50]):
        r.finish_reason = None if k % 3 else ("stop" if k % 2 else "length")
    write_parquet(rows[:400], tmp_path / "records-00000.parquet")
    write_parquet(rows[400:], tmp_path / "records-00001.parquet")
    old = pq.read_table(tmp_path / "records-00001.parquet")
    pq.write_table(old.drop_columns(["tokens_from"]).replace_schema_metadata(old.schema.metadata),
                   tmp_path / "records-00001.parquet")
    from_disk, from_records = Columns.read(tmp_path), Columns.of(rows)
    for r in rows[400:]:
        r.tokens_from = None
    for name in ("endpoint", "outcome", "error_kind", "finish_reason", "tokens_from", "session_id"):
        codes, strings = from_disk.labels(name)
        want_codes, want_strings = from_records.labels(name)
        assert strings == want_strings, name
        np.testing.assert_array_equal(codes, want_codes, err_msg=name)
    np.testing.assert_array_equal(from_disk.ok(), [r.ok for r in rows])
    np.testing.assert_array_equal(from_disk.where(from_disk.ok()).labels("endpoint")[0],
                                  from_records.where(from_records.ok()).labels("endpoint")[0])


_FREED = """
import sys
import numpy as np
from qbench.run.records import columns

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "mapped":
    columns.map_large_blocks()
for _ in range(3):  # glibc raises its threshold to each freed mapped block's size: from the 2nd, the heap
    column = np.ones(3_000_000)  # 23 MiB, every page touched: one column of a long run
    before = rss_mib()
    del column
print(before - rss_mib())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap and /proc")
@pytest.mark.parametrize("mode", ["default", "mapped"])
def test_a_freed_column_goes_back_to_the_system_once_large_blocks_are_mapped(mode: str) -> None:
    """Without map_large_blocks, glibc serves a column of tens of MiB from its heap once such a block
    was freed, and keeps it when freed again (the end of a long run held ~130 MiB that way)."""
    import subprocess

    if columns._libc() is None:
        pytest.skip("not glibc")
    freed = float(subprocess.run([sys.executable, "-c", _FREED, mode], capture_output=True, text=True,
                                 check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout)
    if mode == "mapped":
        assert freed > 20
    else:  # what the call changes: without it the block stays resident
        assert freed < 5


def test_new_floats_are_the_callers_own(records: list[RequestRecord], tmp_path: Path) -> None:
    """What a caller changes in place (the diagnosis's waits) never reaches a kept column."""
    write_parquet(records, tmp_path / "records.parquet")
    disk = Columns.read(tmp_path)
    for cols in (disk, disk.where(disk.ok()), Columns.of(records), Held(disk)):
        want = cols.floats("sent_at_s").copy()
        mine = cols.new_floats("sent_at_s")
        mine[:] = -1.0
        np.testing.assert_array_equal(cols.floats("sent_at_s"), want)
