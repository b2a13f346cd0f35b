"""Did the server keep up? A steady-state test from a run's records (`steadiness`: pace, backlog, wait),
and the backlog test live for an early stop (`LiveTrend`). Rules: docs/design/records-and-results.md."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from qbench.run.json_values import ReadableOrNone
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord

BLOCKS = 10
Z = 2.0  # one-sided, ~98% for a normal slope estimate
Z_DRIFT = 3.0  # a slow growth counts only when this certain (docs/design/records-and-results.md)
HORIZON_S = 3600.0  # a slow growth counts when, kept up this long, it adds the SLO's wait bound
DRIFT_MIN_GROWTH = 8  # ... and it grew the backlog by this many requests within the window ...
DRIFT_MIN_WAIT = 0.25  # ... or the wait by this share of the bound (a short run's filling queue is not)
MIN_REQUESTS = 20
UNFINISHED = frozenset({"deadline", "interrupted", "timeout", "cancelled", "generator_lost"})


@dataclass(frozen=True)
class Trend:
    """A least-squares slope (per second) over block means, and its standard error."""

    slope: float
    se: float

    def up(self, threshold: float, z: float = Z) -> bool:
        """Certainly above zero, and above `threshold`."""
        return self.slope > z * self.se and self.slope > threshold

    def text(self, unit: str, digits: int = 2) -> str:
        return f"{self.slope:+.{digits}g}{unit} ± {self.se:.{max(digits - 1, 1)}g}"


def trend(times: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
          blocks: int = BLOCKS) -> Trend | None:
    """Slope of `values` against `times` over `blocks` equal-count block means (None: too few)."""
    t, v = np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64)
    n = min(blocks, t.size // 2)
    if n < 4:
        return None
    order = np.argsort(t, kind="stable")
    parts = np.array_split(order, n)
    bt = np.array([t[p].mean() for p in parts])
    bv = np.array([v[p].mean() for p in parts])
    sxx = float(((bt - bt.mean()) ** 2).sum())
    if sxx <= 0:
        return None
    slope = float(((bt - bt.mean()) * (bv - bv.mean())).sum() / sxx)
    resid = bv - bv.mean() - slope * (bt - bt.mean())
    se = math.sqrt(float((resid**2).sum()) / (n - 2) / sxx)
    return Trend(slope, se)


@dataclass(frozen=True)
class Steadiness(ReadableOrNone):
    """The evidence that a run kept up, or did not (docs/design/records-and-results.md)."""

    steady: bool
    window_s: float  # measured window the test covered (s)
    arrivals: int  # requests sent in the window
    completions: int  # requests that finished (any outcome but given up) in the window
    arrival_rps: float
    completion_rps: float
    margin: float  # relative overload that counts (a share of the tolerance)
    backlog: Trend | None = None  # req/s
    wait: Trend | None = None  # s per s
    wait_name: str = "queue wait"  # "latency" where the protocol has no start event
    reasons: list[str] = field(default_factory=list)  # what was not steady, with its evidence
    bound_s: float | None = None  # the SLO's wait bound a slow drift is weighed against (None: not known)

    @property
    def evidence(self) -> str:
        """'arrivals 43.1/s, completions 38.5/s, backlog +5.1/s ± 0.4, queue wait +0.12 s/s ± 0.02'."""
        parts = [f"arrivals {self.arrival_rps:.3g}/s, completions {self.completion_rps:.3g}/s"]
        if self.backlog is not None:
            parts.append(f"backlog {self.backlog.text('/s')}")
        if self.wait is not None:
            parts.append(f"{self.wait_name} {self.wait.text(' s/s')}")
        return ", ".join(parts)

    @property
    def verdict(self) -> str:
        """'steady' or 'not steady, backlog +5.1/s ± 0.4' (the first reason)."""
        return "steady" if self.steady else "not steady, " + "; ".join(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict, "evidence": self.evidence}


def _left_at(cols: Columns) -> np.ndarray:
    """When each request left the server's backlog (inf: it never did inside the run)."""
    completed = cols.floats("completed_at_s")
    codes, kinds = cols.labels("error_kind")
    gone = np.isin(codes, [i for i, kind in enumerate(kinds) if kind in UNFINISHED])
    return np.where(np.isnan(completed) | gone, math.inf, completed)


def steadiness(records: Columns | Sequence[RequestRecord], margin: float = 0.025, z: float = Z,
               bound_s: float | None = None) -> Steadiness | None:
    """Steady-state test over the measured window; None with too few measured requests. `bound_s`: the
    SLO's bound a slow but certain drift is weighed against (None: only an overload of `margin` counts)."""
    cols = Columns.of(records)
    sent = cols.where(~np.isnan(cols.floats("sent_at_s")))
    measured = sent.where(sent.measured())
    if len(measured) < MIN_REQUESTS:
        return None
    measured_sends = measured.floats("sent_at_s")
    t0, t1 = float(measured_sends.min()), float(measured_sends.max())
    del measured_sends  # each whole column let go once used (3.6 M requests: 29 MiB each)
    window = t1 - t0
    if window <= 0:
        return None
    sends = np.sort(sent.floats("sent_at_s"))
    arrivals = _between(sends, t0, t1)
    grid = np.linspace(t0, t1, 20 * BLOCKS)
    backlog_now = np.searchsorted(sends, grid, side="right")
    del sends
    lefts = _left_at(sent)  # a new array: sorted in place
    lefts.sort()
    completions = _between(lefts, t0, t1)
    backlog_now -= np.searchsorted(lefts, grid, side="right")
    del lefts
    backlog = trend(grid, backlog_now)
    wait, wait_name = _wait_trend(measured)
    result = Steadiness(True, window, arrivals, completions, arrivals / window, completions / window,
                        margin, backlog, wait, wait_name, bound_s=bound_s)
    reasons = judge_steady(result, z)
    return replace(result, steady=not reasons, reasons=reasons)


def _between(ordered: np.ndarray, low: float, high: float) -> int:
    return int(np.searchsorted(ordered, high, side="right") - np.searchsorted(ordered, low, side="left"))


def judge_steady(s: Steadiness, z: float = Z) -> list[str]:
    """What was not steady, each with its evidence ([] when the run kept up)."""
    reasons = []
    deficit = s.arrivals - s.completions
    if deficit > z * math.sqrt(max(s.arrivals, 1)) and deficit > s.margin * s.arrivals:
        reasons.append(f"completions {s.completion_rps:.3g}/s behind arrivals {s.arrival_rps:.3g}/s")
    if s.backlog is not None:
        served = max(s.completion_rps, 1e-9)  # a backlog of n waits about n / served seconds
        if s.backlog.up(s.margin * s.arrival_rps, z):
            reasons.append(f"backlog {s.backlog.text('/s')}")
        elif (s.bound_s and s.backlog.up(s.bound_s * served / HORIZON_S, Z_DRIFT)
              and s.backlog.slope * s.window_s >= DRIFT_MIN_GROWTH):
            drift = drift_text(s.backlog.slope / served, s.bound_s)
            reasons.append(f"backlog {s.backlog.text('/s')}, {drift}")
    if s.wait is not None:
        if s.wait.up(s.margin, z):
            reasons.append(f"{s.wait_name} {s.wait.text(' s/s')}")
        elif (s.bound_s and s.wait.up(s.bound_s / HORIZON_S, Z_DRIFT)
              and s.wait.slope * s.window_s >= DRIFT_MIN_WAIT * s.bound_s):
            reasons.append(f"{s.wait_name} {s.wait.text(' s/s')}, {drift_text(s.wait.slope, s.bound_s)}")
    return reasons


def drift_text(wait_s_per_s: float, bound_s: float) -> str:
    """'certainly growing: +1 s of queue wait (the SLO's bound) every 2.1 min'."""
    every = bound_s / wait_s_per_s
    when = f"{every / 60:.2g} min" if every >= 60 else f"{every:.2g} s"
    return f"certainly growing: +{bound_s:g} s of queue wait (the SLO's bound) every {when}"


def _wait_trend(measured: Columns) -> tuple[Trend | None, str]:
    """The queue wait (else the latency) by send time; one never started waits to the end of the run."""
    sent, ok = measured.floats("sent_at_s"), measured.ok()
    end = float(np.nan_to_num(measured.floats("completed_at_s"), nan=0.0).max())
    started = measured.floats("started_at_s")
    has_start = int(np.count_nonzero(~np.isnan(started))) >= len(measured) // 2
    if has_start:  # in place: the same values as np.where(started & ok, started, max(end, sent)) - sent
        waits = np.maximum(end, sent)
        np.copyto(waits, started, where=~np.isnan(started) & ok)
        del started
        waits -= sent
    else:
        completed = measured.floats("completed_at_s")
        done = np.where(ok & ~np.isnan(completed), completed, np.maximum(end, sent))
        waits = done - measured.floats("intended_at_s")
    return trend(sent, waits), "queue wait" if has_start else "latency"


def probe_seconds(rate_rps: float, tolerance: float, z: float = Z) -> float:
    """Seconds of load at `rate_rps` after which an overload of `tolerance` (offered = (1 + tolerance) x
    completed) is certain: its backlog growth reaches z times the arrivals' Poisson noise."""
    growth = tolerance / (1 + tolerance) * rate_rps
    return z**2 * rate_rps / growth**2 if growth > 0 else math.inf


# ---------------------------------------------------------------- live: stop an overloaded run early


@dataclass
class LiveTrend:
    """The backlog test on a run in progress (counts only): `check` returns the evidence once an overload
    of `margin` is certain, for `patience` checks in a row after `min_elapsed_s`."""

    margin: float = 0.05
    z: float = 3.0  # checked again and again: stricter than a one-off verdict
    min_elapsed_s: float = 1.0
    min_growth: int = 8  # backlog grown by at least this many requests since the start of the window
    recent_s: float = 1.0
    patience: int = 3
    _times: list[float] = field(default_factory=list)
    _backlog: list[int] = field(default_factory=list)
    _recent: deque[tuple[float, int, int]] = field(default_factory=deque)
    _strikes: int = 0
    _first_sent: int = -1

    def check(self, elapsed_s: float, sent: int, completed: int) -> str | None:
        self._recent.append((elapsed_s, sent, completed))
        while len(self._recent) > 2 and self._recent[1][0] <= elapsed_s - self.recent_s:
            self._recent.popleft()
        if elapsed_s < self.min_elapsed_s:
            return None
        if self._first_sent < 0:
            self._first_sent = sent
        self._times.append(elapsed_s)
        self._backlog.append(sent - completed)
        self._strikes = self._strikes + 1 if self._growing(elapsed_s, sent, completed) else 0
        if self._strikes < self.patience:
            return None
        found = trend(self._times, self._backlog, 8)
        assert found is not None
        t0, sent0, done0 = self._recent[0]
        dt = max(elapsed_s - t0, 1e-9)
        return (f"not steady, backlog {found.text('/s')} (completions {(completed - done0) / dt:.3g}/s vs "
                f"arrivals {(sent - sent0) / dt:.3g}/s; {self._backlog[-1]} waiting or running after "
                f"{elapsed_s:.1f} s)")

    def _growing(self, elapsed_s: float, sent: int, completed: int) -> bool:
        t0, sent0, done0 = self._recent[0]
        dt = elapsed_s - t0
        if dt < self.recent_s / 2 or len(self._times) < 6:
            return False
        arrivals, completions = sent - sent0, completed - done0
        if arrivals <= 0 or completions > (1 - self.margin) * arrivals:
            return False
        if self._backlog[-1] - self._backlog[0] < self.min_growth:
            return False
        found = trend(self._times, self._backlog, 8)
        rate = (sent - self._first_sent) / max(self._times[-1] - self._times[0], 1e-9)
        return found is not None and found.up(self.margin * rate, self.z)
