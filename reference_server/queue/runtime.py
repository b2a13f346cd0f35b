"""The queue's data: functions with their running averages, events, jobs and concurrency groups.

ETA (Gradio 6.x `broadcast_estimations`, spec 4.8): `avg(f)` is the arithmetic mean of the whole-job
durations (dispatch to last output) of function f's successful jobs, undefined before the first one.
For the waiting events of a group, in FIFO order:

    time_till_available_worker = max(min(start + avg(f) over running jobs) - now, 0)  if the group is full
                                 0 otherwise (None if a running function has no average)
    rank_eta(rank) = avg(f_rank) + wait_so_far + time_till_available_worker           (None if any is None)
    wait_so_far   += avg(f_rank) / limit                   (stays 0 when the group is unlimited)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from reference_server.observe.profiling import Trace
from reference_server.settings import FunctionSettings
from reference_server.workloads.base import Workload


@dataclass
class RunningMean:
    total: float = 0.0
    count: int = 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(eq=False)
class FunctionRuntime:
    """One served function: its settings, its workload and the averages behind ETAs and outputs."""

    index: int
    settings: FunctionSettings
    workload: Workload
    job_time: RunningMean = field(default_factory=RunningMean)  # whole-job durations (ETA)
    call_time: RunningMean = field(default_factory=RunningMean)  # workload call durations (output)

    @property
    def name(self) -> str:
        return self.settings.api_name


@dataclass(eq=False)
class Event:
    """One queued request."""

    id: str
    session: str  # the mailbox its messages go to (a /call event has its own: its id)
    fn: FunctionRuntime
    data: list[Any]
    simple_format: bool = False
    joined_at: float = field(default_factory=time.perf_counter)
    alive: bool = True  # False once cancelled or its session disconnected: messages are dropped
    outcome: str | None = None  # "ok" | "error" once its job produced its terminal message
    job: Job | None = None
    owner: str | None = None  # the client's session_hash where it differs from `session` (cancel checks it)
    data_waiter: asyncio.Future[Any] | None = None  # gradio: 3: the data the client sends on send_data
    prepared: asyncio.Future[Any] | None = None  # read-ahead preprocessing: its input row or the Exception
    ready_row: Any = None  # the same, when read ahead at once (an image decoded at upload): no future
    trace: Trace | None = None  # its phases (reference_server.observe.profiling), kept once it completes


@dataclass(eq=False)
class Job:
    """Events dispatched together (one, or a batch of one function); occupies one slot."""

    events: list[Event]
    fn: FunctionRuntime
    started_at: float = field(default_factory=time.perf_counter)
    task: asyncio.Task[None] | None = None

    @property
    def live_events(self) -> list[Event]:
        return [e for e in self.events if e.alive]


@dataclass(eq=False)
class Group:
    """A concurrency group: one FIFO and one limit shared by the functions that share a concurrency_id."""

    id: str
    limit: int | None = None
    limit_set: bool = False
    waiting: list[Event] = field(default_factory=list)
    running: list[Job] = field(default_factory=list)
    pushed: dict[int, FunctionRuntime] = field(default_factory=dict)
    waiting_per_fn: dict[int, int] = field(default_factory=dict)  # fn index -> waiting events

    def admit_function(self, fn: FunctionRuntime, fn_limit: int | None) -> None:
        """Gradio's lazy rule: the group limit is the lowest non-None limit of the functions pushed so far."""
        self.pushed[fn.index] = fn
        if not self.limit_set:
            self.limit, self.limit_set = fn_limit, True
        elif fn_limit is not None and (self.limit is None or fn_limit < self.limit):
            self.limit = fn_limit

    def recompute_limit(self, limit_of: dict[int, int | None]) -> None:
        """Reapply the lazy rule after a reconfiguration (the pushed functions' new limits)."""
        limits = [limit_of[i] for i in self.pushed]
        set_limits = [x for x in limits if x is not None]
        self.limit = min(set_limits) if set_limits else None

    @property
    def has_capacity(self) -> bool:
        return self.limit is None or len(self.running) < self.limit

    def time_till_available_worker(self, now: float) -> float | None:
        if self.limit is None or len(self.running) < self.limit:
            return 0.0
        ends = []
        for job in self.running:
            avg = job.fn.job_time.mean
            if avg is None:
                return None
            ends.append(job.started_at + avg)
        return max(min(ends) - now, 0.0) if ends else 0.0

    def estimations(self, now: float) -> Iterator[tuple[Event, int, float | None]]:
        """(event, rank, rank_eta) for every waiting event, by the formula in the module docstring."""
        till_worker = self.time_till_available_worker(now)
        wait_so_far: float | None = 0.0
        limit = self.limit
        for rank, event in enumerate(self.waiting):
            avg = event.fn.job_time.mean
            if avg is None or wait_so_far is None or till_worker is None:
                yield event, rank, None
            else:
                yield event, rank, avg + wait_so_far + till_worker
            if limit is None:
                wait_so_far = 0.0
            elif wait_so_far is not None and avg is not None:
                wait_so_far += avg / limit
            else:
                wait_so_far = None

    def eta_of_last(self, now: float) -> float | None:
        """rank_eta of the last waiting event, in O(functions) rather than O(queue) (used on push).

        The events ahead of it contribute sum(avg(f) / limit) over their functions, so per-function
        counts of waiting events suffice; any of them without an average makes the ETA null.
        """
        last = self.waiting[-1]
        avg, till_worker = last.fn.job_time.mean, self.time_till_available_worker(now)
        if avg is None or till_worker is None:
            return None
        if self.limit is None:
            return avg + till_worker
        wait = 0.0
        for index, count in self.waiting_per_fn.items():
            ahead = count - 1 if index == last.fn.index else count
            if ahead:
                fn_avg = self.pushed[index].job_time.mean
                if fn_avg is None:
                    return None
                wait += ahead * fn_avg / self.limit
        return avg + wait + till_worker

    # ---- the waiting list is changed only through these, which keep waiting_per_fn in step
    def enqueue(self, event: Event) -> None:
        self.waiting.append(event)
        self.waiting_per_fn[event.fn.index] = self.waiting_per_fn.get(event.fn.index, 0) + 1

    def remove(self, events: list[Event]) -> None:
        if len(events) == 1:
            self.waiting.remove(events[0])
        else:
            gone = set(map(id, events))
            self.waiting = [e for e in self.waiting if id(e) not in gone]
        for event in events:
            self.waiting_per_fn[event.fn.index] -= 1
