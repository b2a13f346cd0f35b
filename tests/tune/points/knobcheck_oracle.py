"""qbench.tune.points.knobcheck's running(t) as it was, one record object at a time (before it read columns):
the oracle tests/tune/points/test_knobcheck.py compares the columns' figures with."""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Sequence

from qbench.run.records import RequestRecord
from qbench.tune.points.knobcheck import (
    DISPATCH_S,
    HOLD_MIN_S,
    REACHED_SHARE,
    SATURATED_MIN_S,
    SATURATED_WAITERS,
    WAITER_SHARE,
    Parallelism,
)


def observed_parallelism(records: Sequence[RequestRecord], lag_s: float = 0.0) -> Parallelism:
    """running(t) and waiting(t) from every sent record (warm-up included: the server's behaviour).
    `lag_s`: the load generator's own event-loop lag (its p99): a message is timed when the loop reads
    it, up to that much late, so an overlap or a wait no longer than it may be the client's, not the
    server's."""
    spans = [r for r in records if r.sent_at_s is not None and r.completed_at_s is not None]
    started = [r for r in spans if r.started_at_s is not None]
    if not started:
        return Parallelism()
    service = statistics.median(r.completed_at_s - r.started_at_s for r in started)  # type: ignore[operator]
    hold = max(HOLD_MIN_S, 0.5 * service, 2 * lag_s)
    dispatch = max(DISPATCH_S, lag_s)
    changes: list[tuple[float, int, int]] = []  # (time, d_running, d_waiting); ends sort first
    waits: list[tuple[float, float]] = []
    for r in spans:
        queued_at = r.joined_at_s if r.joined_at_s is not None else r.sent_at_s
        assert queued_at is not None and r.completed_at_s is not None
        begin = r.started_at_s if r.started_at_s is not None else r.completed_at_s
        if begin > queued_at + dispatch:  # a shorter wait is the dispatcher's latency, not a full queue
            changes += [(queued_at + dispatch, 0, 1), (begin, 0, -1)]
            waits.append((queued_at + dispatch, begin))
        if r.started_at_s is not None:
            changes += [(r.started_at_s, 1, 0), (r.completed_at_s, -1, 0)]
    changes.sort(key=lambda c: (c[0], c[1] + c[2]))
    segments = _segments(changes)
    # while requests waited and something ran: nothing running at all is a server still starting
    # (a first request's imports), not a limit
    waiting = [(d, run) for d, run, wait in segments if wait >= 1 and run >= 1]
    waiting_s = sum(d for d, _ in waiting)
    waiters = _waiters_beside_work(waits, started)
    saturated = (waiting_s >= max(2 * service, SATURATED_MIN_S)
                 and waiters >= max(SATURATED_WAITERS, WAITER_SHARE * len(started)))
    return Parallelism(_held_peak(segments, hold), _weighted_median(waiting), _reached(waiting),
                       saturated, waiting_s, waiters, hold, len(started))


def _waiters_beside_work(waits: list[tuple[float, float]], started: Sequence[RequestRecord]) -> int:
    """How many waits overlapped another request's run. A queue held at its limit makes a share of all
    requests wait; a server that stalls (its event loop or the machine paused 150 ms) holds everything
    at once, and the one request caught "running" across the stall looks like a limit of 1 to the one
    or two that waited behind it: an incident, not a pattern."""
    runs = sorted((r.started_at_s or 0.0, r.completed_at_s or 0.0) for r in started)
    starts = [s for s, _ in runs]
    latest_end = list(itertools.accumulate((e for _, e in runs), max))
    count = 0
    for begin, end in waits:  # a run that started before the wait ended and ended after it began
        i = bisect.bisect_left(starts, end)
        count += bool(i and latest_end[i - 1] > begin)
    return count


def _segments(changes: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """(duration, running, waiting) of each interval between changes."""
    out: list[tuple[float, int, int]] = []
    running = waiting = 0
    for (t, dr, dw), nxt in zip(changes, [*changes[1:], None], strict=True):
        running, waiting = running + dr, waiting + dw
        if nxt is not None and nxt[0] > t:
            out.append((nxt[0] - t, running, waiting))
    return out


def _held_peak(segments: list[tuple[float, int, int]], hold: float) -> int:
    """The highest running level held without a break for `hold` seconds. A request's process_starts
    can arrive before the end of the one it replaced (two streams, no order between them): such an
    overlap is short next to a service time, a real one lasts about one."""
    top = max((r for _, r, _ in segments), default=0)
    for k in range(top, 0, -1):
        span = 0.0
        for duration, running, _ in segments:
            span = span + duration if running >= k else 0.0
            if span >= hold:
                return k
    return 0


def _reached(samples: list[tuple[float, int]]) -> int:
    """The highest level running(t) was at or above for REACHED_SHARE of the time: out-of-order
    messages lift it above the limit only for moments, a slow dispatcher keeps it below for some."""
    total = sum(d for d, _ in samples)
    top = max((level for _, level in samples), default=0)
    for k in range(top, 0, -1):
        if sum(d for d, level in samples if level >= k) >= REACHED_SHARE * total:
            return k
    return 0


def _weighted_median(samples: list[tuple[float, int]]) -> int:
    """The level running(t) sits at for half the time or more (0 without samples). While requests wait,
    a work-conserving queue runs exactly its limit, but for the instants between one job's end and the
    next one's start, and out-of-order messages."""
    total = sum(d for d, _ in samples)
    seen = 0.0
    for duration, level in sorted(samples, key=lambda s: s[1]):
        seen += duration
        if seen >= total / 2:
            return level
    return 0
