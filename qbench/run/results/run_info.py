"""run.json as data: `RunInfo`, the facts of a run its records cannot hold, written by the runner in two
steps and read back by `RunInfo.from_dict`, which never raises. Design: docs/design/records-and-results.md."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qbench.run.json_values import Readable
from qbench.run.results.server_phases import TraceReport
from qbench.run.results.summary import GeneratorStats

# What the load generator and executors report (run.json's "Load generator" block in the report)
GENERATOR_KEYS = ("generator", "stop_kind", "stop_reason", "max_in_flight", "planned_requests", "payload",
                  "clock", "lost_workers")  # clock, lost_workers: a Ray run (qbench.run.load.ray_executor)


@dataclass(frozen=True)
class RunInfo(Readable, tolerant=True, unknown_to="extra"):
    """One run.json, typed; every field has a default so that an old or partial file loads."""

    scenario: dict[str, Any] = field(default_factory=dict)  # the Scenario as run (model_dump by alias)
    target: str | None = None
    qbench_version: str | None = None
    host: dict[str, Any] = field(default_factory=dict)  # hostname, platform, python, cpus
    started_at: str | None = None  # ISO 8601, UTC
    server: dict[str, Any] = field(default_factory=dict)  # discovery + /config + /status (+ status_end)
    auth: dict[str, Any] = field(default_factory=dict)  # login, accounts, logins, relogins (no secret)
    # the executors' report (qbench.run.load.executor); None / () when the run ran to its end
    stop_kind: str | None = None  # "interrupted" or "deadline" (see qbench.run.results.outcome)
    stop_reason: str | None = None
    failed_opening: str | None = None
    lost_workers: tuple[str, ...] = ()
    max_in_flight: int | None = None
    planned_requests: int | None = None
    payload: dict[str, Any] | None = None
    clock: dict[str, Any] | None = None
    generator: GeneratorStats | None = None  # written when the run finished
    records: int | None = None
    server_traces: TraceReport | None = None  # how the server's own phases were read (server_phases)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    @classmethod
    def start(cls, scenario: dict[str, Any], target: str, qbench_version: str, host: dict[str, Any],
              started_at: str) -> RunInfo:
        """What the runner knows before the target answered."""
        return cls(scenario=scenario, target=target, qbench_version=qbench_version, host=host,
                   started_at=started_at)

    def to_dict(self) -> dict[str, Any]:
        """The run.json object: every field that is set (None, {} and () are left out), then `extra`."""
        out: dict[str, Any] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if name in ("generator", "server_traces") and value is not None:
                value = dataclasses.asdict(value)
            elif name == "lost_workers":
                value = list(value)
            if value is not None and value != {} and value != []:
                out[name] = value
        return {**out, **self.extra}

    def updated(self, changes: Mapping[str, Any]) -> RunInfo:
        """This info with the entries of a run.json-shaped mapping (an executor's report) laid over it."""
        return RunInfo.from_dict({**self.to_dict(), **changes})

    @property
    def logged_in(self) -> bool:
        return bool(self.auth.get("login"))

    def load_generator(self) -> dict[str, Any]:
        """The load generator's own report (GENERATOR_KEYS), as stored; for the report's details."""
        stored = self.to_dict()
        return {k: stored[k] for k in GENERATOR_KEYS if k in stored}


FIELDS = tuple(f.name for f in dataclasses.fields(RunInfo) if f.name != "extra")
