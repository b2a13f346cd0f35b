"""A run's records as numpy columns, for charts: one pass over the records, then vector maths.

Missing phases (None on the record) become NaN, so a column can be masked with `np.isfinite`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qbench.run.records import RequestRecord

_NICE_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600)


def _column(records: Sequence[RequestRecord], name: str) -> np.ndarray:
    values = [getattr(r, name) for r in records]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


@dataclass(frozen=True)
class RunColumns:
    """Columns of one run (seconds from run start; NaN where a phase is missing)."""

    intended: np.ndarray
    sent: np.ndarray
    estimation: np.ndarray
    started: np.ndarray
    first_output: np.ndarray
    completed: np.ndarray
    rank: np.ndarray
    queue_size: np.ndarray
    rank_eta: np.ndarray
    ok: np.ndarray  # bool
    warmup: np.ndarray  # bool
    error_kind: np.ndarray  # str; "" when ok

    @classmethod
    def from_records(cls, records: Sequence[RequestRecord]) -> RunColumns:
        def col(name: str) -> np.ndarray:
            return _column(records, name)

        return cls(
            intended=col("intended_at_s"),
            sent=col("sent_at_s"),
            estimation=col("estimation_at_s"),
            started=col("started_at_s"),
            first_output=col("first_output_at_s"),
            completed=col("completed_at_s"),
            rank=col("rank"),
            queue_size=col("queue_size"),
            rank_eta=col("rank_eta_s"),
            ok=np.array([r.ok for r in records], dtype=bool),
            warmup=np.array([r.warmup for r in records], dtype=bool),
            error_kind=np.array(["" if r.ok else (r.error_kind or "unknown") for r in records], dtype=object),
        )

    def __len__(self) -> int:
        return int(self.intended.size)

    @property
    def measured(self) -> np.ndarray:
        """Mask of the records outside the warm-up window."""
        return ~self.warmup

    @property
    def send_lag(self) -> np.ndarray:
        return np.asarray(self.sent - self.intended)

    def phase(self, name: str) -> np.ndarray:
        """A latency phase by its RequestRecord property name (latency_s, queue_wait_s, service_s...)."""
        phases = {
            "latency_s": self.completed - self.intended,
            "latency_from_send_s": self.completed - self.sent,
            "queue_wait_s": self.started - self.sent,
            "service_s": self.completed - self.started,
            "ttfo_s": self.first_output - self.intended,
            "send_lag_s": self.send_lag,
        }
        return np.asarray(phases[name])

    def span(self) -> tuple[float, float]:
        """The time range covered by the run's events (at least 1 ms wide)."""
        stacked = np.concatenate([self.intended, self.sent, self.completed])
        finite = stacked[np.isfinite(stacked)]
        if finite.size == 0:
            return 0.0, 1.0
        lo, hi = float(min(0.0, finite.min())), float(finite.max())
        return lo, max(hi, lo + 1e-3)

    def warmup_window(self) -> tuple[float, float] | None:
        """[start, end] of the warm-up requests' intended send times, or None without warm-up."""
        if not self.warmup.any():
            return None
        t = self.intended[self.warmup]
        end = float(t.max())
        if (~self.warmup).any():
            end = max(end, float(self.intended[~self.warmup].min()))
        return float(t.min()), end

    def in_flight(self, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(waiting in queue, running) request counts at each time of `grid`.

        A request waits from its send until it starts (or, never started, until it finished);
        it runs from its start until it completes. Unfinished phases run to the end of the grid.
        """
        inf = np.inf
        sent = self.sent[np.isfinite(self.sent)]
        left_queue = np.where(np.isfinite(self.started), self.started, self.completed)
        left_queue = np.where(np.isfinite(left_queue), left_queue, inf)[np.isfinite(self.sent)]
        started = self.started[np.isfinite(self.started)]
        done = np.where(np.isfinite(self.completed), self.completed, inf)[np.isfinite(self.started)]
        queued = _count_le(sent, grid) - _count_le(left_queue, grid)
        running = _count_le(started, grid) - _count_le(done, grid)
        return queued, running

    def error_counts(self) -> dict[str, int]:
        """Errors by kind, warm-up included (what happened during the whole run)."""
        return dict(Counter(str(k) for k in self.error_kind[~self.ok]))

    def error_time(self) -> np.ndarray:
        """When each request failed: completion (give-up) time, else send time, else intended time."""
        when = np.where(np.isfinite(self.completed), self.completed, self.sent)
        return np.where(np.isfinite(when), when, self.intended)

    def eta_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(server's rank_eta, actual time from that estimate to the result) for completed requests."""
        actual = self.completed - self.estimation
        mask = np.isfinite(self.rank_eta) & np.isfinite(actual) & self.ok & self.measured
        return self.rank_eta[mask], actual[mask]


def fmt_s(value: float) -> str:
    """Seconds, human-readable: 0.0123 -> '12.3 ms', 2.5 -> '2.50 s'."""
    if not np.isfinite(value):
        return "n/a"
    if abs(value) < 1.0:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s"


def _count_le(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(times), grid, side="right")


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
