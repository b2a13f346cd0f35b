"""Observable queue behaviour computed from driver traces: realised concurrency and batch formation.

Timestamps come from several SSE streams read by one client, so two messages sent 1 ms apart by the
server can arrive in either order. Both measures therefore take a slack: an interval only counts as
overlapping another when they share more than `slack_s`, and a job that started while a dispatch was
running (by more than `slack_s`) belongs to it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .driver import Trace


def max_overlap(traces: Iterable[Trace], slack_s: float = 0.05) -> int:
    """Largest number of jobs running at once (process_starts..process_completed, minus slack)."""
    edges: list[tuple[float, int]] = []
    for trace in traces:
        start, end = trace.started_at, trace.completed_at - slack_s
        if end > start:
            edges += [(start, 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(edges):  # at equal times the end (-1) sorts first
        running += step
        peak = max(peak, running)
    return peak


def dispatch_groups(traces: Iterable[Trace], slack_s: float = 0.05) -> list[list[Trace]]:
    """Jobs of a group whose limit is 1 (every scenario that reads dispatches) clustered into its
    dispatches: a job is in the current dispatch when it started while every job of that dispatch was
    still running (more than `slack_s` before the first of them completed); with limit 1 nothing else
    can run beside a dispatch. Read from the runs, not from how close the process_starts arrived: on a
    busy machine one batch's messages, read from several streams, can arrive 100 ms apart."""
    ordered = sorted(traces, key=lambda t: t.started_at)
    groups: list[list[Trace]] = []
    for trace in ordered:
        if groups and trace.started_at < min(t.completed_at for t in groups[-1]) - slack_s:
            groups[-1].append(trace)
        else:
            groups.append([trace])
    return groups


def batch_sizes(traces: Iterable[Trace]) -> list[int]:
    """Sizes of the dispatches (of a group whose limit is 1), in start order."""
    return [len(group) for group in dispatch_groups(traces)]


def completed(traces: Iterable[Trace]) -> list[Trace]:
    """The traces whose join was accepted."""
    return [t for t in traces if t.join_status == 200]
