"""capacity.json as data: `CapacityFile`, what `qbench capacity` writes (qbench.tune.capacity.command)
and `qbench report` reads; older schemas read with defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qbench.run import Readable
from qbench.tune.values.ceiling import Capacity, Probe
from qbench.tune.verdicts.overload import Overload

SCHEMA_VERSION = 2  # 2: probes' steadiness and duration, confirm/overload probes, probe_length, overload


@dataclass(frozen=True)
class CapacityFile(Readable, tolerant=True):
    """One `qbench capacity` folder's capacity.json (the layout: qbench.tune.capacity.command); a
    missing or malformed part reads as its default."""

    result: Capacity = field(default_factory=Capacity)
    target: str = ""
    scenario: dict[str, Any] = field(default_factory=dict)  # {path, content}
    slo: dict[str, float] = field(default_factory=dict)
    max_error_rate: float | None = None
    plan: dict[str, Any] = field(default_factory=dict)  # SearchPlan as a dict
    probe_duration_s: float | None = None
    max_probe_duration_s: float | None = None
    confirm_duration_s: float | None = None
    probe_length: dict[str, Any] = field(default_factory=dict)  # seconds, at_rps, why, ...
    warmup_s: float | None = None
    think_time_s: float | None = None
    estimate_users: int | None = None
    users: float | None = None  # equivalent users
    answer: list[tuple[str, str]] = field(default_factory=list)  # the answer in words: (label, text)
    created_at: str = ""
    schema_version: int = SCHEMA_VERSION

    @property
    def probes(self) -> list[Probe]:
        return self.result.probes

    @property
    def rate_probes(self) -> list[Probe]:
        """The open-loop probes of the bracket and bisection, by offered rate (a repeat appears twice)."""
        return sorted((p for p in self.probes if p.kind == "rate"), key=lambda p: p.rate_rps)

    @property
    def overload(self) -> Overload | None:
        return self.result.overload

    @property
    def scenario_name(self) -> str | None:
        content = self.scenario.get("content")
        name = content.get("name") if isinstance(content, Mapping) else None
        return str(name) if name else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "kind": "capacity",
            "created_at": self.created_at,
            "scenario": self.scenario,
            "target": self.target,
            "slo": self.slo,
            "max_error_rate": self.max_error_rate,
            "plan": self.plan,
            "probe_duration_s": self.probe_duration_s,
            "max_probe_duration_s": self.max_probe_duration_s,
            "confirm_duration_s": self.confirm_duration_s,
            "probe_length": self.probe_length,
            "warmup_s": self.warmup_s,
            "think_time_s": self.think_time_s,
            "estimate_users": self.estimate_users,
            "result": self.result.to_dict(),
            "users": self.users,
            "answer": [list(line) for line in self.answer],
        }

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Schema 1 wrote no version; a probe without an offered rate and a verdict, and an answer line that
        is not a pair, are left out."""
        data.setdefault("schema_version", 1)
        result, answer = data.get("result"), data.get("answer")
        if isinstance(result, Mapping) and isinstance(result.get("probes"), list):
            data["result"] = {**result, "probes": [p for p in result["probes"] if isinstance(p, Mapping)
                                                   and "rate_rps" in p and "passed" in p]}
        if isinstance(answer, list):
            data["answer"] = [line for line in answer if isinstance(line, list) and len(line) == 2]
        return data
