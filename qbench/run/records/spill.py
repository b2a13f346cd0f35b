"""A run's records spilled to Parquet as they finish (`RecordSpill`), then sealed into records.parquet in
the run's order (`seal`), never as record objects. Design: docs/design/records-and-results.md."""

from __future__ import annotations

import io
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import orjson

from qbench.run.records.columns import Columns, give_back_memory, map_large_blocks
from qbench.run.records.schema import BATCH_ROWS, DERIVED, FIELD_NAMES, RequestRecord
from qbench.run.records.schema import _arrow_schema as arrow_schema

SPILL_ROWS: Final = 8_192  # rows a spill row group (written once this many wait)
MAX_WAITING_GROUPS: Final = 8  # row groups handed to the thread, not yet written: past it, wait for it
CACHE_GROUPS: Final = 8  # spill row groups `seal` keeps decoded (the most recently used)
SPILL_GLOB: Final = ".records-spill-*.parquet"


def spill_path(run_dir: Path, name: str) -> Path:
    return run_dir / f".records-spill-{name}.parquet"


class RecordSpill:
    """Appends records to a spill file of the run folder, in arrival order, as columns a thread writes;
    `close` writes what waits and the footer, and raises what the thread raised."""

    def __init__(self, run_dir: Path, name: str = "0") -> None:
        self.path = spill_path(run_dir, name)
        self.rows = 0  # rows handed over so far
        self._writer: Any = None
        self._pending: list[bytes | Any] = []  # JSONL lines (bytes) and Arrow tables, in arrival order
        self._pending_rows = 0
        self._thread: ThreadPoolExecutor | None = None
        self._done: list[Future[None]] = []

    def __enter__(self) -> RecordSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, records: Sequence[RequestRecord]) -> None:
        """Records, as the lines JsonlWriter writes (what the sinks hand over instead: `write_lines`)."""
        if records:
            self.write_lines(b"".join(orjson.dumps(r) + b"\n" for r in records), len(records))

    def write_lines(self, data: bytes, rows: int) -> None:
        """`rows` records as JSONL lines of every stored field (JsonlWriter's)."""
        if rows:
            self._add(data, rows)

    def write_table(self, table: Any) -> None:
        """An Arrow table with records.parquet's schema (a Ray worker's batch)."""
        if table.num_rows:
            self._add(table, table.num_rows)

    def _add(self, item: bytes | Any, rows: int) -> None:
        self._pending.append(item)
        self._pending_rows += rows
        self.rows += rows
        if self._pending_rows >= SPILL_ROWS:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        items, self._pending, self._pending_rows = self._pending, [], 0
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="qbench-spill")
        self._done = [f for f in self._done if not f.done() or f.exception() is not None]
        waiting = [f for f in self._done if not f.done()]
        if len(waiting) >= MAX_WAITING_GROUPS:  # the thread fell behind: wait for it, not grow without bound
            wait(waiting[: len(waiting) - MAX_WAITING_GROUPS + 1])
        self._done.append(self._thread.submit(self._write_group, items))

    def _write_group(self, items: list[bytes | Any]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.concat_tables(_tables(items))
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.path, arrow_schema())
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))

    def close(self) -> None:
        self._write_pending()
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        done, self._done = self._done, []
        try:
            for future in done:
                future.result()  # what the thread raised
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


def _tables(items: list[bytes | Any]) -> list[Any]:
    """The pending items as tables of records.parquet's schema, in order (runs of lines parsed at once)."""
    tables: list[Any] = []
    lines: list[bytes] = []
    for item in [*items, None]:
        if isinstance(item, bytes):
            lines.append(item)
            continue
        if lines:
            tables.append(lines_table(b"".join(lines)))
            lines = []
        if item is not None:
            tables.append(item)
    return tables


def lines_table(data: bytes) -> Any:
    """JSONL lines of records (every stored field) as a table of records.parquet's schema (derived too)."""
    import pyarrow as pa
    import pyarrow.json as pj

    schema = arrow_schema()
    stored = pa.schema([schema.field(name) for name in FIELD_NAMES])
    table = pj.read_json(
        io.BytesIO(data),
        read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
        parse_options=pj.ParseOptions(explicit_schema=stored, unexpected_field_behavior="ignore"),
    )
    cols = _TableColumns(table)
    arrays = [table.column(name) for name in FIELD_NAMES]
    arrays += [nullable(cols.floats(name)) for name in DERIVED]
    return pa.Table.from_arrays(arrays, schema=schema)


def with_derived(table: Any) -> Any:
    """The table with its derived phases computed again from its stored fields (after one changed)."""
    import pyarrow as pa

    stored = table.select(list(FIELD_NAMES))
    cols = _TableColumns(stored)
    arrays = [stored.column(name) for name in FIELD_NAMES]
    arrays += [nullable(cols.floats(name)) for name in DERIVED]
    return pa.Table.from_arrays(arrays, schema=arrow_schema())


def nullable(values: np.ndarray) -> Any:
    """float64 with NaN as null, from the array's own buffer (pa.array would import pandas)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=np.float64)
    valid = ~np.isnan(values)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = int(values.size - np.count_nonzero(valid))
    return pa.Array.from_buffers(pa.float64(), values.size, [bitmap, pa.py_buffer(values)], null_count=nulls)


class _TableColumns(Columns):
    """An Arrow table of stored fields as Columns (for the derived phases)."""

    def __init__(self, table: Any) -> None:
        self.table, self.n = table, table.num_rows

    def _column(self, name: str) -> np.ndarray:
        """A number column, nulls as NaN, read from its buffers (pyarrow's own conversions import pandas)."""
        import pyarrow as pa

        column = self.table.column(name).combine_chunks()
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            raise TypeError(f"{name}: not a number column")
        rows = slice(column.offset, column.offset + len(column))
        validity, data = column.buffers()[:2]
        if data is None:  # every value null
            return np.full(len(column), np.nan)
        kind = np.float64 if pa.types.is_floating(column.type) else np.int64
        values = np.frombuffer(data, dtype=kind)[rows]
        if not column.null_count:
            return values
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[rows].astype(bool)
        return np.where(valid, values, np.nan)


def discard_spills(run_dir: Path) -> None:
    """Spills an earlier run left in a reused folder (a killed one never sealed them)."""
    for path in run_dir.glob(SPILL_GLOB):
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- the end: records.parquet


@dataclass(frozen=True)
class RowOrder:
    """The order of records.parquet's rows. `sort` False: arrival order; else by request id, or by place in
    `plan_ids` when given; `renumber`: by (intended_at_s, user_id), ids renumbered 0..n-1. Stable sorts."""

    sort: bool = True
    plan_ids: np.ndarray | None = None
    renumber: bool = False

    def permutation(self, spill: _Spill) -> np.ndarray:
        if not self.sort:
            return np.arange(spill.n, dtype=np.int64)
        if self.renumber:
            keys = (spill.column("user_id"), spill.column("intended_at_s"))
            return np.lexsort(keys).astype(np.int64, copy=False)
        ids = spill.column("request_id")
        key = ids if self.plan_ids is None else _positions(ids, np.asarray(self.plan_ids, dtype=np.int64))
        return np.argsort(key, kind="stable").astype(np.int64, copy=False)


def _positions(ids: np.ndarray, plan_ids: np.ndarray) -> np.ndarray:
    """Each id's place in `plan_ids` (its first), the id itself where the plan has no such id."""
    if plan_ids.size == 0:
        return ids
    order = np.argsort(plan_ids, kind="stable")
    sorted_ids = plan_ids[order]
    at = np.clip(np.searchsorted(sorted_ids, ids), 0, sorted_ids.size - 1)
    found = sorted_ids[at] == ids
    return np.where(found, order[at], ids)


def seal(run_dir: Path, order: RowOrder, mask: Callable[[str], str] | None = None) -> int:
    """The run folder's spills as records.parquet (through `records.parquet.tmp`), in `order`, error
    messages through `mask`; the spills removed. Returns the number of records."""
    import pyarrow.parquet as pq

    map_large_blocks()
    give_back_memory()  # what the spill's thread left with Arrow's pool and the heap (~60 MiB)
    spill = _Spill(sorted(run_dir.glob(SPILL_GLOB)))
    rows, n = order.permutation(spill), spill.n
    path = run_dir / "records.parquet"
    tmp = path.with_suffix(".parquet.tmp")
    schema = arrow_schema()
    with pq.ParquetWriter(tmp, schema) as writer:
        for start in range(0, max(spill.n, 1), BATCH_ROWS):
            table = _output_group(spill, rows[start:start + BATCH_ROWS], schema)
            if order.renumber:
                table = _renumbered(table, start)
            if mask is not None:
                table = _masked(table, mask)
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
    tmp.replace(path)
    for file in spill.paths:
        file.unlink(missing_ok=True)
    del spill, rows
    give_back_memory()  # what Arrow's pool kept of the row groups: the summary's and diagnosis's next
    return n


def _output_group(spill: _Spill, rows: np.ndarray, schema: Any) -> Any:
    """One row group of records.parquet, its rows taken SPILL_ROWS at a time into one chunked table."""
    import pyarrow as pa

    if rows.size <= SPILL_ROWS:
        return spill.take(rows, schema)
    return pa.concat_tables([spill.take(rows[at:at + SPILL_ROWS], schema)
                             for at in range(0, rows.size, SPILL_ROWS)])


class _Spill:
    """The spill files as one sequence of rows (file after file): key columns whole, rows by index."""

    def __init__(self, paths: list[Path]) -> None:
        import pyarrow.parquet as pq

        self.paths = paths
        self.files = [pq.ParquetFile(p) for p in paths]
        self.groups = [(f, g) for f in self.files for g in range(f.metadata.num_row_groups)]
        sizes = [f.metadata.row_group(g).num_rows for f, g in self.groups]
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.n = int(self.starts[-1])
        self._cache: OrderedDict[int, Any] = OrderedDict()

    def column(self, name: str) -> np.ndarray:
        if not self.files:
            return np.zeros(0)
        parts = [f.read(columns=[name]).column(0).to_numpy() for f in self.files]
        return np.concatenate(parts)

    def take(self, rows: np.ndarray, schema: Any) -> Any:
        """The rows at these global indices, in this order, as one table."""
        import pyarrow as pa

        if rows.size == 0:
            return schema.empty_table()
        group = np.searchsorted(self.starts, rows, side="right") - 1
        pieces, places = [], []
        for g in np.unique(group):
            at = np.flatnonzero(group == g)
            pieces.append(self._group(int(g)).take(pa.array(rows[at] - self.starts[g])))
            places.append(at)
        table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        if len(pieces) > 1:
            table = table.take(pa.array(np.argsort(np.concatenate(places), kind="stable")))
        return table.combine_chunks()

    def _group(self, g: int) -> Any:
        if g in self._cache:
            self._cache.move_to_end(g)
            return self._cache[g]
        file, index = self.groups[g]
        table = file.read_row_group(index, use_threads=False)
        self._cache[g] = table
        while len(self._cache) > CACHE_GROUPS:
            self._cache.popitem(last=False)
        return table


def _renumbered(table: Any, start: int) -> Any:
    import pyarrow as pa

    ids = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
    return table.set_column(table.schema.get_field_index("request_id"), "request_id", ids)


def _masked(table: Any, mask: Callable[[str], str]) -> Any:
    """error_message through `mask`, each distinct message once."""
    import pyarrow as pa

    at = table.schema.get_field_index("error_message")
    encoded = table.column(at).combine_chunks().dictionary_encode()
    words = [None if v is None else mask(v) for v in encoded.dictionary.to_pylist()]
    if words == encoded.dictionary.to_pylist():
        return table
    messages = pa.DictionaryArray.from_arrays(encoded.indices, pa.array(words, pa.string()))
    return table.set_column(at, table.schema.field(at), messages.cast(pa.string()))
