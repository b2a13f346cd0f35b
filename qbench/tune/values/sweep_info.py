"""sweep.json as data: `SweepInfo`, how a sweep was set up (written once by `qbench sweep`, read by the
reports); `from_dict` never raises and keeps unknown keys in `extra`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from qbench.run import Readable


@dataclass(frozen=True)
class SweepInfo(Readable, tolerant=True, unknown_to="extra"):
    """One sweep.json, typed; every field has a default so that an old or partial file loads."""

    schema_version: int | None = None
    sweep_id: str | None = None
    created_at: str | None = None  # ISO 8601, UTC
    scenario: dict[str, Any] = field(default_factory=dict)  # {"path": ..., "content": Scenario dump}
    mode: str | None = None  # reference | launch | app | target
    grid: dict[str, Any] = field(default_factory=dict)  # {"axes": {knob: [values]}, "links": ...}
    slo: dict[str, Any] = field(default_factory=dict)  # Slo field -> bound
    constraints: dict[str, Any] = field(default_factory=dict)  # qbench.tune.values.constraints.Constraints
    search: str | None = None  # grid | smart | model | sim
    objective: str | None = None  # latency | capacity
    objective_why: str | None = None
    confirm_duration_s: float | None = None
    repeat: int | None = None
    server: dict[str, Any] = field(default_factory=dict)  # settings (masked), launch, target
    options: dict[str, Any] = field(default_factory=dict)  # SweepOptions (what --resume rebuilds)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    def to_dict(self) -> dict[str, Any]:
        """The sweep.json object: every field (None included, as the writer always wrote), then `extra`."""
        return {**{name: getattr(self, name) for name in FIELDS}, **self.extra}

    @property
    def scenario_name(self) -> str | None:
        """The swept scenario's name (scenario.content.name)."""
        content = self.scenario.get("content")
        name = content.get("name") if isinstance(content, dict) else None
        return str(name) if name else None

    @property
    def axes(self) -> dict[str, list[Any]] | None:
        """The grid's knob axes in grid order (None when sweep.json has none: rebuild from the points)."""
        axes = self.grid.get("axes")
        if not isinstance(axes, dict):
            return None
        return {str(k): list(v) for k, v in axes.items() if isinstance(v, list | tuple)}


FIELDS = tuple(f.name for f in dataclasses.fields(SweepInfo) if f.name != "extra")
