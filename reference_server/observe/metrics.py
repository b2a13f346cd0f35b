"""Prometheus metrics of the queue, one CollectorRegistry per app (so tests can run several servers)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_TIME_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128)


class ServerMetrics:
    """The queue reports into this object; `/metrics` renders it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.queue_depth = Gauge("qbench_queue_depth", "Waiting events per concurrency group",
                                 ["group"], registry=r)
        self.running_jobs = Gauge("qbench_running_jobs", "Jobs (single events or batches) running",
                                  registry=r)
        self.sessions = Gauge("qbench_sessions", "Open sessions (each holds a message queue)", registry=r)
        self.events_live = Gauge("qbench_events_live", "Events waiting or running", registry=r)
        self.joined = Counter("qbench_events_joined", "Events accepted by /queue/join", ["fn"], registry=r)
        self.rejected = Counter("qbench_joins_rejected", "Joins refused", ["reason"], registry=r)
        self.batch_size = Histogram("qbench_batch_size", "Events per dispatched job", ["fn"],
                                    buckets=_BATCH_BUCKETS, registry=r)
        self.queue_wait = Histogram("qbench_queue_wait_seconds", "Join to dispatch", ["fn"],
                                    buckets=_TIME_BUCKETS, registry=r)
        self.process_time = Histogram("qbench_process_seconds", "Dispatch to completion of a job", ["fn"],
                                      buckets=_TIME_BUCKETS, registry=r)
        self.cancellations = Counter("qbench_cancellations", "Events cancelled", ["state"], registry=r)
        self.completed = Counter("qbench_events_completed", "Events finished", ["fn", "outcome"],
                                 registry=r)

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, kept: the queue reports a few times per event, and prometheus_client
        validates and locks on every `labels` call (children are never removed here)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)
