"""Does a signal drift over a long run? A verdict per signal, with its interval, from a series of samples.

Each signal (the server's RSS, open files, p95 latency per time slice...) is a series of values at
known points: seconds since the start and requests finished by then. The verdict uses the steady part
only: samples before `steady_from_s` (the warm-up: caches filling, lazy imports) are cut. Over it:

    slope       least squares over 10 block means (qbench.run.results.steady.trend: batch means, since samples
                of one process are autocorrelated), per 1,000 requests (x = requests finished) and per
                hour (x = seconds); its 95% interval is slope +- t(blocks - 2) x standard error
    flat        the interval includes 0, or the change the slope makes over the steady part is below
                the signal's `negligible` change (a few MiB of RSS, one file, 10% of a latency)
    growing     certainly up and not negligible (falling: the same, down)
    bounded     growing over the steady part, but its last half is flat (slope under a quarter of the
                first half's, or negligible): growth that stopped at a bound, reported with the level
                it stopped at and its cost per request on the way up, not as an endless leak
    short       too few samples in the steady part to say (at least 8)

With a `limit` (a Space's memory), a growing signal says when it would cross it: requests left at its
slope, and the time that is at the run's rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from qbench.run.results.steady import Trend, trend

BLOCKS = 10
MIN_SAMPLES = 8
# Two-sided 95% quantiles of Student's t by degrees of freedom (blocks - 2).
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}
STOPPED = 0.25  # a last half growing under this fraction of the first half's slope has stopped


@dataclass(frozen=True)
class Signal:
    """What one series measures: its name, its unit, and a change too small to matter over a run."""

    name: str  # "server RSS", "p95 latency"
    key: str  # its field (health.jsonl, or the slice table)
    unit: str  # "B" (bytes, shown in KiB/MiB/GiB), "s", "" (a count), "req/s", "%"
    negligible_abs: float  # a change below this over the steady part is flat...
    negligible_rel: float = 0.0  # ...or below this fraction of the level


@dataclass(frozen=True)
class Slope:
    """A slope and its 95% interval, per unit of x."""

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, fit: Trend, n: int, scale: float) -> Slope:
        half = T95.get(n - 2, 2.0) * fit.se
        return cls(fit.slope * scale, (fit.slope - half) * scale, (fit.slope + half) * scale)

    @property
    def certain(self) -> bool:
        """The interval excludes 0."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Verdict:
    """One signal's verdict over the steady part of a run (the module docstring's rule)."""

    signal: str
    key: str
    unit: str
    kind: str  # "flat", "growing", "falling", "bounded", "short"
    samples: int  # in the steady part
    steady_from_s: float  # the warm-up cut
    start: float | None = None  # level at the start of the steady part (mean of its first block)
    end: float | None = None  # level at the end (mean of the last block)
    per_1k: Slope | None = None  # per 1,000 requests finished
    per_hour: Slope | None = None
    bound: float | None = None  # bounded: the level the growth stopped at
    bound_at_requests: float | None = None  # bounded: about where it stopped (requests finished)
    limit: float | None = None  # the stated limit, if any
    limit_after_requests: float | None = None  # growing: requests until the limit at this slope
    limit_after_s: float | None = None  # the same at the run's rate

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for key in ("per_1k", "per_hour"):
            if isinstance(values.get(key), Mapping):
                values[key] = Slope(**values[key])
        return cls(**values)

    def text(self) -> str:
        """The verdict in one line (console, summary.md)."""
        head = f"{self.signal}: {self.kind}"
        if self.kind == "short" or self.per_1k is None:
            return f"{self.signal}: too few samples after the warm-up to judge ({self.samples})"
        rate = _slope(self.per_1k, self.unit, "per 1,000 requests")
        if self.kind == "flat":
            return f"{head} at {_amount(self.end or 0, self.unit)} ({rate})"
        if self.per_hour is not None:
            rate += f", {_amount(self.per_hour.value, self.unit, sign=True)} per hour"
        if self.kind == "bounded":
            where = f" after ~{self.bound_at_requests:,.0f} requests" if self.bound_at_requests else ""
            bound = self.bound or 0.0
            grew = _amount(bound - (self.start or 0.0), self.unit)
            each = _amount(self.per_1k.value / 1000, self.unit)
            return (f"{head}: grew {grew} ({rate} on the way up: ~{each} a request, a session where each "
                    f"request is a new one), then stopped{where} at ~{_amount(bound, self.unit)}: a bound, "
                    "not a leak")
        text = f"{head} {rate}; {_amount(self.start or 0, self.unit)} -> {_amount(self.end or 0, self.unit)}"
        if self.limit_after_requests is not None and self.limit is not None:
            text += (f"; reaches {_amount(self.limit, self.unit)} after ~{_count(self.limit_after_requests)} "
                     f"more requests")
            if self.limit_after_s is not None:
                text += f", ~{_duration(self.limit_after_s)} at this rate"
        return text


def judge(signal: Signal, t_s: Sequence[float], requests: Sequence[float], values: Sequence[float | None],
          *, steady_from_s: float, limit: float | None = None, rate_rps: float | None = None) -> Verdict:
    """The verdict of one series (None values: not measured, skipped)."""
    keep = [i for i, v in enumerate(values) if v is not None and t_s[i] >= steady_from_s]
    t = np.array([t_s[i] for i in keep], dtype=np.float64)
    x = np.array([requests[i] for i in keep], dtype=np.float64)
    v = np.array([values[i] for i in keep], dtype=np.float64)
    base = Verdict(signal.name, signal.key, signal.unit, "short", len(keep), steady_from_s, limit=limit)
    per_req = _fit(x, v, 1000.0)
    if len(keep) < MIN_SAMPLES or per_req is None:
        return base
    start, end = float(np.mean(v[: max(1, len(v) // BLOCKS)])), float(np.mean(v[-max(1, len(v) // BLOCKS):]))
    per_hour = _fit(t, v, 3600.0)
    change = per_req.value / 1000 * float(x[-1] - x[0])
    floor = max(signal.negligible_abs, signal.negligible_rel * abs(float(np.mean(v))))
    kind = "flat"
    if per_req.certain and abs(change) >= floor:
        kind = "growing" if per_req.value > 0 else "falling"
    verdict = Verdict(signal.name, signal.key, signal.unit, kind, len(keep), steady_from_s, start, end,
                      per_req, per_hour, limit=limit)
    if kind == "growing":
        verdict = _bounded(verdict, x, v, floor) or _crossing(verdict, x, v, rate_rps)
    return verdict


def _fit(x: np.ndarray, v: np.ndarray, scale: float) -> Slope | None:
    fit = trend(x, v, blocks=BLOCKS)
    return None if fit is None else Slope.of(fit, min(BLOCKS, x.size // 2), scale)


def _bounded(verdict: Verdict, x: np.ndarray, v: np.ndarray, floor: float) -> Verdict | None:
    """Growth that stopped: the first half grows, the last half does not (module docstring)."""
    half = v.size // 2
    if half < MIN_SAMPLES:
        return None
    first, last = _fit(x[:half], v[:half], 1000.0), _fit(x[half:], v[half:], 1000.0)
    if first is None or last is None or not first.certain or first.value <= 0:
        return None
    last_change = last.value / 1000 * float(x[-1] - x[half])
    if last.value > STOPPED * first.value and last_change >= floor:
        return None
    level = float(np.mean(v[half:]))
    reached = np.nonzero(v >= level - 0.1 * (level - float(v[0])))[0]
    at = float(x[reached[0]]) if reached.size else None
    rising = x <= at if at is not None else np.zeros(x.size, dtype=bool)
    up = _fit(x[rising], v[rising], 1000.0) if rising.sum() >= MIN_SAMPLES else None  # the cost on the way up
    return replace(verdict, kind="bounded", per_1k=up or first, bound=level, bound_at_requests=at)


def _crossing(verdict: Verdict, x: np.ndarray, v: np.ndarray, rate_rps: float | None) -> Verdict:
    """A growing signal with a limit: requests (and time, at `rate_rps`) until it crosses it."""
    if verdict.limit is None or verdict.per_1k is None or verdict.per_1k.value <= 0:
        return verdict
    left = max(verdict.limit - float(v[-1]), 0.0) / (verdict.per_1k.value / 1000)
    after_s = left / rate_rps if rate_rps else None
    return replace(verdict, limit_after_requests=left, limit_after_s=after_s)


# ---------------------------------------------------------------- units in words


def _scaled(value: float, unit: str) -> tuple[float, str]:
    """`value` in the unit words fit its size: bytes in KiB/MiB/GiB, seconds under 1 in ms."""
    if unit == "B":
        return next(((value / size, name) for name, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
                     if abs(value) >= size), (value, "B"))
    if unit == "s" and abs(value) < 1:
        return value * 1000, "ms"
    return value, unit


def _amount(value: float, unit: str, sign: bool = False) -> str:
    number, name = _scaled(value, unit)
    return f"{number:{'+' if sign else ''}.3g}{(' ' + name) if name else ''}"


def _slope(slope: Slope, unit: str, per: str) -> str:
    """`+100 MiB per 1,000 requests (95% CI 98 to 102)`: the interval in the slope's own unit."""
    _, name = _scaled(slope.value, unit)
    scale = slope.value / _scaled(slope.value, unit)[0] if slope.value else 1.0
    tail = f" {name}" if name else ""
    return (f"{_amount(slope.value, unit, sign=True)} {per} "
            f"(95% CI {slope.low / scale:.3g} to {slope.high / scale:.3g}{tail})")


def _count(n: float) -> str:
    for name, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {name}"
    return f"{n:.0f}"


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
