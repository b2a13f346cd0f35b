"""Per-session message queues and pending-event sets (what drives the SSE stream and close_stream).

A session is created by its first join and holds a mailbox of messages plus the ids of its
events that have not delivered a terminal message yet. The SSE reader deletes the session after it
sends `close_stream`; a later join creates it afresh.

Beyond `capacity` sessions (2000, like Gradio's LRU) the least recently used sessions without a
reader are evicted, idle ones first, then those whose events have all finished (results nobody came
for). Unlike Gradio's plain LRU, a session with a reader or with an event still waiting or running is
kept, so a burst of more than 2000 sessions does not lose messages.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from reference_server.queue.messages import HEARTBEAT, Message

SLACK_S = 0.001  # a beat this close to due beats now (an event loop's timers may fire ~1 ms early)
DISCONNECTED: Message = {"msg": "__disconnected__", "event_id": None}  # internal sentinel, never sent


class Mailbox:
    """An unbounded queue of messages for the session's reader(s).

    Same interface as asyncio.Queue (put_nowait, get, get_nowait, empty) at a fraction of the cost:
    estimation broadcasts put one message per waiting event after every dispatch. A reader that runs in
    callbacks rather than a task (streams.SessionStream.attach) adds itself to `listeners`, each called on
every put (two readers of one session both hear it, as two tasks' waiters do).
    """

    __slots__ = ("_items", "_waiters", "listeners")

    def __init__(self) -> None:
        self._items: deque[Message] = deque()
        self._waiters: list[asyncio.Future[None]] = []
        self.listeners: list[Callable[[], None]] = []

    def put_nowait(self, msg: Message) -> None:
        self._items.append(msg)
        if self.listeners:
            for listener in self.listeners:
                listener()
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()

    def get_nowait(self) -> Message:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    async def get(self) -> Message:
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return self._items.popleft()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


class Beat:
    """One attached reader's heartbeat: HEARTBEAT into `session`'s mailbox every interval until stopped."""

    __slots__ = ("session", "due", "interval_s")

    def __init__(self, session: Session, due: float, interval_s: float) -> None:
        self.session: Session | None = session
        self.due, self.interval_s = due, interval_s

    def stop(self) -> None:
        self.session = None  # its entry is dropped when it comes due


class Heartbeats:
    """Every reader's heartbeat on one timer of the event loop, not a timer per stream.

    A reader attached at t gets HEARTBEAT at t + interval, t + 2 interval... while it stays (what a
    timer of its own gave). The beats of one interval come due in the order they were added (each is
    re-added an interval after it beat, behind every other), so a FIFO per interval holds them in time
    order and the one timer waits for the earliest head; a stopped beat leaves its FIFO when it comes
    due. Starting and stopping a beat costs no timer handle (a stream per prediction made two). The
    timer's time is kept here: for a time under half a millisecond away (a loop running late on a busy
    box) uvloop's call_at hands back a plain Handle, which has no when().
    """

    def __init__(self) -> None:
        self._due: dict[float, deque[Beat]] = {}  # interval -> beats in due order
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.Handle | None = None
        self._timer_at = 0.0  # when the armed timer fires (loop time)

    def start(self, session: Session, interval_s: float) -> Beat:
        """Beat for `session` every `interval_s` from now, until the returned Beat is stopped."""
        if self._timer is None:
            self._loop = asyncio.get_running_loop()
        assert self._loop is not None
        beat = Beat(session, self._loop.time() + interval_s, interval_s)
        fifo = self._due.get(interval_s)
        if fifo is None:
            fifo = self._due[interval_s] = deque()
        fifo.append(beat)
        if self._timer is None or beat.due < self._timer_at:
            self._arm()
        return beat

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        heads = [fifo[0].due for fifo in self._due.values() if fifo]
        if heads and self._loop is not None:
            self._timer_at = min(heads)
            self._timer = self._loop.call_at(self._timer_at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        assert self._loop is not None
        now = self._loop.time()
        for fifo in self._due.values():
            for _ in range(len(fifo)):  # each beat once a firing (one under SLACK_S is due again at once)
                if fifo[0].due > now + SLACK_S:
                    break
                beat = fifo.popleft()
                if beat.session is not None:
                    beat.session.queue.put_nowait(HEARTBEAT)
                    beat.due = now + beat.interval_s
                    fifo.append(beat)
        for interval in [i for i, fifo in self._due.items() if not fifo]:
            del self._due[interval]
        self._arm()


@dataclass
class Session:
    queue: Mailbox = field(default_factory=Mailbox)
    pending: set[str] = field(default_factory=set)
    readers: int = 0


class Sessions:
    def __init__(self, capacity: int = 2000, is_live: Callable[[str], bool] = lambda event_id: False) -> None:
        self.capacity = capacity
        self.is_live = is_live  # event id -> still waiting or running?
        self._next_scan = capacity + 1  # amortises eviction scans when nothing can be evicted
        self._by_hash: OrderedDict[str, Session] = OrderedDict()
        self.heartbeats = Heartbeats()  # the attached readers' (streams.py)

    def __contains__(self, session_hash: str) -> bool:
        return session_hash in self._by_hash

    def __len__(self) -> int:
        return len(self._by_hash)

    def get(self, session_hash: str) -> Session | None:
        return self._by_hash.get(session_hash)

    def open(self, session_hash: str) -> Session:
        """The session, created if needed (on join)."""
        session = self._by_hash.get(session_hash)
        if session is None:
            session = self._by_hash[session_hash] = Session()
            self._evict(keep=session_hash)
        else:
            self._by_hash.move_to_end(session_hash)
        return session

    def add_pending(self, session_hash: str, event_id: str) -> None:
        self.open(session_hash).pending.add(event_id)

    def send(self, session_hash: str, msg: Message) -> None:
        session = self._by_hash.get(session_hash)
        if session is not None:
            session.queue.put_nowait(msg)

    def drop(self, session_hash: str) -> Session | None:
        return self._by_hash.pop(session_hash, None)

    def _evict(self, keep: str) -> None:
        excess = len(self._by_hash) - self.capacity
        if excess <= 0 or len(self._by_hash) < self._next_scan:
            return
        candidates = [(h, s) for h, s in self._by_hash.items() if h != keep and not s.readers]
        idle = [h for h, s in candidates if not s.pending]
        if len(idle) < excess:
            idle += [h for h, s in candidates if s.pending and not any(map(self.is_live, s.pending))]
        for h in idle[:excess]:
            del self._by_hash[h]
        if len(idle) < excess:  # everything left is busy: do not rescan on every new session
            self._next_scan = len(self._by_hash) + max(self.capacity // 10, 1)
        else:
            self._next_scan = self.capacity + 1
