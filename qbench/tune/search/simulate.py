"""A discrete-event simulation of the reference server's queue (pure: no I/O, no clock): arrivals -> admission
-> one FIFO per concurrency group -> batches served in l(b, k) x lognormal noise; checked against the server
by tests/tune/e2e/test_simulate_differential.py. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from qbench.tune.search.batch_model import BatchFit


@dataclass(frozen=True)
class SimFunction:
    """One queued function: its group, limit, batching and service-time model."""

    fit: BatchFit
    group: str = "default"
    limit: int | None = 1  # the function's concurrency_limit (None: unlimited)
    batch: bool = False
    max_batch_size: int = 1
    batch_wait_s: float = 0.0
    sigma: float = 0.0  # lognormal log-spread of the service time (0: deterministic)
    share: float = 1.0  # fraction of the arrivals that call this function
    exponential: bool = False  # exponential service times of mean l(b, k) instead (M/M/c checks)


@dataclass(frozen=True)
class SimServer:
    functions: tuple[SimFunction, ...]
    max_threads: int = 40
    max_size: int | None = None  # waiting events across groups (None: unbounded)


@dataclass(frozen=True)
class OpenArrivals:
    offsets: np.ndarray  # intended send times, seconds from start, sorted


@dataclass(frozen=True)
class ClosedArrivals:
    users: int
    think_s: float = 0.0
    exponential_think: bool = False
    duration_s: float = 10.0  # no request is sent after this
    start_offsets: np.ndarray | None = None  # per user (None: all at 0)


Arrivals = OpenArrivals | ClosedArrivals


@dataclass
class SimResult:
    """What one simulated run gives, in the figures a sweep point is judged by."""

    sent: int
    completed: int
    rejected: int
    timed_out: int  # completed later than `timeout_s` after its send (the client gave up)
    latencies_s: np.ndarray  # ok requests, send -> completion
    waits_s: np.ndarray  # ok requests, send -> dispatch
    services_s: np.ndarray  # ok requests, dispatch -> completion (their batch's service time)
    batch_sizes: list[int] = field(default_factory=list)
    span_s: float = 0.0

    @property
    def throughput_rps(self) -> float:
        return self.completed / self.span_s if self.span_s > 0 else 0.0

    @property
    def goodput_rps(self) -> float:
        return self.latencies_s.size / self.span_s if self.span_s > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return (self.rejected + self.timed_out) / self.sent if self.sent else 0.0

    def percentile(self, q: float) -> float | None:
        return float(np.percentile(self.latencies_s, q)) if self.latencies_s.size else None

    @property
    def mean_latency_s(self) -> float | None:
        return float(self.latencies_s.mean()) if self.latencies_s.size else None

    @property
    def mean_wait_s(self) -> float | None:
        return float(self.waits_s.mean()) if self.waits_s.size else None

    @property
    def mean_batch(self) -> float:
        return float(np.mean(self.batch_sizes)) if self.batch_sizes else 0.0


# ---------------------------------------------------------------- the queue rules


@dataclass
class _Event:
    index: int  # request number
    fn: int
    joined_s: float
    started_s: float = math.nan


@dataclass
class _Group:
    limit: int | None
    waiting: deque[_Event] = field(default_factory=deque)
    running: int = 0

    @property
    def has_capacity(self) -> bool:
        return self.limit is None or self.running < self.limit


class QueueRules:
    """Gradio's queue rules as reference_server/queue/queue.py implements them."""

    def __init__(self, server: SimServer, rng: np.random.Generator) -> None:
        self.server = server
        self.rng = rng
        self.groups: dict[str, _Group] = {}
        self.running = 0

    @property
    def waiting(self) -> int:
        return sum(len(g.waiting) for g in self.groups.values())

    def admit(self, event: _Event) -> bool:
        """Queue the event (False: max_size reached); its group's limit drops to the function's if lower."""
        if self.server.max_size is not None and self.waiting >= self.server.max_size:
            return False
        fn = self.server.functions[event.fn]
        group = self.groups.get(fn.group)
        if group is None:
            group = self.groups[fn.group] = _Group(fn.limit)
        elif fn.limit is not None and (group.limit is None or fn.limit < group.limit):
            group.limit = fn.limit
        group.waiting.append(event)
        return True

    def workers(self, fn: SimFunction) -> int:
        """k for the service model: the jobs the function's group may run at once."""
        limit = self.groups[fn.group].limit
        return max(1, min(limit if limit is not None else self.server.max_threads, self.server.max_threads))

    def pick(self, now: float) -> tuple[str, list[_Event]] | float | None:
        """A job to start now, else the time a batch wait expires (the earliest), else None."""
        eligible = [name for name, g in self.groups.items() if g.waiting and g.has_capacity]
        if len(eligible) > 1:
            eligible = [eligible[i] for i in self.rng.permutation(len(eligible))]
        due: float | None = None
        for name in eligible:
            taken = self._take(self.groups[name], now)
            if isinstance(taken, list):
                return name, taken
            due = taken if due is None else min(due, taken)
        return due

    def _take(self, group: _Group, now: float) -> list[_Event] | float:
        head = group.waiting[0]
        fn = self.server.functions[head.fn]
        if not fn.batch:
            group.waiting.popleft()
            return [head]
        same = (e for e in group.waiting if e.fn == head.fn)
        members = list(itertools.islice(same, fn.max_batch_size))  # not the whole queue: overloads grow it
        if len(members) < fn.max_batch_size and fn.batch_wait_s > 0 and now < head.joined_s + fn.batch_wait_s:
            return head.joined_s + fn.batch_wait_s
        if all(group.waiting[i] is e for i, e in enumerate(members)):  # the queue's head (one function)
            for _ in members:
                group.waiting.popleft()
        else:
            taken = {id(e) for e in members}
            group.waiting = deque(e for e in group.waiting if id(e) not in taken)
        return members


# ---------------------------------------------------------------- the simulation

_ARRIVE, _DONE, _WAKE = 0, 1, 2
Push = Callable[[float, int, object], None]


def simulate(
    server: SimServer,
    arrivals: Arrivals,
    *,
    timeout_s: float = math.inf,
    seed: int = 0,
    max_requests: int = 200_000,
) -> SimResult:
    """Run the queue over `arrivals`; requests unfinished `timeout_s` after the last send are timed out."""
    rng = np.random.default_rng(seed)
    queue = QueueRules(server, rng)
    shares = np.array([f.share for f in server.functions], dtype=np.float64)
    heap, tally = _Heap(), _Tally()
    closed, offsets = _first_sends(arrivals, rng, shares, heap.push, max_requests)
    last_send = float(offsets[-1]) if offsets.size and closed is None else 0.0
    horizon, wake_at, now = math.inf, math.inf, 0.0
    while heap.items:
        now, _, kind, payload = heapq.heappop(heap.items)
        if now > horizon:
            break
        if kind == _ARRIVE:
            index, fn = cast(tuple[int, int], payload)
            tally.sent += 1
            if not queue.admit(_Event(index, fn, now)):
                tally.rejected += 1
                if closed is not None:
                    _next_send(closed, rng, now, index, shares, heap.push, tally.sent, max_requests)
        elif kind == _DONE:
            group, events = cast(tuple[str, list[_Event]], payload)
            queue.groups[group].running -= 1
            queue.running -= 1
            tally.done(events, now, timeout_s)
            for index in [e.index for e in events] if closed is not None else []:
                _next_send(cast(ClosedArrivals, closed), rng, now, index, shares, heap.push, tally.sent,
                           max_requests)
        elif now >= wake_at:
            wake_at = math.inf
        if closed is None and math.isinf(horizon) and now >= last_send:
            horizon = last_send + (timeout_s if math.isfinite(timeout_s) else math.inf)
        if heap.items and heap.items[0][0] <= now:
            continue  # what happens at one instant is all in the queue before it dispatches
        due = _dispatch(queue, server, rng, now, heap.push, tally.batches)
        if due is not None and due < wake_at:
            wake_at = due
            heap.push(due, _WAKE, None)
    return tally.result(closed, last_send, now)


class _Heap:
    """The simulation's events by time (a sequence number keeps equal times in push order)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, int, object]] = []
        self.seq = 0

    def push(self, at: float, kind: int, payload: object) -> None:
        heapq.heappush(self.items, (at, self.seq, kind, payload))
        self.seq += 1


@dataclass
class _Tally:
    """What the simulated clients saw, counted as requests end."""

    sent: int = 0
    rejected: int = 0
    timed_out: int = 0
    latencies: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    services: list[float] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)

    def done(self, events: list[_Event], now: float, timeout_s: float) -> None:
        for event in events:
            latency = now - event.joined_s
            if latency > timeout_s:
                self.timed_out += 1
            else:
                self.latencies.append(latency)
                self.waits.append(event.started_s - event.joined_s)
                self.services.append(now - event.started_s)

    def result(self, closed: ClosedArrivals | None, last_send: float, now: float) -> SimResult:
        unfinished = self.sent - self.rejected - self.timed_out - len(self.latencies)
        end = closed.duration_s if closed is not None else max(last_send, 1e-9)
        return SimResult(
            sent=self.sent,
            completed=len(self.latencies) + self.timed_out,
            rejected=self.rejected,
            timed_out=self.timed_out + unfinished,
            latencies_s=np.array(self.latencies),
            waits_s=np.array(self.waits),
            services_s=np.array(self.services),
            batch_sizes=self.batches,
            span_s=end if closed is not None else max(now, end),
        )


def _first_sends(arrivals: Arrivals, rng: np.random.Generator, shares: np.ndarray, push: Push,
                 max_requests: int) -> tuple[ClosedArrivals | None, np.ndarray]:
    """Push the open loop's arrivals, or each closed-loop user's first send; (closed, their offsets)."""
    closed = arrivals if isinstance(arrivals, ClosedArrivals) else None
    if isinstance(arrivals, OpenArrivals):
        offsets = np.asarray(arrivals.offsets, dtype=np.float64)[:max_requests]
    else:
        assert closed is not None
        starts = closed.start_offsets if closed.start_offsets is not None else np.zeros(closed.users)
        offsets = np.asarray(starts, dtype=np.float64)
    fns = rng.choice(len(shares), size=max(offsets.size, 1), p=shares / shares.sum())
    for i, at in enumerate(offsets):
        push(float(at), _ARRIVE, (i, int(fns[i]) if closed is None else _fn_of(rng, shares)))
    return closed, offsets


def _fn_of(rng: np.random.Generator, shares: np.ndarray) -> int:
    return int(rng.choice(len(shares), p=shares / shares.sum())) if len(shares) > 1 else 0


def _next_send(closed: ClosedArrivals, rng: np.random.Generator, now: float, index: int,
               shares: np.ndarray, push: Push, sent: int, max_requests: int) -> None:
    """A closed-loop user thinks, then sends again (not after the duration or the request budget)."""
    think = closed.think_s
    if closed.exponential_think and think > 0:
        think = float(rng.exponential(think))
    at = now + think
    if at <= closed.duration_s and sent < max_requests:
        push(at, _ARRIVE, (index, _fn_of(rng, shares)))


def _dispatch(queue: QueueRules, server: SimServer, rng: np.random.Generator, now: float, push: Push,
              batches: list[int]) -> float | None:
    """Start jobs while threads are free and a group may start one; the next batch-wait expiry, if any."""
    while queue.running < server.max_threads:
        picked = queue.pick(now)
        if picked is None or isinstance(picked, float):
            return picked
        group, events = picked
        fn = server.functions[events[0].fn]
        service = fn.fit.service_s(len(events), queue.workers(fn))
        if fn.exponential:
            service = float(rng.exponential(service))
        elif fn.sigma > 0:
            service *= math.exp(rng.normal(-fn.sigma**2 / 2, fn.sigma))
        for event in events:
            event.started_s = now
        queue.groups[group].running += 1
        queue.running += 1
        batches.append(len(events))
        push(now + service, _DONE, (group, events))
    return None


def lognormal_sigma(ratios: Sequence[float]) -> float:
    """The log-spread of measured / predicted service times (a robust estimate: 1.4826 x MAD of logs)."""
    logs = np.log([r for r in ratios if r > 0])
    if logs.size < 3:
        return 0.0
    return float(min(1.4826 * np.median(np.abs(logs - np.median(logs))), 1.5))
