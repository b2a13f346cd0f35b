"""`Finding`: one sentence about where a run's limit was, that a user can act on."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    kind: str  # generator | usage | server_cpu | device | per_request_work | idle_slots | model_bound | ...
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
