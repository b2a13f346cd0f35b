"""Did the server get slower while it was measured? The same rate at the start and at the end of a search.

A capacity search loads a server for minutes; a server whose state grows with use (a queue that keeps
every event, caches, sessions) serves the last probes slower than the first, and a capacity found that
way does not hold over the server's life. `qbench capacity` therefore measures the rate of its first
passing probe once more after the search (`Degradation` compares the two):

    metric      the median service time of the ok requests (process start -> result, the server's own
                work, little moved by queueing at a passing rate); the median latency from the actual send
                where the protocol has no start event (plain HTTP)
    change      end / start - 1, with a 95% bootstrap interval (medians of 1,000 resamples of each run)
    degraded    the interval is above 0 and the change is at least `MATERIAL` (5%)

The answer then says so beside the capacity ("service time +16% over this search: the server degrades
with use; run `qbench soak` before provisioning"), and the confirmation runs after this measurement, on
the server as the search left it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run.records import RequestRecord

MATERIAL = 0.05  # a change under 5% is not worth a warning
RESAMPLES = 1000
MIN_REQUESTS = 10


@dataclass(frozen=True)
class Degradation:
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

    @property
    def degraded(self) -> bool:
        return self.low > 0 and self.change >= MATERIAL

    def text(self) -> str:
        """The finding in words, beside the answer."""
        head = (f"{self.metric} {self.change:+.0%} over this search (95% CI {self.low:+.0%} to "
                f"{self.high:+.0%}; p50 {self.start_s * 1000:.3g} -> {self.end_s * 1000:.3g} ms at "
                f"{self.rate_rps:.3g} req/s)")
        if self.degraded:
            return (f"{head}: the server degrades with use; the answer was confirmed on the server as the "
                    "search left it, but run `qbench soak` before provisioning")
        return f"{head}: no degradation"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "degraded": self.degraded}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Degradation | None:
        if not data:
            return None
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def compare(rate: float, before: Sequence[RequestRecord], after: Sequence[RequestRecord],
            seed: int = 0) -> Degradation | None:
    """`before` and `after` at `rate` (None: too few ok requests in either to say)."""
    metric, a, b = _values(before, after)
    if a.size < MIN_REQUESTS or b.size < MIN_REQUESTS or float(np.median(a)) <= 0:
        return None
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, (RESAMPLES, a.size)), axis=1)
    mb = np.median(rng.choice(b, (RESAMPLES, b.size)), axis=1)
    ratios = mb / np.maximum(ma, 1e-12) - 1
    start, end = float(np.median(a)), float(np.median(b))
    return Degradation(rate, metric, start, end, end / start - 1, float(np.percentile(ratios, 2.5)),
                       float(np.percentile(ratios, 97.5)))


def _values(before: Sequence[RequestRecord], after: Sequence[RequestRecord]
            ) -> tuple[str, np.ndarray, np.ndarray]:
    def ok(records: Sequence[RequestRecord], name: str) -> np.ndarray:
        values = [getattr(r, name) for r in records if r.outcome == "ok" and not r.warmup]
        return np.array([v for v in values if v is not None], dtype=np.float64)

    service_a, service_b = ok(before, "service_s"), ok(after, "service_s")
    if service_a.size >= MIN_REQUESTS and service_b.size >= MIN_REQUESTS:
        return "service time", service_a, service_b
    return "latency from the send", ok(before, "latency_from_send_s"), ok(after, "latency_from_send_s")
