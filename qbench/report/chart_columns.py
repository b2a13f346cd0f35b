"""A run's records as numpy columns for charts, each read when asked for (NaN where a phase is missing);
scatters draw every request up to MAX_POINTS, else a seeded uniform sample of that many (`sample`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Final

import numpy as np

from qbench.run import Columns, RequestRecord

_NICE_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600)
MAX_POINTS = 20_000  # the most requests a scatter draws (beyond: a uniform sample)
_BLOCK: Final = 1 << 20  # rows a sample walks at a time

#: The charts' phases, each stop - start of two stored times (service ends at completion here: the
#: charts show the server's work up to the last byte, as they always have).
_PHASES: Final = {
    "latency_s": ("completed_at_s", "intended_at_s"),
    "latency_from_send_s": ("completed_at_s", "sent_at_s"),
    "queue_wait_s": ("started_at_s", "sent_at_s"),
    "service_s": ("completed_at_s", "started_at_s"),
    "ttfo_s": ("first_output_at_s", "intended_at_s"),
    "send_lag_s": ("sent_at_s", "intended_at_s"),
}


class RunColumns:
    """Columns of one run (seconds from run start; NaN where a phase is missing), read when asked."""

    def __init__(self, columns: Columns) -> None:
        self.columns = columns
        self._span: tuple[float, float] | None = None

    @classmethod
    def from_records(cls, records: Sequence[RequestRecord]) -> RunColumns:
        return cls(Columns.of(records))

    def __len__(self) -> int:
        return len(self.columns)

    def _floats(self, name: str) -> np.ndarray:
        return np.asarray(self.columns.floats(name))

    # the stored times and queue figures, each read from the run's columns when asked

    @property
    def intended(self) -> np.ndarray:
        return self._floats("intended_at_s")

    @property
    def sent(self) -> np.ndarray:
        return self._floats("sent_at_s")

    @property
    def estimation(self) -> np.ndarray:
        return self._floats("estimation_at_s")

    @property
    def started(self) -> np.ndarray:
        return self._floats("started_at_s")

    @property
    def first_output(self) -> np.ndarray:
        return self._floats("first_output_at_s")

    @property
    def completed(self) -> np.ndarray:
        return self._floats("completed_at_s")

    @property
    def rank(self) -> np.ndarray:
        return self._floats("rank")

    @property
    def queue_size(self) -> np.ndarray:
        return self._floats("queue_size")

    @property
    def rank_eta(self) -> np.ndarray:
        return self._floats("rank_eta_s")

    @cached_property
    def ok(self) -> np.ndarray:
        return np.asarray(self.columns.ok())

    @cached_property
    def warmup(self) -> np.ndarray:
        return np.asarray(self.columns.bools("warmup"))

    @cached_property
    def _kinds(self) -> tuple[np.ndarray, list[str]]:
        """(codes, kinds) of the failed requests' error kinds: -1 for ok requests, "unknown" for none."""
        codes, names = self.columns.labels("error_kind")
        kinds = [*names, "unknown"]
        codes = np.where(codes < 0, np.int32(len(names)), codes)
        return np.where(self.ok, np.int32(-1), codes), kinds

    @property
    def error_kind(self) -> np.ndarray:
        """Each request's error kind (str): "" when ok, "unknown" for an error without one."""
        codes, kinds = self._kinds
        return np.asarray(np.array(["", *kinds], dtype=object)[codes + 1])

    @property
    def measured(self) -> np.ndarray:
        """Mask of the records outside the warm-up window."""
        return ~self.warmup

    @property
    def send_lag(self) -> np.ndarray:
        return self.phase("send_lag_s")

    def phase(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """A latency phase by its RequestRecord property name (latency_s...), of the `rows` mask if given."""
        stop, start = _PHASES[name]
        if rows is None:
            return np.asarray(self._floats(stop) - self._floats(start))
        values = np.asarray(self._floats(stop)[rows])
        values -= self._floats(start)[rows]
        return values

    def span(self) -> tuple[float, float]:
        """The time range covered by the run's events (at least 1 ms wide)."""
        if self._span is None:
            ends = []
            for name in ("intended_at_s", "sent_at_s", "completed_at_s"):
                column = self._floats(name)
                finite = np.isfinite(column)
                if finite.any():  # min and max of the finite values, without a copy of them
                    ends += [float(np.min(column, where=finite, initial=np.inf)),
                             float(np.max(column, where=finite, initial=-np.inf))]
            lo, hi = (min(0.0, *ends), max(ends)) if ends else (0.0, 1.0)
            self._span = (lo, max(hi, lo + 1e-3))
        return self._span

    def warmup_window(self) -> tuple[float, float] | None:
        """[start, end] of the warm-up requests' intended send times, or None without warm-up."""
        if not self.warmup.any():
            return None
        intended = self.intended
        t = intended[self.warmup]
        end = float(t.max())
        if (~self.warmup).any():
            end = max(end, float(intended[~self.warmup].min()))
        return float(t.min()), end

    def in_flight(self, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(waiting, running) per `grid` time: send -> start, start -> completion (unfinished: to the end)."""
        sent, started, completed = self.sent, self.started, self.completed
        was_sent, did_start = np.isfinite(sent), np.isfinite(started)
        left_queue = np.where(did_start, started, completed)[was_sent]
        queued = _count_le(sent[was_sent], grid) - _count_le(left_queue, grid)
        del left_queue
        running = _count_le(started[did_start], grid) - _count_le(completed[did_start], grid)
        return queued, running

    def error_counts(self) -> dict[str, int]:
        """Errors by kind, warm-up included (what happened during the whole run), in order of first sight."""
        codes, kinds = self._kinds
        failed = codes[codes >= 0]
        seen, first = np.unique(failed, return_index=True)
        counts = np.bincount(failed, minlength=len(kinds))
        return {kinds[c]: int(counts[c]) for c in seen[np.argsort(first)]}

    def failed_with(self, kind: str) -> np.ndarray:
        codes, kinds = self._kinds
        return codes == kinds.index(kind) if kind in kinds else np.zeros(len(self), dtype=bool)

    def error_time(self) -> np.ndarray:
        """When each request failed: completion (give-up) time, else send time, else intended time."""
        when = np.where(np.isfinite(self.completed), self.completed, self.sent)
        return np.where(np.isfinite(when), when, self.intended)

    def eta_mask(self) -> np.ndarray:
        """The requests with a server ETA and a completed result (ok, measured)."""
        actual = self.completed - self.estimation
        return np.asarray(np.isfinite(self.rank_eta) & np.isfinite(actual) & self.ok & self.measured)

    def eta_pairs(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(server's rank_eta, actual time from that estimate to the result), completed requests (`mask`)."""
        keep = self.eta_mask() if mask is None else self.eta_mask() & mask
        return self.rank_eta[keep], self.completed[keep] - self.estimation[keep]

    def sample(self, mask: np.ndarray, limit: int | None = None) -> np.ndarray:
        """Mask of the rows a scatter draws among `mask`: all up to `limit`, else a seeded uniform sample."""
        limit = MAX_POINTS if limit is None else limit
        count = int(np.count_nonzero(mask))
        if count <= limit:
            return np.asarray(mask, dtype=bool)
        picks = np.sort(np.random.default_rng(0).choice(count, size=limit, replace=False))  # k-th of mask
        chosen = np.zeros(len(mask), dtype=bool)
        seen = 0
        for lo in range(0, len(mask), _BLOCK):  # the k-th true row, a block at a time (no index per row)
            rows = lo + np.flatnonzero(mask[lo:lo + _BLOCK])
            mine = picks[(picks >= seen) & (picks < seen + rows.size)] - seen
            chosen[rows[mine]] = True
            seen += rows.size
        return chosen


def points_label(drawn: int, total: int) -> str:
    """What a scatter drew: "" for every request, else "a uniform sample of N of M requests"."""
    return "" if drawn >= total else f"a uniform sample of {drawn:,} of {total:,} requests"


def fmt_s(value: float) -> str:
    """Seconds, human-readable: 0.0123 -> '12.3 ms', 2.5 -> '2.50 s'."""
    if not np.isfinite(value):
        return "n/a"
    if abs(value) < 1.0:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s"


def _count_le(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """How many of `times` (a copy, sorted in place; NaN: never, sorted last) are <= each grid time."""
    times.sort()
    return np.searchsorted(times, grid, side="right")


def time_bins(span: tuple[float, float], target: int = 100) -> np.ndarray:
    """Bin edges over `span` with a round width chosen so there are about `target` bins (at most 2x more)."""
    lo, hi = span
    raw = (hi - lo) / target
    width = next((step for step in _NICE_STEPS if step >= raw), _NICE_STEPS[-1])
    start = np.floor(lo / width) * width
    count = max(1, int(np.ceil((hi - start) / width)))
    if hi >= start + count * width:
        count += 1
    return np.asarray(start + width * np.arange(count + 1))
