"""The figures every later stage quotes from a run (`Figures`: rates, latency percentiles, error rate)."""

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
        """Each figure's mean over repeats (a latency over those that measured it, else None); none: zeros."""
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
