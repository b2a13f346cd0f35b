"""Observable queue behaviour computed from driver traces: realised concurrency and batch formation.

Timestamps come from several SSE streams read by one client, so two messages sent 1 ms apart by the
server can arrive in either order. Both measures therefore take a slack: an interval only counts as
overlapping another when they share more than `slack_s`, and process_starts closer than `gap_s`
belong to the same dispatch.
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


def dispatch_groups(traces: Iterable[Trace], gap_s: float = 0.05) -> list[list[Trace]]:
    """Jobs clustered by process_starts time: each cluster is one dispatch (one batch)."""
    ordered = sorted(traces, key=lambda t: t.started_at)
    groups: list[list[Trace]] = []
    for trace in ordered:
        if groups and trace.started_at - groups[-1][-1].started_at < gap_s:
            groups[-1].append(trace)
        else:
            groups.append([trace])
    return groups


def batch_sizes(traces: Iterable[Trace], gap_s: float = 0.05) -> list[int]:
    """Sizes of the dispatches, in start order."""
    return [len(group) for group in dispatch_groups(traces, gap_s)]


def completed(traces: Iterable[Trace]) -> list[Trace]:
    """The traces whose join was accepted."""
    return [t for t in traces if t.join_status == 200]
