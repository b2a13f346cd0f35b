"""Does a signal drift over a long run? `judge`: a series -> a `Verdict` (flat, growing, falling, bounded,
unsure, short), from its trend's 95% interval under autocorrelation and the change that matters to a user."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from qbench.run.json_values import Readable
from qbench.run.results.serial_trend import SerialTrend, fit

MIN_SAMPLES = 8
HOUR_S, DAY_S = 3600.0, 86400.0
HEADROOM_DAYS = 7.0  # a change that would use up the headroom to a ceiling within this many days matters
Horizon = Literal["day", "run"]


@dataclass(frozen=True)
class Signal:
    """What one series measures, and the change that matters over its horizon."""

    name: str  # "server RSS", "p95 latency"
    key: str  # its field (health.jsonl, or the slice table)
    unit: str  # "B" (bytes, shown in KiB/MiB/GiB), "s", "" (a count), "req/s", "%"
    matters_abs: float  # a change over the horizon at least this large matters...
    matters_share: float = 0.0  # ...or this share of the ceiling ("day") or of the level ("run")
    horizon: Horizon = "day"
    matters_cap: float = math.inf  # the share, at most this (2% of a 2 TiB host is not what matters)
    share_of: Literal["ceiling", "level"] = "ceiling"  # the share is of the ceiling, or of the level

    def matters(self, level: float, ceiling: float | None, latest: float | None = None) -> float:
        """The change over the horizon that matters at `level` below `ceiling` (`latest`: for headroom)."""
        base = ceiling if self.share_of == "ceiling" and self.horizon == "day" else abs(level)
        found = max(self.matters_abs, min(self.matters_share * (base or 0.0), self.matters_cap))
        now = level if latest is None else latest
        if self.horizon == "day" and ceiling is not None and now < ceiling:
            found = min(found, (ceiling - now) / HEADROOM_DAYS)  # reaching it within a week matters
        return found


@dataclass(frozen=True)
class Slope:
    """A slope and its 95% interval, per unit of x."""

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, trend: SerialTrend, scale: float) -> Slope:
        return cls(trend.slope * scale, trend.low * scale, trend.high * scale)

    @property
    def certain(self) -> bool:
        """The interval excludes 0."""
        return self.low > 0 or self.high < 0

    def times(self, factor: float) -> Slope:
        return Slope(self.value * factor, self.low * factor, self.high * factor)


@dataclass(frozen=True)
class Verdict(Readable):
    """One signal's verdict over the steady part of a run."""

    signal: str
    key: str
    unit: str
    kind: str  # "flat", "growing", "falling", "bounded", "unsure" (can't tell yet), "short"
    samples: int  # in the steady part
    steady_from_s: float  # the warm-up cut
    start: float | None = None  # level at the start of the steady part (mean of its first tenth)
    end: float | None = None  # level at the end (mean of the last tenth)
    per_1k: Slope | None = None  # per 1,000 requests finished
    per_hour: Slope | None = None
    bound: float | None = None  # bounded: the level the growth stopped at
    bound_at_requests: float | None = None  # bounded: about where it stopped (requests finished)
    limit: float | None = None  # the ceiling: the stated --limit, else the host's (memory)
    limit_after_requests: float | None = None  # growing: requests until the ceiling at this slope
    limit_after_s: float | None = None  # the same at the run's rate
    horizon: str = "day"  # "day" or "run" (Signal.horizon)
    change: Slope | None = None  # the change over the horizon: a day at the run's rate, or the steady part
    matters: float | None = None  # the change over the horizon that matters
    limit_source: str | None = None  # "--limit", "the host's memory"
    last_half: Slope | None = None  # bounded: the slope after the growth stopped, per 1,000 requests
    more_s: float | None = None  # unsure: about this much more run would tell

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The verdict in one line (console, summary.md)."""
        if self.kind == "short" or self.per_1k is None:
            return f"{self.signal}: too few samples after the warm-up to judge ({self.samples})"
        rate = _slope(self.per_1k, self.unit, "per 1,000 requests")
        level = _amount(self.end or 0.0, self.unit)
        if self.kind == "flat":
            return f"{self.signal}: flat at {level} ({rate}{self._bound_text()})"
        if self.kind == "unsure":
            more = f"; ~{_duration(self.more_s)} more would tell" if self.more_s else ""
            return (f"{self.signal}: can't tell yet at {level} ({rate}{self._projection()}): a change that "
                    f"matters ({self._matters_text()}) is not ruled out{more}")
        if self.kind == "bounded":
            return self._bounded_text(rate)
        after = ""
        if self.bound is not None and self.bound_at_requests is not None:
            after = (f" since ~{self.bound_at_requests:,.0f} requests (after a rise of "
                     f"{_amount(self.bound - (self.start or 0.0), self.unit)} that stopped there)")
        text = (f"{self.signal}: {self.kind}{after} {rate}{self._projection()}; "
                f"{_amount(self.start or 0, self.unit)} -> {level}")
        if self.limit_after_requests is not None and self.limit is not None:
            text += (f"; reaches {_amount(self.limit, self.unit)} ({self.limit_source or 'the limit'}) after "
                     f"~{_count(self.limit_after_requests)} more requests")
            if self.limit_after_s is not None:
                text += f", ~{_duration(self.limit_after_s)} at this rate"
        return text

    def _projection(self) -> str:
        """`, +1.1 GiB an hour, +27 GiB a day at this rate` (day horizon), or over the steady part."""
        if self.change is None:
            return ""
        if self.horizon == "day":
            hour = f", {_amount(self.per_hour.value, self.unit, sign=True)} an hour" if self.per_hour else ""
            return f"{hour}, {_slope(self.change, self.unit, 'a day at this rate')}"
        return f", {_slope(self.change, self.unit, 'over the steady part')}"

    def _matters_text(self) -> str:
        when = "a day" if self.horizon == "day" else "over the run"
        of = f" of {self.limit_source}" if self.horizon == "day" and self.limit_source else ""
        return f"{_amount(self.matters or 0.0, self.unit)} {when}{of}"

    def _bound_text(self) -> str:
        """A flat verdict's evidence: the most it could change over its horizon, against what matters."""
        if self.change is None or self.matters is None:
            return ""
        most = max(abs(self.change.low), abs(self.change.high))
        when = "a day at this rate" if self.horizon == "day" else "over the run"
        return f"; at most {_amount(most, self.unit)} {when}, under the {self._matters_text()} that matters"

    def _bounded_text(self, rate: str) -> str:
        where = f" after ~{self.bound_at_requests:,.0f} requests" if self.bound_at_requests else ""
        bound = self.bound or 0.0
        grew = _amount(bound - (self.start or 0.0), self.unit)
        each = _amount((self.per_1k.value if self.per_1k else 0.0) / 1000, self.unit)
        last = f"; since then {_slope(self.last_half, self.unit, 'per 1,000')}" if self.last_half else ""
        return (f"{self.signal}: bounded: grew {grew} ({rate} on the way up: ~{each} a request, a session "
                f"where each request is a new one), then stopped{where} at ~{_amount(bound, self.unit)}"
                f"{last}: a bound, not a leak")


def judge(signal: Signal, t_s: Sequence[float], requests: Sequence[float], values: Sequence[float | None],
          *, steady_from_s: float, limit: float | None = None, rate_rps: float | None = None,
          limit_source: str | None = None) -> Verdict:
    """The verdict of one series (None values skipped); `limit`: its ceiling; `rate_rps`: the steady rate."""
    keep = [i for i, v in enumerate(values) if v is not None and t_s[i] >= steady_from_s]
    t = np.array([t_s[i] for i in keep], dtype=np.float64)
    x = np.array([requests[i] for i in keep], dtype=np.float64)
    v = np.array([values[i] for i in keep], dtype=np.float64)
    base = Verdict(signal.name, signal.key, signal.unit, "short", len(keep), steady_from_s, limit=limit,
                   horizon=signal.horizon, limit_source=limit_source if limit is not None else None)
    by_x, by_t = (fit(x, v), fit(t, v)) if len(keep) >= MIN_SAMPLES else (None, None)
    if by_x is None or by_t is None:
        return base
    tenth = max(1, v.size // 10)
    start, end = float(np.mean(v[:tenth])), float(np.mean(v[-tenth:]))
    span_s = float(t[-1] - t[0])
    horizon_s = DAY_S if signal.horizon == "day" else span_s
    rate = rate_rps if rate_rps and signal.horizon == "day" else None
    per_1k, per_hour = Slope.of(by_x, 1000.0), Slope.of(by_t, HOUR_S)
    # a day's change at the run's rate: the per-request slope x requests a day where the rate is known
    change = per_1k.times(rate * horizon_s / 1000) if rate else per_hour.times(horizon_s / HOUR_S)
    matters = signal.matters(float(np.mean(v)), limit, end)
    kind = _kind(change, matters)
    verdict = replace(base, kind=kind, start=start, end=end, per_1k=per_1k, per_hour=per_hour, change=change,
                      matters=matters)
    if kind in ("growing", "unsure"):
        bent = _bounded(verdict, t, x, v, matters)
        if bent is not None:
            return bent if bent.kind == "bounded" else _crossing(bent, v, rate_rps)
    if kind == "unsure":
        return replace(verdict, more_s=_more_s(change, matters, span_s, signal.horizon))
    if kind == "growing":
        return _crossing(verdict, v, rate_rps)
    return verdict


def _kind(change: Slope, matters: float) -> str:
    """flat, growing, falling or unsure from the change over the horizon and what matters."""
    if change.high < matters and change.low > -matters:
        return "flat"
    if change.low > 0:
        return "growing"
    if change.high < 0:
        return "falling"
    return "unsure"


def _more_s(change: Slope, matters: float, span_s: float, horizon: str) -> float | None:
    """How much longer a run would narrow the interval to rule a change that matters in or out."""
    half = (change.high - change.low) / 2
    if half <= 0 or span_s <= 0 or matters <= 0:
        return None
    power = 1.5 if horizon == "day" else 0.5
    needed = span_s * (half / (matters / 2)) ** (1 / power)
    return max(needed - span_s, 0.0) if math.isfinite(needed) else None


def _bounded(verdict: Verdict, t: np.ndarray, x: np.ndarray, v: np.ndarray, matters: float) -> Verdict | None:
    """Growth that stopped: "bounded", or "growing" at a slower rate that matters; None when no bend shows."""
    if verdict.change is None or verdict.per_1k is None or verdict.per_1k.value <= 0:
        return None
    split = _break(x, v)
    if split is None:
        return None
    first, last = fit(x[:split], v[:split]), fit(x[split:], v[split:])
    if first is None or last is None:
        return None
    per_horizon = verdict.change.value / (verdict.per_1k.value / 1000)  # requests over the horizon
    if first.low * per_horizon < matters:  # not certainly growing at a rate that matters before
        return None
    stopped = last.low <= 0 <= last.high or max(abs(last.low), abs(last.high)) * per_horizon < matters
    if last.high >= first.low:  # not distinctly slower after the bend: one growth, not two
        return None
    level = float(np.mean(v[split:]))
    reached = np.nonzero(v >= level - 0.1 * (level - float(v[0])))[0]
    at = float(x[reached[0]]) if reached.size else float(x[split])
    since = Slope.of(last, 1000.0)
    if not stopped:  # a rise that stopped, then a slower growth that still matters: judged on the latter
        later = fit(t[split:], v[split:])
        bend = float(np.mean(v[max(split - 2, 0):split + 2]))  # the level where the rise stopped
        return replace(verdict, kind="growing", per_1k=since, change=since.times(per_horizon / 1000),
                       per_hour=Slope.of(later, HOUR_S) if later else verdict.per_hour, bound=bend,
                       bound_at_requests=float(x[split]), last_half=since)
    rising = x <= at
    up = fit(x[rising], v[rising]) if rising.sum() >= MIN_SAMPLES else None  # the cost on the way up
    return replace(verdict, kind="bounded", per_1k=Slope.of(up or first, 1000.0), bound=level,
                   bound_at_requests=at, last_half=since)


def _break(x: np.ndarray, v: np.ndarray, candidates: int = 60) -> int | None:
    """Where a continuous bent line fits `v` best (MIN_SAMPLES each side); None when too short to split."""
    n = v.size
    if n < 2 * MIN_SAMPLES:
        return None
    count = min(candidates, n - 2 * MIN_SAMPLES + 1)
    ks = np.unique(np.linspace(MIN_SAMPLES, n - MIN_SAMPLES, count).astype(int))
    xc = x - x.mean()
    best, best_sse = None, math.inf
    for k in ks:
        design = np.column_stack([np.ones(n), xc, np.maximum(xc - xc[k], 0.0)])
        coef, *_ = np.linalg.lstsq(design, v, rcond=None)
        sse = float(((v - design @ coef) ** 2).sum())
        if sse < best_sse:
            best, best_sse = int(k), sse
    return best


def _crossing(verdict: Verdict, v: np.ndarray, rate_rps: float | None) -> Verdict:
    """A growing signal with a ceiling: requests (and time, at `rate_rps`) until it crosses it."""
    if verdict.limit is None or verdict.per_1k is None or verdict.per_1k.value <= 0:
        return verdict
    left = max(verdict.limit - float(v[-1]), 0.0) / (verdict.per_1k.value / 1000)
    after_s = left / rate_rps if rate_rps else None
    return replace(verdict, limit_after_requests=left, limit_after_s=after_s)


# ---------------------------------------------------------------- units in words


def _scaled(value: float, unit: str) -> tuple[float, str]:
    """`value` in the unit words fit its size: bytes in KiB/MiB/GiB/TiB, seconds under 1 in ms."""
    if unit == "B":
        sizes = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
        return next(((value / size, name) for name, size in sizes if abs(value) >= size), (value, "B"))
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
    return f"{max(seconds / 60, 1):.0f} min"
