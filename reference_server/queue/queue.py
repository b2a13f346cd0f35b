"""The event queue: concurrency groups, an event-driven dispatcher, batching, ETA, cancel, disconnect.

Semantics follow Gradio 6.x (`gradio/queueing.py`, checked by tests/conformance):
* one FIFO per concurrency group; a group runs at most `limit` jobs (the lowest limit set by the
  functions pushed to it so far); at most `max_threads` jobs run in total;
* among the groups that may start a job, one is chosen at random; its head event is taken, plus, for a
  `batch` function, up to `max_batch_size - 1` later events of the same function (no waiting, unless
  the `batch_wait_ms` extension is set: then a short batch waits up to that long after its head joined);
* `max_size` counts waiting events across groups; a join beyond it is refused (HTTP 503);
* estimations go to the new event on push, and to a group's waiting events after each dispatch from
  it (`status_update_rate: auto`) or every N seconds (numeric rate).
Unlike Gradio's 1 ms polling loop, the dispatcher sleeps until something changes (a push, a completed
job, a cancel, a reconfiguration or a batch wait expiring).

With `gradio: 3` (Gradio 3.50's queue, reference_server.queue.gradio3) every function shares one group whose
limit is `concurrency_count`; a dispatched job first gathers its events' data (send_data), then sends
process_starts; estimations carry 3.x's fields and formula.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections import deque
from typing import Any

import anyio

from reference_server.io.components import FileStore
from reference_server.io.ids import random_hex
from reference_server.observe.metrics import ServerMetrics
from reference_server.observe.profiling import Trace, TraceCollector
from reference_server.queue import gradio3
from reference_server.queue import messages as m
from reference_server.queue.jobs import JobRunner
from reference_server.queue.runtime import Event, FunctionRuntime, Group, Job
from reference_server.queue.sessions import Sessions
from reference_server.settings import ServerSettings


class QueueFullError(Exception):
    """The join would exceed max_size; str() is Gradio's 503 detail."""


class EventQueue:
    def __init__(self, settings: ServerSettings, functions: list[FunctionRuntime], store: FileStore,
                 metrics: ServerMetrics | None = None, traces: TraceCollector | None = None) -> None:
        self.settings = settings
        self.traces = traces or TraceCollector()
        self.functions = functions
        self.metrics = metrics or ServerMetrics()
        self.events: dict[str, Event] = {}  # waiting or running, by id
        self.sessions = Sessions(is_live=self.events.__contains__)
        self.groups: dict[str, Group] = {}
        self.running_jobs = 0
        self.completed = 0
        self.started = 0  # events dispatched so far (queue.stop_after_events)
        self.leaked: deque[bytes] = deque(maxlen=settings.queue.leak_bound_events)  # leak_bytes_per_event
        self.limiter = anyio.CapacityLimiter(settings.max_threads)
        self.stats3 = gradio3.Stats()  # Gradio 3.x's queue-wide averages (gradio: 3 only)
        self.runner = JobRunner(store, self.limiter, settings.show_error, self.emit)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._batch_timer: asyncio.Handle | None = None  # uvloop's, for a time under 0.5 ms away: no when()
        self._batch_timer_at = 0.0  # when it fires (loop time)
        self._estimations: asyncio.Task[None] | None = None  # the periodic loop of a numeric rate
        self.metrics.sessions.set_function(lambda: len(self.sessions))  # read when /metrics renders
        self.metrics.events_live.set_function(lambda: len(self.events))

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._dispatch_loop(), name="qbench-dispatcher"))
        self._start_estimations()

    def _start_estimations(self) -> None:
        """One periodic estimation loop while the rate is numeric (switching auto -> numeric -> auto ->
        numeric within one period must not leave two loops running)."""
        running = self._estimations is not None and not self._estimations.done()
        if self.settings.queue.status_update_rate != "auto" and not running:
            self._estimations = asyncio.create_task(self._periodic_estimations(), name="qbench-estimations")
            self._tasks = [t for t in self._tasks if not t.done()] + [self._estimations]

    async def stop(self) -> None:
        jobs = [e.job.task for e in self.events.values() if e.job and e.job.task]
        ahead = [e.prepared for e in self.events.values() if e.job is None and e.prepared is not None]
        for task in [*self._tasks, *jobs, *ahead]:
            task.cancel()
        for task in [*self._tasks, *jobs, *ahead]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self.runner.threads.close()

    def reconfigure(self, settings: ServerSettings) -> None:
        """Apply new limits, batch sizes, max_size, max_threads to events dispatched from now on.

        The functions themselves (names, workloads, params, concurrency ids) cannot change live.
        """
        if settings.gradio != self.settings.gradio:
            raise ValueError(f"reconfigure cannot change the Gradio release (gradio: {self.settings.gradio})")
        fixed = ("api_name", "workload", "params", "concurrency_id")
        if len(settings.functions) != len(self.functions) or any(
            getattr(fn.settings, key) != getattr(new, key)
            for fn, new in zip(self.functions, settings.functions, strict=False)
            for key in fixed
        ):
            raise ValueError(f"reconfigure cannot change the functions or their {', '.join(fixed)}")
        for fn, new in zip(self.functions, settings.functions, strict=True):
            fn.settings = new
        limits = {fn.index: settings.resolved_limit(fn.settings) for fn in self.functions}
        for group in self.groups.values():
            group.recompute_limit(limits)
        self.limiter.total_tokens = settings.max_threads
        self.runner.show_error = settings.show_error
        self.settings = settings
        self._start_estimations()
        self._wake.set()

    # ------------------------------------------------------------ admission
    @property
    def waiting_count(self) -> int:
        return sum(len(g.waiting) for g in self.groups.values())

    def push(self, session: str, fn: FunctionRuntime, data: list[Any], simple_format: bool = False,
             event_id: str | None = None, owner: str | None = None) -> Event:
        """Admit one event (or raise QueueFullError) and send it its first estimation. `session` is the
        mailbox its messages go to; `owner`, where given, the session_hash a cancel must name."""
        max_size = self.settings.queue.max_size
        if max_size is not None:
            size = self.waiting_count
            if size >= max_size:
                self.metrics.child(self.metrics.rejected, "queue_full").inc()
                raise QueueFullError(f"Queue is full. Max size is {max_size} and size is {size}.")
        group_id = self.settings.group_id(fn.settings)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self._new_group(group_id)
        group.admit_function(fn, self.settings.resolved_limit(fn.settings))
        event = Event(event_id or random_hex(), session, fn, data, simple_format, owner=owner)
        event.trace = Trace(event.id, fn.name, owner or session)
        self.events[event.id] = event
        self.sessions.add_pending(session, event.id)
        group.enqueue(event)
        self.metrics.child(self.metrics.joined, fn.name).inc()
        if self.settings.gradio == 3:
            self.emit(event, self.stats3.estimation(len(group.waiting) - 1, len(group.waiting), group))
        else:
            eta = group.eta_of_last(time.perf_counter())
            self.emit(event, m.estimation(event.id, len(group.waiting) - 1, len(group.waiting), eta))
        if not group.has_capacity and group.waiting_per_fn[fn.index] <= self._read_ahead_depth(fn):
            self.runner.read_ahead(fn, [event])  # it will wait: prepare it while the model works
        self._wake.set()
        return event

    def _new_group(self, group_id: str) -> Group:
        """A concurrency group; its queue_depth gauge reads its waiting list when /metrics renders (no
        gauge update per join and per dispatch)."""
        group = Group(group_id)
        self.metrics.child(self.metrics.queue_depth, group_id).set_function(lambda: len(group.waiting))
        return group

    def _read_ahead_depth(self, fn: FunctionRuntime) -> int:
        """How many waiting events of a batch function are preprocessed ahead: its next batch (none in
        the 3.x mode, where a client sends an event's data only once its job starts)."""
        if self.settings.gradio == 3 or not fn.settings.batch:
            return 0
        return fn.settings.max_batch_size

    def emit(self, event: Event, msg: m.Message) -> None:
        if event.alive:
            self.sessions.send(event.session, gradio3.message4(msg) if self.settings.gradio == 4 else msg)

    # ------------------------------------------------------------ dispatch
    async def _dispatch_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.running_jobs < self.settings.max_threads:
                picked = self._pick()
                if picked is None:
                    break
                self._start(*picked)

    def _pick(self) -> tuple[Group, list[Event]] | None:
        stop = self.settings.queue.stop_after_events
        if stop is not None and self.started >= stop:
            return None  # a stuck queue, on purpose (settings.QueueSettings)
        eligible = [g for g in self.groups.values() if g.waiting and g.has_capacity]
        random.shuffle(eligible)
        for group in eligible:
            events = self._take(group)
            if events:
                return group, events
        return None

    def _take(self, group: Group) -> list[Event] | None:
        """Remove and return the head event, plus same-function followers for a batch function."""
        head = group.waiting[0]
        fs = head.fn.settings
        if not fs.batch:
            group.remove([head])
            return [head]
        members = list(itertools.islice((e for e in group.waiting if e.fn is head.fn), fs.max_batch_size))
        if len(members) < fs.max_batch_size and fs.batch_wait_ms > 0:
            due = head.joined_at + fs.batch_wait_ms / 1000
            if time.perf_counter() < due:
                self._wake_at(due)
                return None
        group.remove(members)
        return members

    def _wake_at(self, due: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + max(due - time.perf_counter(), 0.0)
        if self._batch_timer is not None and self._batch_timer_at <= when:
            return
        if self._batch_timer is not None:
            self._batch_timer.cancel()
        self._batch_timer, self._batch_timer_at = loop.call_at(when, self._batch_timer_fired), when

    def _batch_timer_fired(self) -> None:
        self._batch_timer = None
        self._wake.set()

    def _start(self, group: Group, events: list[Event]) -> None:
        fn = events[0].fn
        job = Job(events, fn)
        group.running.append(job)
        self.running_jobs += 1
        self.started += len(events)
        now = job.started_at
        for event in events:
            event.job = job
            self.metrics.child(self.metrics.queue_wait, fn.name).observe(now - event.joined_at)
            if event.trace is not None:
                event.trace.add("queue_wait", now - event.joined_at)
                event.trace.batch_size = len(events)
        self.metrics.child(self.metrics.batch_size, fn.name).observe(len(events))
        self.metrics.running_jobs.set(self.running_jobs)
        if self.settings.queue.status_update_rate == "auto":
            self.broadcast(group)
        if self.settings.queue.stall_ms_per_waiting and group.waiting:
            time.sleep(self.settings.queue.stall_ms_per_waiting * len(group.waiting) / 1000)  # on purpose
        if self.settings.gradio != 3:  # 3.x: after the job gathered its data (_run)
            eta = fn.job_time.mean
            for event in events:
                self.emit(event, m.process_starts(event.id, eta))
        depth = self._read_ahead_depth(fn)
        if depth:
            upcoming = itertools.islice((e for e in group.waiting if e.fn is fn), depth)
            self.runner.read_ahead(fn, list(upcoming))
        job.task = asyncio.create_task(self._run(job))
        # A done callback, not a `finally`: a task cancelled before its first step (a /cancel in the same
        # loop turn as the dispatch) never runs its body, and its slot must still be freed.
        job.task.add_done_callback(lambda _task: self._finish(job, group))

    async def _run(self, job: Job) -> None:
        worn = self.settings.queue.degrade_ms_per_1k_events * self.started / 1e6
        try:
            if worn:  # a server that degrades with use, on purpose (settings.QueueSettings)
                await asyncio.sleep(worn)
            if self.settings.gradio == 3 and not await gradio3.gather(job, self.emit, self.runner):
                return
            await (self.runner.stream(job) if job.fn.workload.is_generator else self.runner.run(job))
        except asyncio.CancelledError:
            pass  # /cancel: the client already got its synthetic completion
        except Exception as exc:  # a server bug must still give every live event a verdict
            self.runner.fail([e for e in job.events if e.outcome is None and e.alive], exc)

    def _finish(self, job: Job, group: Group) -> None:
        group.running.remove(job)
        self.running_jobs -= 1
        self.completed += len(job.events)
        if self.settings.queue.leak_bytes_per_event:  # a leak, on purpose: written, so resident
            self.leaked.extend(b"L" * self.settings.queue.leak_bytes_per_event for _ in job.events)
        name = job.fn.name
        duration = time.perf_counter() - job.started_at
        self.metrics.child(self.metrics.process_time, name).observe(duration)
        if self.settings.gradio == 3 and any(e.outcome == "ok" for e in job.events):
            self.stats3.update(duration, self.settings.concurrency_count, self.waiting_count)
        self.metrics.running_jobs.set(self.running_jobs)
        outcomes: dict[str, int] = {}
        for event in job.events:
            self.events.pop(event.id, None)
            outcome = (event.outcome or "error") if event.alive else "cancelled"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if event.trace is not None:
                event.trace.add("total", duration)
                self.traces.add(event.trace)
        for outcome, count in outcomes.items():  # once per outcome of the batch, not per event
            self.metrics.child(self.metrics.completed, name, outcome).inc(count)
        self._wake.set()

    # ------------------------------------------------------------ estimations
    def broadcast(self, group: Group) -> None:
        """An estimation to every waiting event of the group (O(queue) per call: kept lean)."""
        size = len(group.waiting)
        session_of = self.sessions.get
        if self.settings.gradio == 3:
            for rank, event in enumerate(group.waiting):
                if event.alive:
                    self.emit(event, self.stats3.estimation(rank, size, group))
            return
        for event, rank, eta in group.estimations(time.perf_counter()):
            session = session_of(event.session) if event.alive else None
            if session is not None:
                session.queue.put_nowait({"msg": "estimation", "event_id": event.id, "rank": rank,
                                          "queue_size": size, "rank_eta": eta})

    async def _periodic_estimations(self) -> None:
        while self.settings.queue.status_update_rate != "auto":
            await asyncio.sleep(float(self.settings.queue.status_update_rate))
            for group in self.groups.values():
                if group.waiting:
                    self.broadcast(group)

    # ------------------------------------------------------------ cancel and disconnect
    def cancel(self, session: str, event_id: str) -> bool:
        """Cancel ONE event (waiting: removed; running: its task cancelled, or dropped from its batch)."""
        event = self.events.get(event_id)
        if event is None or (event.owner or event.session) != session or not event.alive:
            return False
        self.emit(event, m.cancelled(event.id))
        event.alive = False
        if event.job is None:
            self._remove_waiting(event)
            self.metrics.child(self.metrics.cancellations, "waiting").inc()
        else:
            self.metrics.child(self.metrics.cancellations, "running").inc()
            if not event.job.live_events and event.job.task is not None:
                event.job.task.cancel()
        return True

    def _remove_waiting(self, event: Event) -> None:
        if event.prepared is not None:
            event.prepared.cancel()  # its read-ahead result would never be used
        group = self.groups[self.settings.group_id(event.fn.settings)]
        if event in group.waiting:
            group.remove([event])
        self.events.pop(event.id, None)
        self._wake.set()

    def disconnect(self, session: str) -> None:
        """The session's stream went away: drop its waiting events; running ones finish unseen."""
        state = self.sessions.drop(session)
        if state is None:
            return
        for event_id in state.pending:
            event = self.events.get(event_id)
            if event is None:
                continue
            event.alive = False  # a running plain job completes unseen; a generator stops at its next step
            if event.job is None:
                self._remove_waiting(event)
