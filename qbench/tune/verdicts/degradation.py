"""Did the server get slower while measured? A capacity search's first passing rate run again after it ->
Degradation (degraded, no degradation, inconclusive). Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run import ReadableOrNone, RequestRecord, start_groups

MATERIAL = 0.05  # a slowdown under 5% is not worth a warning, one the data cannot exclude is not "none"
RESAMPLES = 1000
MIN_REQUESTS = 10
MIN_PER_SIZE = 3  # requests of one batch size in each run for that size to count
BATCH_TOL_S = 0.005  # process_starts within this of a batch's first: the same batch


@dataclass(frozen=True)
class Change:
    """One metric's medians at the start and the end, the relative change and its 95% interval."""

    start_s: float
    end_s: float
    change: float  # end / start - 1
    low: float
    high: float

    @property
    def degraded(self) -> bool:
        return self.low > 0 and self.change >= MATERIAL

    @property
    def excluded(self) -> bool:
        """A slowdown of MATERIAL or more is outside the interval."""
        return self.high < MATERIAL

    def text(self, name: str) -> str:
        return (f"{name} {self.change:+.0%} (95% CI {self.low:+.0%} to {self.high:+.0%}; p50 "
                f"{self.start_s * 1000:.3g} -> {self.end_s * 1000:.3g} ms)")


@dataclass(frozen=True)
class Degradation(ReadableOrNone):
    """The same rate measured at the start and at the end of a search."""

    rate_rps: float
    metric: str  # "service time" or "latency from the send"
    start_s: float  # median at the start
    end_s: float  # median at the end
    change: float  # end / start - 1
    low: float  # 95% interval of the change
    high: float
    start_probe: str = ""  # run folders of the two probes
    end_probe: str = ""
    latency: Change | None = None  # the median latency at the same rate (None: the metric is latency)
    requests_between: int = 0  # ok requests served from the start probe to the end one (0: not counted)
    note: str = ""  # why the latency was not compared ("" when it was, or the metric is latency)

    @property
    def service(self) -> Change:
        return Change(self.start_s, self.end_s, self.change, self.low, self.high)

    @property
    def changes(self) -> list[tuple[str, Change]]:
        named = [(self.metric, self.service)]
        return named + ([("latency", self.latency)] if self.latency is not None else [])

    @property
    def degraded(self) -> bool:
        return any(c.degraded for _, c in self.changes)

    @property
    def verdict(self) -> str:
        """'degraded', 'no degradation' (a +MATERIAL slowdown excluded) or 'inconclusive'."""
        if self.degraded:
            return "degraded"
        return "no degradation" if all(c.excluded for _, c in self.changes) else "inconclusive"

    def slope_s(self) -> float | None:
        """Metric seconds added per request served between the probes (None: no degradation or count)."""
        if not self.service.degraded or self.requests_between <= 0:
            return None
        return (self.end_s - self.start_s) / self.requests_between

    def rate_after(self, rate: float, more: float) -> float | None:
        """About what `rate` becomes after `more` requests served, ageing linearly (None: it does not age)."""
        slope = self.slope_s()
        if slope is None or self.end_s <= 0:
            return None
        return rate * self.end_s / (self.end_s + slope * more)

    def use_text(self, rate: float, held: bool = True) -> str | None:
        """The answer as a function of use, in words (None: no ageing); `held`: a sustained run held it."""
        slope = self.slope_s()
        if slope is None:
            return None
        now = "holds now" if held else "is the answer now (no sustained run held it)"
        later = []
        for label, seconds in (("10 minutes", 600.0), ("an hour", 3600.0), ("a day", 86400.0)):
            after = self.rate_after(rate, rate * seconds)
            if after is not None:
                later.append(f"after {label} more ({rate * seconds:,.0f} requests) about {after:.2g} req/s")
        return (f"{self.growth_text()}; {rate:.3g} req/s {now}, and if it keeps ageing "
                f"so at that rate: {'; '.join(later)}. Restart it, or run `qbench soak`, before you "
                "provision for one number")

    def growth_text(self) -> str:
        """How it aged over the search, in words ('' when it did not, or use is not counted)."""
        slope = self.slope_s()
        if slope is None:
            return ""
        return (f"the app ages with use: its {self.metric} grew {self.start_s * 1000:.3g} -> "
                f"{self.end_s * 1000:.3g} ms over the search's {self.requests_between:,} requests "
                f"(+{slope * 1e6:.3g} us per request)")

    def text(self) -> str:
        head = (f"{' and '.join(c.text(name) for name, c in self.changes)} over this search at "
                f"{self.rate_rps:.3g} req/s" + (f" ({self.note})" if self.note else ""))
        verdict = self.verdict
        if verdict == "degraded":
            return (f"{head}: the server degrades with use; the answer was confirmed on the server as the "
                    "search left it, but run `qbench soak` before provisioning")
        if verdict == "inconclusive":
            worst = max(c.high for _, c in self.changes)
            return (f"{head}: inconclusive: the runs do not exclude a slowdown of {MATERIAL:.0%} or more "
                    f"(up to {worst:+.0%}); run `qbench soak` to know")
        return f"{head}: no degradation (a slowdown of {MATERIAL:.0%} or more is excluded)"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "degraded": self.degraded, "verdict": self.verdict}


def compare(rate: float, before: Sequence[RequestRecord], after: Sequence[RequestRecord],
            seed: int = 0, latency_too: bool = True) -> Degradation | None:
    """`before` against `after` at `rate` (None: too few ok requests); `latency_too` False near the edge."""
    rng = np.random.default_rng(seed)
    metric, a, b = _values(before, after)
    found = _change(a, b, rng)
    if found is None:
        return None
    latency = None
    if metric == "service time" and latency_too:
        latency = _change({0: _ok(before, "latency_s")}, {0: _ok(after, "latency_s")}, rng)
    return Degradation(rate, metric, found.start_s, found.end_s, found.change, found.low, found.high,
                       latency=latency)


def unjudged(rate: float, before: Sequence[RequestRecord], after: Sequence[RequestRecord]) -> str:
    """Why `compare` found nothing to say of `before` and `after` at `rate`, in words."""
    metric, by_a, by_b = _values(before, after)
    a, b = np.concatenate(list(by_a.values())), np.concatenate(list(by_b.values()))
    if a.size >= MIN_REQUESTS and b.size >= MIN_REQUESTS:
        return f"not judged: the median {metric} at the start is 0"
    return (f"not judged: too few ok requests at {rate:.3g} req/s to compare ({a.size} at the start, "
            f"{b.size} at the end; {MIN_REQUESTS} each needed): longer probes would judge it")


def _change(a: Mapping[int, np.ndarray], b: Mapping[int, np.ndarray],
            rng: np.random.Generator) -> Change | None:
    """Change of the medians (by batch size or pooled), 95% bootstrap interval (None: too few, median 0)."""
    sizes = [k for k in sorted(a.keys() & b.keys()) if min(a[k].size, b[k].size) >= MIN_PER_SIZE]
    weights = np.array([min(a[k].size, b[k].size) for k in sizes], dtype=np.float64)
    if len(sizes) <= 1 or weights.sum() < MIN_REQUESTS:
        a, b = _pooled(a), _pooled(b)
        if min(a[0].size, b[0].size) < MIN_REQUESTS:
            return None
        sizes, weights = [0], np.ones(1)

    def weighted(runs: Mapping[int, np.ndarray], draw: bool) -> np.ndarray:
        medians = [np.median(rng.choice(runs[k], (RESAMPLES, runs[k].size)), axis=1) if draw
                   else np.full(1, np.median(runs[k])) for k in sizes]
        return np.average(np.vstack(medians), axis=0, weights=weights)

    start, end = float(weighted(a, False)[0]), float(weighted(b, False)[0])
    if start <= 0:
        return None
    start_draws = weighted(a, True)  # drawn before the end's: one seed, one draw order
    ratios = weighted(b, True) / np.maximum(start_draws, 1e-12) - 1
    return Change(start, end, end / start - 1, float(np.percentile(ratios, 2.5)),
                  float(np.percentile(ratios, 97.5)))


def _pooled(runs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
    return {0: np.concatenate([*runs.values(), np.empty(0)])}


def _ok(records: Sequence[RequestRecord], name: str) -> np.ndarray:
    values = [getattr(r, name) for r in records if r.outcome == "ok" and not r.warmup]
    return np.array([v for v in values if v is not None], dtype=np.float64)


def batch_sizes(records: Sequence[RequestRecord], tol_s: float = BATCH_TOL_S) -> list[int]:
    """Per record, its batch's size: `server_batch_size`, else starts within `tol_s` (0: no start)."""
    if records and all(r.server_batch_size for r in records):
        return [int(r.server_batch_size or 0) for r in records]
    sizes = [0] * len(records)
    starts = ((r.started_at_s, i) for i, r in enumerate(records) if r.started_at_s is not None)
    for group in start_groups(starts, tol_s):
        for i in group:
            sizes[i] = len(group)
    return sizes


def _service(r: RequestRecord) -> float | None:
    """Service time on the server's clock (`server_total_s`) where it says it, else the client's."""
    return r.server_total_s if r.server_total_s is not None else r.service_s


def _by_batch(records: Sequence[RequestRecord]) -> dict[int, np.ndarray]:
    ok = [r for r in records if r.outcome == "ok" and not r.warmup and _service(r) is not None]
    by_size: dict[int, list[float]] = {}
    for r, size in zip(ok, batch_sizes(ok), strict=True):
        by_size.setdefault(size, []).append(float(_service(r) or 0.0))
    return {k: np.array(v, dtype=np.float64) for k, v in by_size.items()}


def _values(before: Sequence[RequestRecord], after: Sequence[RequestRecord]
            ) -> tuple[str, dict[int, np.ndarray], dict[int, np.ndarray]]:
    """The metric and its values per batch size, in each run (one size, 0, for latency from the send)."""
    service_a, service_b = _by_batch(before), _by_batch(after)
    if (sum(v.size for v in service_a.values()) >= MIN_REQUESTS
            and sum(v.size for v in service_b.values()) >= MIN_REQUESTS):
        return "service time", service_a, service_b
    return ("latency from the send", {0: _ok(before, "latency_from_send_s")},
            {0: _ok(after, "latency_from_send_s")})
