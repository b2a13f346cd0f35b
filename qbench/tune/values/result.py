"""One grid point's result: PointResult (its figures, status, memory, capacity and knob verdict), and the
max_size advice a recommendation carries."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from qbench.run import Figures, Readable, ReadableOrNone, SloCheck
from qbench.tune.knobs.grid import Value
from qbench.tune.values.ceiling import CapacitySummary

Status = Literal["ok", "failed", "stopped", "knobs_not_applied"]

# Two-sided 95 % Student-t quantiles by degrees of freedom (df > 30 uses the normal 1.96).
_T95: Final = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


@dataclass(frozen=True)
class KnobVerdict(ReadableOrNone, tolerant=True):
    """Whether a point's knobs took effect (qbench.tune.points.knobcheck.KnobCheck's verdict and evidence);
    read as None where absent (files of releases that wrote `{}`)."""

    verdict: str
    evidence: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MaxSizeAdvice(ReadableOrNone, tolerant=True):
    """max_size = floor(throughput x queue-wait budget) and why; max_size None: leave the queue unbounded."""

    why: str
    max_size: int | None = None
    throughput_rps: float | None = None
    tolerated_wait_s: float | None = None
    service_s: float | None = None
    queue_wait_budget_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """recommendation.json's `max_size_advice`: the figures that were computed, then `why`."""
        figures = {k: v for k, v in asdict(self).items() if k != "why" and (v is not None or k == "max_size")}
        return {**figures, "why": self.why}




@dataclass
class PointResult(Figures, Readable, tolerant=True):
    """What one grid point measured (its figures: the mean over repeats) and how it ended."""

    point_id: str
    knobs: dict[str, Value]
    status: Status = "ok"
    reason: str = ""
    p50_service_s: float | None = None
    peak_rss_mb: float | None = None
    peak_gpu_mem_mb: float | None = None
    goodput_repeats: list[float] = field(default_factory=list)  # goodput of each repeat (rps)
    extra: dict[str, float] = field(default_factory=dict)  # other SLO actuals (p95_queue_wait_s, ...)
    # end-to-end latency SLO checks the runs failed with their failed requests ranked slowest (as `qbench
    # run` says), even where the ok-only figures pass: one per bound
    slo_breaches: list[SloCheck] = field(default_factory=list)
    # objective capacity: the highest arrival rate meeting the SLO (qbench.tune.capacity.bisect) and its
    # search (capacity_rps, failing_rate_rps, tolerance, converged, probes counted); None when not measured
    capacity_rps: float | None = None
    capacity: CapacitySummary | None = None
    # whether the knobs took effect (qbench.tune.points.knobcheck); None when not checked
    knob_check: KnobVerdict | None = None

    def goodput_ci(self) -> tuple[float, float]:
        """95 % confidence interval of goodput over repeats ((g, g) with a single repeat)."""
        values = self.goodput_repeats or [self.goodput_rps]
        if len(values) < 2:
            return (values[0], values[0])
        mean = statistics.fmean(values)
        df = len(values) - 1
        t = next((_T95[k] for k in sorted(_T95) if k >= df), 1.96)
        half = t * statistics.stdev(values) / math.sqrt(len(values))
        return (mean - half, mean + half)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Files written before the breaches were typed checks kept them as reasons in words."""
        breaches = data.get("slo_breaches")
        if isinstance(breaches, list):
            data["slo_breaches"] = [b if isinstance(b, Mapping) else
                                    {"name": "", "threshold": 0.0, "actual": None, "passed": False,
                                     "kind": "max", "note": str(b)} for b in breaches]
        return data
