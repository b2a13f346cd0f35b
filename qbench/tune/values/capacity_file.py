"""capacity.json as data: `CapacityFile`, what `qbench capacity` writes (qbench.tune.capacity.capacity_run)
and `qbench report` reads; older schemas read with defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qbench.run import json_number
from qbench.tune.values.capacity import Capacity, Probe
from qbench.tune.verdicts.overload import Overload

SCHEMA_VERSION = 2  # 2: probes' steadiness and duration, confirm/overload probes, probe_length, overload


@dataclass(frozen=True)
class CapacityFile:
    """One `qbench capacity` folder's capacity.json (the layout: qbench.tune.capacity.capacity_run)."""

    result: Capacity
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
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityFile:
        """A capacity.json of any schema; a missing or malformed part is left at its default."""
        result = data.get("result")
        answer = data.get("answer")
        return cls(
            result=_capacity(result if isinstance(result, Mapping) else {}),
            target=str(data.get("target") or ""),
            scenario=_mapping(data.get("scenario")),
            slo={str(k): v for k, v in _mapping(data.get("slo")).items() if json_number(v) is not None},
            max_error_rate=json_number(data.get("max_error_rate")),
            plan=_mapping(data.get("plan")),
            probe_duration_s=json_number(data.get("probe_duration_s")),
            max_probe_duration_s=json_number(data.get("max_probe_duration_s")),
            confirm_duration_s=json_number(data.get("confirm_duration_s")),
            probe_length=_mapping(data.get("probe_length")),
            warmup_s=json_number(data.get("warmup_s")),
            think_time_s=json_number(data.get("think_time_s")),
            estimate_users=users if isinstance(users := data.get("estimate_users"), int) else None,
            users=json_number(data.get("users")),
            answer=[(str(p[0]), str(p[1])) for p in answer if isinstance(p, list) and len(p) == 2]
            if isinstance(answer, list) else [],
            created_at=str(data.get("created_at") or ""),
            schema_version=int(data.get("schema_version") or 1),
        )


def _capacity(data: Mapping[str, Any]) -> Capacity:
    """The search's result; probes without an offered rate and a verdict are left out."""
    probes = data.get("probes")
    kept = [dict(p) for p in probes if isinstance(p, Mapping) and "rate_rps" in p and "passed" in p] \
        if isinstance(probes, list) else []
    return Capacity.from_dict({**data, "probes": kept})


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}
