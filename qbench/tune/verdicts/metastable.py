"""Metastable near capacity? Service time against the queue over a search's probes -> Metastability: the
tipping point and the safe rate a burst cannot tip. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run import ReadableOrNone, RequestRecord, Trend, Z, trend

FEW = 2  # a request that started behind fewer than this many waiting gives the base service time
MATERIAL = 0.05  # service at the SLO's queue this much slower than the base: rising
BURST_WAITS = 3.0  # the safe rate's tipping point is this many times the queue the SLO allows
MIN_REQUESTS = 50
MIN_QUEUED = 20  # requests that started behind at least FEW waiting: without them there is no slope
CAP_SHARE = 0.8  # the advised max_size: this share of the tipping point


@dataclass(frozen=True)
class Metastability(ReadableOrNone):
    """How the service time rose with the queue over the runs given, and what follows for a rate."""

    base_s: float  # median service time with fewer than FEW waiting
    slope: Trend  # service seconds added per request waiting
    concurrency: int  # requests running at once (median when one started)
    requests: int  # ok requests with a service time the finding rests on
    max_waiting: int  # the longest queue a request started behind
    capacity_rps: float  # the rate the finding was weighed at (the search's answer)
    bound_s: float  # the SLO's latency bound
    throughput: Trend | None = None  # req/s served per request waiting, the server saturated (None: unknown)
    departures: bool = False  # read from the gaps between completions (no start events: plain HTTP)

    @property
    def rising(self) -> bool:
        """The service time certainly rises with the queue, by MATERIAL or more at the SLO's queue."""
        at_slo = self.capacity_rps * self.bound_s
        return self.slope.up(MATERIAL * self.base_s / max(at_slo, 1.0), Z)

    @property
    def throughput_falls(self) -> bool:
        """The rate served certainly falls as the queue grows (unknown, in an older finding: falling)."""
        return self.throughput is None or self.throughput.slope < -Z * self.throughput.se

    @property
    def metastable(self) -> bool:
        """Service rising with the queue and throughput falling with it: a burst can tip the server."""
        return self.rising and self.throughput_falls

    def tipping(self, rate_rps: float) -> float | None:
        """Waiting count past which the server completes fewer than `rate_rps` (None: never)."""
        if self.slope.slope <= 0:
            return None
        return max((self.concurrency / rate_rps - self.base_s) / self.slope.slope, 0.0)

    @property
    def safe_rps(self) -> float | None:
        """The highest rate whose tipping point is BURST_WAITS x rate x bound (None: not metastable)."""
        if not self.metastable:
            return None
        a = BURST_WAITS * self.bound_s * self.slope.slope
        return (-self.base_s + math.sqrt(self.base_s**2 + 4 * a * self.concurrency)) / (2 * a)

    def max_size(self, rate_rps: float) -> int | None:
        """A queue cap under the tipping point at `rate_rps` (None: no tipping point)."""
        q = self.tipping(rate_rps)
        return None if q is None else max(1, int(CAP_SHARE * q))

    def text(self, rate_rps: float) -> str:
        what = "the time between completions" if self.departures else "service time"
        basis = (", read from its completions: the server sends no start events" if self.departures
                 else f", {self.concurrency} at a time")
        head = (f"{what} rises with the queue: {self.slope.slope * 1000:+.2g} ms per request "
                f"waiting (± {self.slope.se * 1000:.2g}; {self.base_s * 1000:.3g} ms with none waiting"
                f"{basis}, {self.requests} requests, up to {self.max_waiting} waiting)")
        if not self.rising:
            return f"{head}: not enough to matter at the SLO's queue"
        if not self.metastable:
            assert self.throughput is not None
            served = self.throughput.text(" req/s", 2)
            return (f"{head}, but the server's throughput does not fall with it ({served} per request "
                    "waiting: a batched function's batches fill): not metastable")
        tipping = self.tipping(rate_rps)
        cap = self.max_size(rate_rps)
        setting = f"cap its queue at {cap} waiting" if self.departures else f"set max_size={cap}"
        return (f"{head}: metastable; at {rate_rps:.3g} req/s a burst past about {tipping or 0:.0f} waiting "
                f"does not drain and the server collapses; {setting} so no burst reaches it")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rising": self.rising, "metastable": self.metastable,
                "safe_rps": self.safe_rps}


def queue_slowdown(runs: Sequence[Sequence[RequestRecord]], capacity_rps: float, bound_s: float
                   ) -> Metastability | None:
    """Service time against the queue over `runs` (each one run's records), weighed at `capacity_rps` under a
    latency bound of `bound_s` (None: too few requests, or too few behind a queue)."""
    waiting: list[int] = []
    service: list[float] = []
    running: list[int] = []
    # a plain HTTP server sends no start events: then each request is read from the departures
    departures = not any(r.started_at_s is not None for records in runs for r in records)
    per_request = _departures if departures else _started
    for records in runs:
        w, s, r = per_request(records)
        waiting += w
        service += s
        running += r
    q, s_, n = np.array(waiting), np.array(service), np.array(running, dtype=np.float64)
    if q.size < MIN_REQUESTS or np.count_nonzero(q >= FEW) < MIN_QUEUED or np.count_nonzero(q < FEW) < 10:
        return None
    slope = trend(q, s_)
    if slope is None:
        return None
    saturated = (q >= 1) & (s_ > 0)  # a request waited: every slot was busy when this one started
    served = trend(q[saturated], n[saturated] / s_[saturated])
    return Metastability(float(np.median(s_[q < FEW])), slope, max(1, round(float(np.median(running)))),
                         int(q.size), int(q.max()), capacity_rps, bound_s, served, departures)


def _departures(records: Sequence[RequestRecord]) -> tuple[list[int], list[float], list[int]]:
    """(waiting, service, 1) per request of a server without start events, from its completion gaps."""
    sends = np.sort([float(r.sent_at_s) for r in records if r.sent_at_s is not None])
    done = sorted(((float(r.completed_at_s), r) for r in records
                   if r.sent_at_s is not None and r.completed_at_s is not None), key=lambda pair: pair[0])
    waiting: list[int] = []
    service: list[float] = []
    for before, ((previous, _), (end, record)) in enumerate(itertools.pairwise(done)):
        if not record.ok or record.warmup or float(record.sent_at_s or 0) > previous:
            continue
        in_system = int(np.searchsorted(sends, previous, side="right")) - (before + 1)
        waiting.append(max(in_system - 1, 0))
        service.append(end - previous)
    return waiting, service, [1] * len(service)


def _started(records: Sequence[RequestRecord]) -> tuple[list[int], list[float], list[int]]:
    """(waiting, service, running) when each measured ok request started; running counts failures too."""
    sent = [r for r in records if r.sent_at_s is not None]
    ok = [r for r in sent if r.ok and not r.warmup and r.started_at_s is not None and r.service_s is not None]
    if not ok:
        return [], [], []
    sends = np.sort([float(r.sent_at_s) for r in sent if r.sent_at_s is not None])
    starts = np.sort([r.started_at_s if r.started_at_s is not None else math.inf for r in sent])
    began = np.sort([float(r.started_at_s) for r in sent if r.started_at_s is not None])
    ended = np.sort([_ended(r) for r in sent if r.started_at_s is not None])
    at = np.array([float(r.started_at_s) for r in ok if r.started_at_s is not None])
    waiting = np.searchsorted(sends, at, side="right") - np.searchsorted(starts, at, side="right")
    running = np.searchsorted(began, at, side="right") - np.searchsorted(ended, at, side="right")
    service = [float(r.service_s) for r in ok if r.service_s is not None]
    return [int(x) for x in waiting], service, [int(x) for x in running]


def _ended(record: RequestRecord) -> float:
    """When a started request left its slot: start + service, else its completion, else never (inf)."""
    if record.started_at_s is not None and record.service_s is not None:
        return float(record.started_at_s) + float(record.service_s)
    return float(record.completed_at_s) if record.completed_at_s is not None else math.inf
