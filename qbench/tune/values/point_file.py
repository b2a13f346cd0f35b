"""points/<point-id>/point.json as data: `PointFile`, one sweep point as it ended; `read_point_file` never
raises. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qbench.run import Readable
from qbench.tune.values.ceiling import Capacity
from qbench.tune.values.result import PointResult

NAME = "point.json"


@dataclass
class PointFile(Readable, tolerant=True):
    point_id: str = ""  # read_point_file: the folder's name when the file has none
    knobs: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"  # ok | failed | stopped | knobs_not_applied
    reason: str = ""
    detail: str = ""  # the failure's whole text (a server log tail)
    resources: dict[str, float | None] = field(default_factory=dict)  # peak_rss_mb, peak_gpu_mem_mb
    result: PointResult | None = None
    repeats: list[dict[str, Any]] = field(default_factory=list)  # {run_dir, summary: Summary.to_dict()}
    capacity: Capacity | None = None  # its capacity search (objective capacity), probes included
    knobs_applied: dict[str, Any] | None = None  # KnobCheck.to_dict(): verdict, evidence, parallelism, hook
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_id": self.point_id, "knobs": self.knobs, "status": self.status, "reason": self.reason,
            "detail": self.detail, "resources": self.resources,
            "result": self.result.to_dict() if self.result is not None else None, "repeats": self.repeats,
            "capacity": self.capacity.to_dict() if self.capacity is not None else None,
            "knobs_applied": self.knobs_applied, "elapsed_s": self.elapsed_s,
        }


def read_point_file(point_dir: Path) -> PointFile | None:
    """The point.json of `point_dir` (None when it is missing or cannot be read)."""
    try:
        data = json.loads((point_dir / NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    point = PointFile.from_dict(data)
    return point if point.point_id else replace(point, point_id=point_dir.name)
