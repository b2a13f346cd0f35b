"""The figures every later stage quotes from a run: its rates, its latency percentiles, its error rate.

One type, produced by a run's summary (`Summary.figures()`) and averaged over repeats
(`Figures.mean`). The tuning stages' values are Figures with their own fields added (a point's
result, a capacity probe, a ranked point, a measured search point, one replica of a plan), so the
figures are declared here only and serialise flat beside those fields: point.json, capacity.json,
sweep.parquet and recommendation.json keep their keys.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any


@dataclass(kw_only=True)
class Figures:
    """A run's headline figures (end-to-end latency of its ok requests, in seconds)."""

    throughput_rps: float = 0.0  # ok completions per second
    goodput_rps: float = 0.0  # ok completions meeting the SLO's per-request thresholds, per second
    p50_latency_s: float | None = None  # None: no request completed ok
    p95_latency_s: float | None = None
    p99_latency_s: float | None = None
    mean_latency_s: float | None = None
    error_rate: float = 0.0  # errors / sent

    def figures(self) -> Figures:
        """The figures alone (of a value that adds its own fields to them)."""
        return Figures(**self.figure_values())

    def figure_values(self) -> dict[str, Any]:
        """The figures as keyword arguments, to build another value on the same figures."""
        return {f.name: getattr(self, f.name) for f in fields(Figures)}

    @classmethod
    def mean(cls, runs: Sequence[Figures]) -> Figures:
        """Each figure's mean over repeats of one run (a latency over the repeats that measured it;
        None when none did); no repeats: the zero figures."""
        def mean(name: str) -> float | None:
            present = [v for r in runs if (v := getattr(r, name)) is not None]
            return statistics.fmean(present) if present else None

        return Figures(
            throughput_rps=mean("throughput_rps") or 0.0, goodput_rps=mean("goodput_rps") or 0.0,
            p50_latency_s=mean("p50_latency_s"), p95_latency_s=mean("p95_latency_s"),
            p99_latency_s=mean("p99_latency_s"), mean_latency_s=mean("mean_latency_s"),
            error_rate=mean("error_rate") or 0.0,
        )


FIGURES = tuple(f.name for f in fields(Figures))  # the figures' names, as every file spells them
