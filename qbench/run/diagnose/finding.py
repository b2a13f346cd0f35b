"""`Finding`: one sentence about where a run's limit was, that a user can act on.

Written by run.diagnose.diagnose (from the records and the server's usage), run.diagnose.diagnose_phases
(from the server's own phase timings) and run.diagnose.diagnose_mix (per function of a mix); shown in the
console, `summary.json` (`diagnosis`) and the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    kind: str  # generator | usage | server_cpu | device | per_request_work | idle_slots | model_bound | ...
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
