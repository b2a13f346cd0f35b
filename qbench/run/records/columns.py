"""A run's records as numpy columns (`Columns`), from records or read from disk a few columns at a time:
bounded memory, the records' figures to the last digit. Design: docs/design/records-and-results.md."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import numpy as np

from qbench.run.clib import libc
from qbench.run.records.schema import (
    DERIVED,
    FIELD_NAMES,
    READABLE_VERSIONS,
    RecordsFormatError,
    RequestRecord,
)

LARGE_BLOCK: Final = 1 << 20  # bytes from which glibc maps an allocation of its own (map_large_blocks)
KEEP: Final = 6  # columns a view from disk keeps read (each 8 bytes a row)
TEXT_ROWS: Final = 65_536  # rows of a string column `texts` hands over at a time

#: The derived phases from their stored fields, as RequestRecord computes them (end - start, None -> NaN).
_DIFFS: Final = {
    "latency_s": ("completed_at_s", "intended_at_s"),
    "latency_from_send_s": ("completed_at_s", "sent_at_s"),
    "send_lag_s": ("sent_at_s", "intended_at_s"),
    "queue_wait_s": ("started_at_s", "sent_at_s"),
    "download_s": ("completed_at_s", "result_at_s"),
    "ttfo_s": ("first_output_at_s", "intended_at_s"),
    "ttft_s": ("first_output_at_s", "sent_at_s"),
}
_STRINGS: Final = frozenset({"session_id", "endpoint", "outcome", "error_kind", "error_message", "event_id",
                             "tokens_from", "finish_reason", "itl_hist", "chunk_latency_hist",
                             "output_gap_hist"})


class Columns:
    """The interface: a fixed number of rows, each column as a numpy array when asked."""

    n: int

    def _column(self, name: str) -> np.ndarray:  # the column as stored (floats, ints, bools or objects)
        raise NotImplementedError

    def floats(self, name: str) -> np.ndarray:
        """float64, NaN for None: a stored numeric field or a derived phase (RequestRecord's properties)."""
        if name in DERIVED and name not in FIELD_NAMES:
            return self._derived(name)
        column = self._column(name)
        if column.dtype == object:
            return np.array([np.nan if v is None else v for v in column], dtype=np.float64)
        return column.astype(np.float64, copy=False)

    def new_floats(self, name: str) -> np.ndarray:
        """floats(name) as an array of the caller's own, to change in place."""
        return np.array(self.floats(name), dtype=np.float64)

    def ints(self, name: str) -> np.ndarray:
        column = self._column(name)
        if column.dtype.kind in "iub":
            return column.astype(np.int64, copy=False)
        if column.dtype == object or np.isnan(column).any():
            raise ValueError(f"column {name} holds None: read it with floats()")
        return column.astype(np.int64)

    def bools(self, name: str) -> np.ndarray:
        return self._column(name).astype(bool, copy=False)

    def labels(self, name: str) -> tuple[np.ndarray, list[str]]:
        """(codes, strings): codes[i] indexes strings, -1 where the record has None."""
        column = self._column(name)
        seen: dict[str, int] = {}
        codes = np.fromiter((-1 if v is None else seen.setdefault(v, len(seen)) for v in column),
                            dtype=np.int32, count=len(column))
        return codes, list(seen)

    def strings(self, name: str) -> np.ndarray:
        """The column's values as an object array (str or None)."""
        return self._column(name)

    def texts(self, name: str, mask: np.ndarray) -> Iterator[Any]:
        """A string column's values at `mask` (row order), as pyarrow arrays of at most TEXT_ROWS values."""
        import pyarrow as pa

        values, rows = self.strings(name), np.flatnonzero(mask)
        for start in range(0, rows.size, TEXT_ROWS):
            yield pa.array(values[rows[start:start + TEXT_ROWS]], type=pa.string())

    def ok(self) -> np.ndarray:
        codes, names = self.labels("outcome")
        return codes == names.index("ok") if "ok" in names else np.zeros(self.n, dtype=bool)

    def measured(self) -> np.ndarray:
        return ~self.bools("warmup")

    def where(self, mask: np.ndarray) -> Columns:
        rows = np.flatnonzero(mask)  # 4 bytes a row where that is enough (a view of 3.6 M rows: 14 MiB)
        return _Rows(self, rows.astype(np.int32) if self.n < 2**31 else rows)

    def __len__(self) -> int:
        return self.n

    # ------------------------------------------------------------ derived phases, as records.py's

    def _derived(self, name: str) -> np.ndarray:
        if name in _DIFFS:
            stop, start = _DIFFS[name]
            return _f(self.floats(stop) - self.floats(start))
        if name in ("service_s", "client_only_s"):  # to the result when output files were then fetched
            result = self.floats("result_at_s")
            end = _f(np.where(np.isnan(result), self.floats("completed_at_s"), result))  # new: in place
            if name == "service_s":
                end -= self.floats("started_at_s")
                return end
            with np.errstate(invalid="ignore"):  # left to right, as the record's expression (same digits)
                end -= self.floats("sent_at_s")
                end -= self.floats("server_total_s")
                end -= np.nan_to_num(self.floats("server_queue_wait_s"))
                end -= np.nan_to_num(self.floats("server_upload_s"))
            return end
        if name == "tpot_s":  # (completion - first token) / (output_tokens - 1), from 2 tokens
            tokens = self.floats("output_tokens")
            span = self.floats("completed_at_s") - self.floats("first_output_at_s")
            with np.errstate(invalid="ignore", divide="ignore"):
                return _f(np.where(tokens >= 2, span / (tokens - 1), np.nan))
        if name == "output_tps":  # tokens over the span from the actual send, when both are positive
            tokens = self.floats("output_tokens")
            span = self.floats("latency_from_send_s")
            with np.errstate(invalid="ignore", divide="ignore"):
                return _f(np.where((span > 0) & (tokens > 0), tokens / span, np.nan))
        if name == "eta_error_s":
            eta = self.floats("estimation_at_s") + self.floats("rank_eta_s")
            return _f(eta - self.floats("completed_at_s"))
        raise KeyError(f"{name}: no column computes it (ask for a stored field or {sorted(_DIFFS)})")

    @classmethod
    def of(cls, records: Sequence[RequestRecord] | Columns) -> Columns:
        """The records as columns (columns already: themselves, so a function may take either)."""
        return records if isinstance(records, Columns) else _FromRecords(records)

    @classmethod
    def read(cls, path: Path, keep: int = KEEP) -> Columns:
        map_large_blocks()
        return _FromParquet(_parquet_files(path), keep)


class _FromRecords(Columns):
    def __init__(self, records: Sequence[RequestRecord]) -> None:
        self.records, self.n = records, len(records)
        self._cache: dict[str, np.ndarray] = {}

    def _column(self, name: str) -> np.ndarray:
        if name not in FIELD_NAMES:
            raise KeyError(f"{name}: not a stored field of RequestRecord")
        if name not in self._cache:
            values = list(map(attrgetter(name), self.records))
            self._cache[name] = _array(values, name)
        return self._cache[name]


class _FromParquet(Columns):
    def __init__(self, files: list[Path], keep: int) -> None:
        import pyarrow.parquet as pq

        self.files = [_Part(pq.ParquetFile(f)) for f in files]
        for path, part in zip(files, self.files, strict=True):
            _check_version(path, part.file)
        self.n = sum(part.rows for part in self.files)
        self.keep = max(keep, 1)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._names: dict[str, list[str]] = {}  # a labels column's strings (its codes are in the cache)

    def _column(self, name: str) -> np.ndarray:
        if name in self._cache:
            self._cache.move_to_end(name)
            return self._cache[name]
        if name not in FIELD_NAMES:
            raise KeyError(f"{name}: not a stored field of RequestRecord")
        parts = [_read_column(part, name) for part in self.files]
        column = np.concatenate(parts) if len(parts) != 1 else parts[0]
        return self._kept(name, column)

    def _kept(self, key: str, column: np.ndarray) -> np.ndarray:
        self._cache[key] = column
        while len(self._cache) > self.keep:
            self._cache.popitem(last=False)
        return column

    def labels(self, name: str) -> tuple[np.ndarray, list[str]]:
        """Arrow's dictionary encoding (its order: first sight, as the base's): 4 bytes a row."""
        if name not in _STRINGS or name not in self.files[0].names:
            return super().labels(name)
        key = f"labels:{name}"
        if key in self._cache:
            self._cache.move_to_end(key)
        else:
            codes, seen, at = np.empty(self.n, dtype=np.int32), dict[str, int](), 0
            for part in self.files:
                if name not in part.names:  # a part written before the field: None
                    codes[at:at + part.rows] = -1
                    at += part.rows
                    continue
                for batch in part.batches(name):
                    encoded = batch.column(0).dictionary_encode()  # first sight in the batch
                    renumber = [seen.setdefault(s, len(seen)) for s in encoded.dictionary.to_pylist()]
                    local = encoded.indices.fill_null(-1).to_numpy()
                    codes[at:at + local.size] = np.array([*renumber, -1], dtype=np.int32)[local]
                    at += local.size
            self._names[name] = list(seen)
            self._kept(key, codes)
        return self._cache[key], self._names[name]

    def texts(self, name: str, mask: np.ndarray) -> Iterator[Any]:
        import pyarrow as pa

        if name not in self.files[0].names:
            yield from super().texts(name, mask)
            return
        offset = 0
        for part in self.files:
            for batch in part.batches(name):
                picked = mask[offset:offset + batch.num_rows]
                offset += batch.num_rows
                if picked.any():
                    yield batch.column(0).filter(pa.array(picked))


class _Rows(Columns):
    def __init__(self, parent: Columns, rows: np.ndarray) -> None:
        self.parent, self.rows, self.n = parent, rows, int(rows.size)

    def _column(self, name: str) -> np.ndarray:
        return np.asarray(self.parent._column(name)[self.rows])

    def floats(self, name: str) -> np.ndarray:
        return _f(self.parent.floats(name)[self.rows])

    def new_floats(self, name: str) -> np.ndarray:
        return self.floats(name)  # taken at the rows: a new array

    def labels(self, name: str) -> tuple[np.ndarray, list[str]]:
        """The parent's codes at these rows, renumbered to the strings these rows have (first sight order)."""
        codes, names = self.parent.labels(name)
        codes = codes[self.rows]
        present, first = np.unique(codes[codes >= 0], return_index=True)
        order = present[np.argsort(first, kind="stable")]
        renumber = np.full(len(names) + 1, -1, dtype=np.int32)  # the last entry: -1 (None) stays -1
        renumber[order] = np.arange(order.size, dtype=np.int32)
        return renumber[codes], [names[i] for i in order.tolist()]

    def texts(self, name: str, mask: np.ndarray) -> Iterator[Any]:
        rows = np.zeros(self.parent.n, dtype=bool)
        rows[self.rows[mask]] = True
        return self.parent.texts(name, rows)

    def where(self, mask: np.ndarray) -> Columns:
        return _Rows(self.parent, self.rows[mask])


def _f(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _array(values: list[Any], name: str) -> np.ndarray:
    """A column from Python values: numbers as float64 (None -> NaN) or int64, strings as objects."""
    if name in _STRINGS:
        column = np.empty(len(values), dtype=object)
        column[:] = values
        return column
    if name == "warmup":
        return np.array(values, dtype=bool)
    if any(v is None for v in values):
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    kind = np.int64 if values and all(isinstance(v, int) for v in values) else np.float64
    return np.array(values, dtype=kind)


def _read_column(part: _Part, name: str) -> np.ndarray:
    """One column of a Parquet file, TEXT_ROWS rows at a time (a field an older version lacks: default)."""
    n = part.rows
    if name not in part.names:
        default = RequestRecord.__dataclass_fields__[name].default
        if name in _STRINGS or default is None:
            return np.full(n, np.nan) if name not in _STRINGS else np.full(n, None, dtype=object)
        return np.full(n, default)
    out: np.ndarray | None = None
    at = 0
    for batch in part.batches(name):  # Arrow's buffers a batch at a time
        piece = _numpy(batch.column(0), name)
        if out is None:
            out = np.empty(n, dtype=piece.dtype)
        elif piece.dtype == np.float64 and out.dtype != np.float64:  # an int column with None from here
            out = out.astype(np.float64)
        out[at:at + piece.size] = piece
        at += piece.size
    if out is None:  # no rows
        return _numpy(part.file.read(columns=[name], use_threads=False).column(0), name)
    return out


class _Part:
    """One records file: its field names and its columns' record batches (a small file read whole at once)."""

    def __init__(self, file: Any) -> None:
        self.file, self.rows = file, int(file.metadata.num_rows)
        self.names = frozenset(file.schema_arrow.names)
        self._whole: Any = None

    def batches(self, name: str) -> Iterator[Any]:
        """One column's record batches of at most TEXT_ROWS rows, a row group at a time (no thread pool)."""
        import pyarrow as pa

        if self.rows <= TEXT_ROWS:
            if self._whole is None:
                self._whole = self.file.read(use_threads=False)
            yield pa.record_batch([self._whole.column(name).combine_chunks()], names=[name])
            return
        for group in range(self.file.metadata.num_row_groups):
            yield from self.file.iter_batches(TEXT_ROWS, row_groups=[group], columns=[name],
                                              use_threads=False)


def _numpy(column: Any, name: str) -> np.ndarray:
    """Arrow values as numpy: strings as objects, integers with nulls as float64 (NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name in _STRINGS:
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    if column.null_count and not pa.types.is_floating(column.type):
        return np.asarray(pc.cast(column, "double").to_numpy(zero_copy_only=False), dtype=np.float64)
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _parquet_files(path: Path) -> list[Path]:
    """A run folder's records files (records.parquet, or its parts records-*.parquet in order)."""
    if path.is_dir():
        parts = sorted(path.glob("records-*.parquet"))
        single = path / "records.parquet"
        files = [single] if single.exists() else parts
        if not files:
            raise FileNotFoundError(f"{path}: no records.parquet")
        return files
    return [path]


def _check_version(path: Path, file: Any) -> None:
    meta = file.schema_arrow.metadata or {}
    version = int(meta.get(b"qbench_schema_version", b"0"))
    if version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS)
        raise RecordsFormatError(
            f"{path}: records schema version {version}, this qbench reads versions {readable}")


def column_stat(cols: Columns, name: str, mask: np.ndarray | None = None) -> np.ndarray:
    """The non-NaN values of a float column (in row order), where `mask` is true if given."""
    values = cols.floats(name)
    if mask is not None:
        values = values[mask]
    return _f(values[~np.isnan(values)])


class Held(Columns):
    """Columns with each label column and the measured mask kept once asked (4 bytes a row each)."""

    def __init__(self, cols: Columns) -> None:
        self.inner, self.n = cols, len(cols)
        self._labels: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._measured: np.ndarray | None = None

    def _column(self, name: str) -> np.ndarray:
        return self.inner._column(name)

    def floats(self, name: str) -> np.ndarray:
        return self.inner.floats(name)

    def new_floats(self, name: str) -> np.ndarray:
        return self.inner.new_floats(name)

    def labels(self, name: str) -> tuple[np.ndarray, list[str]]:
        if name not in self._labels:
            self._labels[name] = self.inner.labels(name)
        codes, strings = self._labels[name]
        return codes, list(strings)

    def measured(self) -> np.ndarray:
        if self._measured is None:
            self._measured = self.inner.measured()
        return self._measured


# ---------------------------------------------------------------- the allocators


def map_large_blocks() -> None:
    """Have glibc map each allocation of LARGE_BLOCK bytes or more on its own: freed, it returns at once."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, LARGE_BLOCK)  # M_MMAP_THRESHOLD; fixed from here (no more raising it)


def give_back_memory() -> None:
    """Return to the system the memory Arrow's pool and glibc's heap hold freed."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def _libc() -> Any:
    """glibc, or None (musl, macOS: their own ways)."""
    c = libc()
    return c if c is not None and hasattr(c, "malloc_trim") and hasattr(c, "mallopt") else None
