"""Metastable near its capacity? Service time that rises with the queue, and the rate a burst cannot tip.

A server whose own work slows down as requests pile up (a Python event loop busier with every waiting
connection, a GIL shared with the queue's bookkeeping) holds a rate only until a burst grows its queue:
each request waiting makes the service slower, the slower service grows the queue, and the server
collapses at a rate it held for a minute. A Gradio 6.31 `gr.ChatInterface` (four at a time, ~130 ms)
held 24 req/s for 60 s and collapsed in the next 60 s at that rate, its service time rising 0.14 ->
0.25 s with the queue. The search's probes already show it: the ones above the capacity ran with a queue.

    slowdown    per ok request (the runs given: the search's open-loop probes), its service time
                against the requests waiting when it started (sent, not started); the least-squares
                slope over block means of the requests ordered by that count (`steady.trend`), with its
                standard error, and the median service with fewer than `FEW` waiting (the base)
    rising      the slope is certain (> Z standard errors) and material: at the queue the SLO allows
                (capacity x the latency bound: the most that can wait and still start within it) the
                service is at least `MATERIAL` (5%) slower than the base
    throughput  what the user loses: per request that started behind a queue (the server saturated),
                the rate the server served at then, the requests running when it started over its
                service time, against the requests waiting; a batched function's service time rises
                with the queue because its batches fill, and its throughput rises with them
    metastable  rising, and the throughput certainly falls with the queue (> Z standard errors): only
                then is there a tipping point. Rising service with throughput that holds or rises (a
                batched function) is said, and not metastable
    concurrency how many ran at once: the median count of requests running when one started
    tipping     at rate r, the waiting count past which the server completes fewer than r per second:
                concurrency / (base + slope x q) = r, q = (concurrency / r - base) / slope. A burst that
                pushes the queue there does not drain: the server collapses
    safe rate   the highest rate whose tipping point is `BURST_WAITS` (3) times the queue the SLO allows
                (r x bound): a burst must pile up three SLO bounds' worth of arrivals, far past what a
                Poisson queue meeting the bound reaches, to tip it. Solving
                concurrency / r - base = BURST_WAITS x bound x slope x r gives
                r = (-base + sqrt(base^2 + 4 a concurrency)) / (2 a), a = BURST_WAITS x bound x slope

A plain HTTP server sends no start events: its requests are read from their completions instead, as
one server (`_departures`): a request already sent when the one before it completed took the gap
between the two completions, behind the requests then in the server less itself. Exact for one worker
(the issue's 50 ms x (1 + 0.05 x waiting) server read +2.5 ms a request waiting, 51 ms base); a server
of several workers that slows with its queue is not seen this way (its gaps are a share of a service
time once saturated, arrival gaps before), and one that does not slow, batched or not, is never
called metastable.

`qbench capacity` lowers its answer to the safe rate when a metastable server's answer is above it, confirms
it with repeated sustained runs (different Poisson seeds), and names the `max_size` under the tipping
point that keeps a burst from reaching it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run import RequestRecord, Trend, Z, trend

FEW = 2  # a request that started behind fewer than this many waiting gives the base service time
MATERIAL = 0.05  # service at the SLO's queue this much slower than the base: rising
BURST_WAITS = 3.0  # the safe rate's tipping point is this many times the queue the SLO allows
MIN_REQUESTS = 50
MIN_QUEUED = 20  # requests that started behind at least FEW waiting: without them there is no slope
CAP_SHARE = 0.8  # the advised max_size: this share of the tipping point


@dataclass(frozen=True)
class Metastability:
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
        """The rate the server serves at certainly falls as the queue grows (unknown, in a finding written
        before it was measured: taken as falling, as that finding was judged)."""
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
        """The finding in words, at the rate answered."""
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

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Metastability | None:
        if not isinstance(data, dict) or not isinstance(data.get("slope"), dict):
            return None
        names = set(cls.__dataclass_fields__) - {"slope", "throughput"}
        served = data.get("throughput")
        return cls(**{k: v for k, v in data.items() if k in names}, slope=Trend(**data["slope"]),
                   throughput=Trend(**served) if isinstance(served, dict) else None)


def queue_slowdown(runs: Sequence[Sequence[RequestRecord]], capacity_rps: float, bound_s: float
                   ) -> Metastability | None:
    """Service time against the queue over `runs` (each one run's records), weighed at `capacity_rps`
    under a latency bound of `bound_s` (None: too few requests, or too few that started behind a queue,
    or a protocol without start events)."""
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
    """A server without start events (plain HTTP), read from its departures as one server: a request
    that completed while the one before it completed with it already sent waited for that one, so the
    gap between their completions is the time the server took for it (its service time at one at a
    time; with several workers, its share of one: 1 / the rate served), and it started behind the
    requests then sent and not yet completed, less itself. A request sent after the previous departure
    found the server idle: its gap holds idle time, so it is not counted. Throughput falling with the
    queue is then service (the gap) rising with it: the rate served is one over the gap."""
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
    """(waiting when it started, service time, running when it started) of each measured ok request.
    Running counts every request that had started and not ended, failed ones too: a request a probe
    cut off (stopped early, or at its end) held its slot until the run ended, and leaving it out made
    a saturated server look as if it ran fewer at once, so served less, as its queue grew."""
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
    """When a started request left its slot: its start plus its service, else its completion (a failure
    after it started), else never within the run."""
    if record.started_at_s is not None and record.service_s is not None:
        return float(record.started_at_s) + float(record.service_s)
    return float(record.completed_at_s) if record.completed_at_s is not None else math.inf
