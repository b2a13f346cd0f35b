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
from dataclasses import dataclass, field
from typing import Any

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
    session: str
    fn: FunctionRuntime
    data: list[Any]
    simple_format: bool = False
    joined_at: float = field(default_factory=time.perf_counter)
    alive: bool = True  # False once cancelled or its session disconnected: messages are dropped
    outcome: str | None = None  # "ok" | "error" once its job produced its terminal message
    job: Job | None = None


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

    def estimations(self, now: float) -> list[tuple[Event, int, float | None]]:
        """(event, rank, rank_eta) for every waiting event, by the formula in the module docstring."""
        out: list[tuple[Event, int, float | None]] = []
        till_worker = self.time_till_available_worker(now)
        wait_so_far: float | None = 0.0
        for rank, event in enumerate(self.waiting):
            avg = event.fn.job_time.mean
            parts = (avg, wait_so_far, till_worker)
            eta = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
            out.append((event, rank, eta))
            if self.limit is None:
                wait_so_far = 0.0
            elif wait_so_far is not None and avg is not None:
                wait_so_far += avg / self.limit
            else:
                wait_so_far = None
        return out
