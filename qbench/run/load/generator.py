"""The load generator: plan x payloads x protocol -> one RequestRecord per scheduled request, in open or
closed loop, inside an executor (qbench.run.load.executor); complete records whatever stops the run."""

from __future__ import annotations

import asyncio
import gc
import time
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from qbench.run.load.mix import Route, Routes
from qbench.run.load.waker import SpinWaker, Waker, make_waker
from qbench.run.protocols.base import JOURNEY, Clock, SessionState, fail
from qbench.run.protocols.gradio_wire import new_session_hash
from qbench.run.protocols.login import SESSION_SLOT
from qbench.run.records.schema import RequestRecord
from qbench.run.results.failfast import STOP_PREFIX, OpeningGuard
from qbench.run.results.summary import GeneratorStats
from qbench.run.scenario.schedule import OpenPlan, Plan, UserPlan
from qbench.run.scenario.schema import Load

TICK_S = 0.05
GC_VALVE_OBJECTS = 20_000_000  # young tracked objects that force a collection despite the pause
PUBLISH_EVERY = 5  # ticks
ERROR_CHARS = 500  # of a record's error message
RECENT = 200  # completions in the "recent" window of LiveStats
LIVE_WINDOW = 5000  # live p50/p95 use the last this-many ok completions (the summary uses all, exactly)
FLUSH_RECORDS = 10_000  # never-sent records closed at a stop go out in batches of this many


def thread_wait_s() -> float | None:
    """Seconds this thread waited runnable for a core (Linux schedstat); None where the kernel won't say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class LiveStats:
    """A snapshot of the run in progress (console, stop_when hooks)."""

    elapsed_s: float = 0.0
    planned_s: float | None = None  # intended send window (None: until `requests` are done)
    scheduled: int | None = None  # planned request count (open loop), None for closed loop
    sent: int = 0
    completed: int = 0
    ok: int = 0
    in_flight: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    p50_latency_s: float | None = None  # over the last LIVE_WINDOW ok completions (live view only)
    p95_latency_s: float | None = None
    recent_p95_latency_s: float | None = None  # over the last RECENT ok completions
    max_send_lag_s: float = 0.0
    workers: int = 1  # generator workers these figures sum (processes, Ray actors)
    lost_workers: int = 0  # of which lost mid-run (Ray)


StopHook = Callable[[LiveStats], "str | None"]


class LoadGenerator:
    def __init__(
        self,
        load: Load,
        plan: Plan,
        routes: Routes,
        clock: Clock,
        *,
        on_tick: Callable[[LiveStats], None] | None = None,
        stop_when: StopHook | None = None,
        on_records: Callable[[list[RequestRecord]], None] | None = None,
        mask: Callable[[str], str] = str,
        keep_send_lags: bool = False,
    ) -> None:
        self.load, self.plan, self.routes, self.clock = load, plan, routes, clock
        self.on_tick, self.stop_when, self.on_records = on_tick, stop_when, on_records
        self.mask = mask  # the run's secrets out of error texts (Authenticator.mask)
        self.created = 0  # records made so far (closed loop and journeys: the next request id)
        self.dispatched = 0  # open loop: requests of the plan handed to a task so far
        self.unsent = False  # a finished record was never sent (the run then ends as a deadline)
        # each sent request's send lag, for a worker's WorkerStats (8 bytes a request; None: not kept)
        self.send_lags: array[float] | None = array("d") if keep_send_lags else None
        journeys = routes.journey is not None
        self.stats = LiveStats(scheduled=len(plan) if isinstance(plan, OpenPlan) and not journeys else None)
        self.journeys = 0  # journeys started (their ids)
        self.stop_kind: str | None = None
        self.stop_reason: str | None = None
        self.max_in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._finished: list[RequestRecord] = []
        self._latencies: deque[float] = deque(maxlen=LIVE_WINDOW)
        self._lags: array[float] = array("d")  # the ticker's event-loop oversleep, every TICK_S
        self._main: asyncio.Task[None] | None = None
        capped = load.max_in_flight is not None and isinstance(plan, OpenPlan)
        self._slots = asyncio.Semaphore(load.max_in_flight or 1) if capped else None
        self.cpu_s = self.wall_s = 0.0
        self.waited_s: float | None = None  # the loop's thread runnable but waiting for a core (s)
        self._closed = isinstance(plan, UserPlan)
        self._pool = load.sessions if isinstance(load.sessions, int) else 0
        self.guard = OpeningGuard()
        self.waker: Waker = SpinWaker()  # replaced by make_waker() for the run
        self._deadlines = DeadlineWheel(load.timeout, self._expire)

    # ------------------------------------------------------------ control

    def request_stop(self, kind: str, reason: str) -> None:
        """Stop sending; in-flight and unsent requests are closed as `kind` (interrupted / deadline)."""
        if self.stop_kind is None:
            self.stop_kind, self.stop_reason = kind, reason
            if self._main is not None:
                self._main.cancel()

    async def run(self, start_at: float | None = None) -> None:
        """Execute the plan; the run's clock starts now, or at `start_at` (a time.perf_counter() value
        shared by several generator processes, whose CLOCK_MONOTONIC is the same)."""
        self.waker = make_waker()
        try:
            with paused_gc():
                await self._run(start_at)
        finally:
            self.waker.close()
            self._deadlines.close()

    async def _run(self, start_at: float | None) -> None:
        loop = asyncio.get_running_loop()
        if start_at is None:
            self.clock.restart()
        else:
            self.clock.t0 = start_at
            await asyncio.sleep(max(start_at - time.perf_counter(), 0.0))
        cpu0, wall0, waited0 = time.process_time(), time.perf_counter(), thread_wait_s()
        self.stats.planned_s = self._planned_s()
        ticker = loop.create_task(self._ticker())
        self._main = loop.create_task(self._execute())
        try:
            await asyncio.shield(self._main)
        except asyncio.CancelledError:
            if self.stop_kind is None:  # cancelled from outside: behave like an interrupt
                self.request_stop("interrupted", "cancelled")
            await asyncio.gather(self._main, return_exceptions=True)
        finally:
            await self._close_all()
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            self._publish(final=True)  # the last view shows every request done; flushes records
        self.cpu_s, self.wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
        waited = thread_wait_s()
        self.waited_s = None if waited is None or waited0 is None else waited - waited0

    def generator_stats(self) -> GeneratorStats:
        lags = np.array(self._lags, dtype=np.float64) if self._lags else np.zeros(1)
        return GeneratorStats(
            cpu_s=self.cpu_s,
            cpu_percent=100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else None,
            max_loop_lag_s=float(lags.max()),
            p99_loop_lag_s=float(np.percentile(lags, 99)),
            loop_wait_share=(self.waited_s / self.wall_s if self.waited_s is not None and self.wall_s > 0
                             else None),
            max_in_flight=self.max_in_flight,
            in_flight_cap=self.load.max_in_flight,
        )

    # ------------------------------------------------------------ execution

    async def _execute(self) -> None:
        try:
            if isinstance(self.plan, OpenPlan) and self.routes.journey is not None:
                await self._open_journeys(self.plan)
                await self._drain(self._journey_drain_s())
            elif isinstance(self.plan, OpenPlan):
                await self._open_loop(self.plan)
                await self._drain(self.load.drain_s)
            else:
                await self._closed_loop(self.plan)
        except asyncio.CancelledError:
            pass

    async def _open_loop(self, plan: OpenPlan) -> None:
        loop = asyncio.get_running_loop()
        create, tasks, discard = loop.create_task, self._tasks, self._tasks.discard
        offsets, slots, clock = plan.offsets, self._slots, self.clock
        n = len(plan)
        while self.dispatched < n:
            await self._until(float(offsets[self.dispatched]))
            now = clock.now()
            while self.dispatched < n and offsets[self.dispatched] <= now:  # all that is due goes now
                record = self._planned(self.dispatched)
                if slots is not None:
                    await slots.acquire()
                self.dispatched += 1
                task = create(self._one(record, record.user_id))
                tasks.add(task)
                task.add_done_callback(discard)

    def _planned(self, k: int) -> RequestRecord:
        """The open-loop plan's k-th request as a fresh record (made when it is due, not before)."""
        plan = self.plan
        assert isinstance(plan, OpenPlan)
        i = k if plan.ids is None else int(plan.ids[k])
        t = float(plan.offsets[k])
        return RequestRecord(
            request_id=i,
            user_id=k % self._pool if self._pool else i,  # the session slot (processes have own pools)
            session_id="",
            endpoint=self.routes.routing.label_for(i),
            warmup=t < self.load.warmup,
            intended_at_s=t,
        )

    async def _until(self, when: float) -> None:
        """Return at `when` on the run's clock: never before; at once when it has passed."""
        await self.waker.until(self.clock.t0 + when)

    async def _drain(self, timeout: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        if self._tasks:
            self.stop_kind = self.stop_kind or "deadline"
            self.stop_reason = (
                self.stop_reason or f"still running at the end of the run ({timeout:g} s after the last "
                f"send, before the {self.load.timeout:g} s timeout)"
            )

    async def _closed_loop(self, plan: UserPlan) -> None:
        loop = asyncio.get_running_loop()
        users = {
            loop.create_task(self._user(plan.user_id(i), i, float(t), plan))
            for i, t in enumerate(plan.start_offsets)
        }
        self._tasks |= users
        limit = None if plan.duration is None else plan.duration + self.load.drain_s
        await asyncio.wait(users, timeout=limit)
        if any(not t.done() for t in users):
            self.stop_kind = self.stop_kind or "deadline"
            self.stop_reason = self.stop_reason or (
                f"still running at the end of the run (duration + {self.load.drain_s:g} s drain, before "
                f"the {self.load.timeout:g} s timeout)")

    async def _user(self, user: int, slot: int, start: float, plan: UserPlan) -> None:
        rng = np.random.default_rng([user, 7])
        while (delay := start - self.clock.now()) > 0:
            await asyncio.sleep(delay)
        if self.routes.journey is not None:
            await self._journeys_of(user, slot, rng)
            return
        while self.stop_kind is None:
            now = self.clock.now()
            if plan.duration is not None and now >= plan.duration:
                return
            if plan.requests is not None and self.created >= plan.requests:
                return
            record = RequestRecord(
                request_id=self._next_id(),
                user_id=user,
                session_id="",
                endpoint=self.routes.routing.for_user(user, rng, now),
                warmup=now < self.load.warmup,
                intended_at_s=now,
            )
            await self._one(record, slot)
            think = plan.think_time
            if plan.exponential_think and think > 0:
                think = float(rng.exponential(think))
            if think > 0:
                await asyncio.sleep(think)
        await asyncio.sleep(0)

    # ------------------------------------------------------------ journeys

    async def _open_journeys(self, plan: OpenPlan) -> None:
        """Open loop: a new journey (a new user, a new session) at each planned instant."""
        loop = asyncio.get_running_loop()
        for n, t in enumerate(plan.offsets.tolist()):
            await self._until(t)
            if self._stopped(self.clock.now()):
                return
            task = loop.create_task(self._journey(n, n, float(t), np.random.default_rng([n, 7])))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _journeys_of(self, user: int, slot: int, rng: np.random.Generator) -> None:
        """Closed loop: one journey after another, `think_time` between them, until the run stops."""
        while not self._stopped(self.clock.now()):
            await self._journey(user, slot, self.clock.now(), rng)
            if self.load.think_time > 0:
                await asyncio.sleep(self._think(self.load.think_time, rng))

    async def _journey(self, user: int, slot: int, start: float, rng: np.random.Generator) -> None:
        """One user's steps in order, in one session; it ends at the first failed request."""
        assert self.routes.journey is not None
        journey_id, self.journeys = self.journeys, self.journeys + 1
        state = SessionState(new_session_hash())
        JOURNEY.set(state)  # this task's context: every request of the journey shares the session
        try:
            await self._steps(state, user, slot, start, journey_id, rng)
        finally:
            state.end()

    async def _steps(self, state: SessionState, user: int, slot: int, start: float, journey_id: int,
                     rng: np.random.Generator) -> None:
        """A journey's steps in order; it ends at the first failed request or when the run stops."""
        assert self.routes.journey is not None
        first = True
        for index, (step, route) in enumerate(zip(self.routes.journey, self.routes.steps, strict=True)):
            for turn in range(step.repeat):
                if not first and step.think_time > 0:
                    await asyncio.sleep(self._think(step.think_time, rng))
                now = self.clock.now()
                if self._stopped(now):
                    return
                record = RequestRecord(
                    request_id=self._next_id(), user_id=user, session_id=state.session_hash,
                    endpoint=route.branch.label, warmup=now < self.load.warmup,
                    intended_at_s=start if first else now, journey_id=journey_id, step=index, turn=turn,
                )
                await self._one(record, slot, route)
                first = False
                if not record.ok:
                    return

    def _stopped(self, now: float) -> bool:
        load = self.load
        return (self.stop_kind is not None or (load.duration is not None and now >= load.duration)
                or (load.requests is not None and self.created >= load.requests))

    def _next_id(self) -> int:
        """Closed loop and journeys: request ids in the order records are made."""
        self.created += 1
        return self.created - 1

    def _think(self, mean: float, rng: np.random.Generator) -> float:
        return float(rng.exponential(mean)) if self.load.think == "exponential" else mean

    def _journey_drain_s(self) -> float:
        """Seconds left for open-loop journeys: the rest of `duration` (they send until it) plus the drain."""
        remaining = 0.0 if self.load.duration is None else max(self.load.duration - self.clock.now(), 0.0)
        return remaining + self.load.drain_s

    async def _one(self, record: RequestRecord, slot: int, route: Route | None = None) -> None:
        """Send one request under its timeout; turn every way it can end into a closed record."""
        task = asyncio.current_task()
        assert task is not None
        self._deadlines.add(task, record)
        self.stats.sent += 1
        self.stats.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.stats.in_flight)
        SESSION_SLOT.set(slot)  # whose credentials (qbench.run.protocols.login); this task's context only
        route = route or self.routes[record.endpoint]
        try:
            await route.protocol.send(record, route.payloads.inputs(record.request_id), slot)
        except asyncio.CancelledError:
            if record.error_kind == "timeout":
                route.protocol.abandon(record)
                if hasattr(task, "uncancel"):
                    task.uncancel()  # our own timer's cancel is handled: later awaits must not see it
            else:
                fail(record, self.stop_kind or "interrupted", self.stop_reason or "stopped", self.clock.now())
                if isinstance(self.plan, UserPlan):
                    raise  # a closed-loop user stops with its request
        except Exception as exc:  # a bug must not lose the record
            fail(record, "client", f"{exc.__class__.__name__}: {exc}", self.clock.now())
        finally:
            self._deadlines.remove(task)
            self.stats.in_flight -= 1
            if self._slots is not None:
                self._slots.release()
            self._finish(record)

    def _expire(self, task: asyncio.Task[None], record: RequestRecord) -> None:
        if record.completed_at_s is not None:
            return  # the verdict is in (the protocol may still be reading to the stream's end): not a timeout
        fail(record, "timeout", f"no result within {self.load.timeout:g} s", self.clock.now())
        task.cancel()

    def _finish(self, record: RequestRecord) -> None:
        if record.error_message:  # a server may echo a credential back
            record.error_message = self.mask(record.error_message)[:ERROR_CHARS]
        if self._closed and record.sent_at_s is not None:
            record.intended_at_s = record.sent_at_s  # closed loop: the plan is "send now"
        if record.completed_at_s is None and record.sent_at_s is not None:
            fail(record, "client", "request ended without a verdict", self.clock.now())
        stats = self.stats
        stats.completed += 1
        if record.ok:
            stats.ok += 1
            if record.completed_at_s is not None:
                self._latencies.append(record.completed_at_s - record.intended_at_s)
        else:
            kind = record.error_kind or "client"
            stats.errors_by_kind[kind] = stats.errors_by_kind.get(kind, 0) + 1
        if record.sent_at_s is not None:
            lag = record.sent_at_s - record.intended_at_s
            stats.max_send_lag_s = max(stats.max_send_lag_s, lag)
            if self.send_lags is not None:
                self.send_lags.append(lag)
            self._fail_fast(self.guard.observe(record))
        else:
            self.unsent = True
        self._finished.append(record)

    def _fail_fast(self, verdict: str | None) -> None:
        """The opening all failed the same way: stop what is left of the run (see run.results.failfast)."""
        if verdict is not None and self._main is not None and not self._main.done():
            self.request_stop("interrupted", f"{STOP_PREFIX}: {verdict}")

    async def _close_all(self) -> None:
        """Cancel whatever is still running and close never-sent records, as the stop kind."""
        pending = [t for t in self._tasks if not t.done()]
        planned = len(self.plan) if isinstance(self.plan, OpenPlan) and self.routes.journey is None else 0
        if pending or self.unsent or self.dispatched < planned:
            self.stop_kind = self.stop_kind or "deadline"
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for k in range(self.dispatched, planned):  # the open loop's requests never handed to a task
            record = self._planned(k)
            record.error_kind = self.stop_kind or "interrupted"
            record.error_message = f"not sent: {self.stop_reason or 'run stopped'}"
            self._finish(record)
            if len(self._finished) >= FLUSH_RECORDS:
                self._flush()
        self.dispatched = max(self.dispatched, planned)

    # ------------------------------------------------------------ ticker

    async def _ticker(self) -> None:
        loop = asyncio.get_running_loop()
        n = 0
        while True:
            expected = loop.time() + TICK_S
            await asyncio.sleep(TICK_S)
            self._lags.append(max(loop.time() - expected, 0.0))
            if gc.get_count()[0] > GC_VALVE_OBJECTS:
                gc.collect()  # safety valve for very long runs (the pause shows up as loop lag)
            n += 1
            if n % PUBLISH_EVERY == 0:
                self._publish()

    def _publish(self, final: bool = False) -> None:
        stats = self.stats
        stats.elapsed_s = self.clock.now()
        if self._latencies:
            lat = np.fromiter(self._latencies, dtype=np.float64, count=len(self._latencies))
            stats.p50_latency_s, stats.p95_latency_s = (float(x) for x in np.percentile(lat, [50, 95]))
            stats.recent_p95_latency_s = float(np.percentile(lat[-RECENT:], 95))
        self._flush()
        if final:
            self.guard.finish(stats.sent)  # a verdict now only explains; there is nothing left to stop
        else:
            self._fail_fast(self.guard.tick(stats.elapsed_s, stats.sent))
        if self.on_tick is not None:
            self.on_tick(stats)
        if self.stop_when is not None and self.stop_kind is None and not final:
            reason = self.stop_when(stats)
            if reason:
                self.request_stop("deadline", reason)

    def _flush(self) -> None:
        if self._finished and self.on_records is not None:
            self.on_records(self._finished)
        self._finished = []

    def _planned_s(self) -> float | None:
        if isinstance(self.plan, OpenPlan):
            return float(self.plan.offsets[-1]) if len(self.plan) else 0.0
        return self.plan.duration


class DeadlineWheel:
    """Every in-flight request's timeout on one loop timer, armed for the earliest deadline."""

    def __init__(self, timeout_s: float, expire: Callable[[asyncio.Task[None], RequestRecord], None]) -> None:
        self.timeout_s, self.expire = timeout_s, expire
        self._due: OrderedDict[asyncio.Task[None], tuple[float, RequestRecord]] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due)

    def add(self, task: asyncio.Task[None], record: RequestRecord) -> None:
        loop = task.get_loop()
        deadline = loop.time() + self.timeout_s
        self._due[task] = (deadline, record)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._fire, loop)

    def remove(self, task: asyncio.Task[None]) -> None:
        self._due.pop(task, None)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        due = self._due
        while due:
            task, (deadline, record) = next(iter(due.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._fire, loop)
                return
            del due[task]
            self.expire(task, record)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause and freeze the cyclic garbage collector for the run; restored after it."""
    enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
