"""One measurement: a scenario run under overrides (`run_measured`, every tuning stage's run, stopped early on
a runaway queue) -> the mean over repeats, a PointResult. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qbench.run import (
    Columns,
    Figures,
    LiveTrend,
    RequestRecord,
    Scenario,
    Slo,
    Summary,
    e2e_breaches,
    slo_actual,
    summarize,
    verdict,
)
from qbench.tune.knobs.grid import Point
from qbench.tune.servers.settle import settle
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult

if TYPE_CHECKING:
    from qbench.run import LiveStats


class RunawayDetector(LiveTrend):
    """The runner's stop_when hook: `LiveTrend` (qbench.run.results.steady) on the run's live counts."""

    def __call__(self, stats: LiveStats) -> str | None:
        return self.check(stats.elapsed_s, stats.sent, stats.completed)


@dataclass
class PointRun:
    """One run as the tuning stages read it: its summary under the SLO, why it stopped early, its records."""

    summary: Summary
    stopped: str | None
    records: list[RequestRecord]
    server: dict[str, Any] | None = None  # run.json's `server` (discovery: a balancer in front, `front`)


def run_measured(
    scenario: Scenario,
    slo: dict[str, float],
    base_url: str,
    run_dir: Path,
    overrides: dict[str, Any],
    detector: RunawayDetector | None,
) -> PointRun:
    """One run of `scenario` with `overrides`: its summary under `slo`, why `detector` stopped it early, its
    records. Raises when every opening request failed one way."""
    from qbench.run import run_scenario

    result = run_scenario(
        scenario, target=base_url, out_dir=run_dir, overrides=overrides, live=False, stop_when=detector
    )
    failed = verdict(result.outcome) if result.outcome.failed_opening else None
    if failed is not None:  # every opening request failed one way: a broken point or target, not a
        raise failed  # measurement (a TargetError naming the error and its likely cause)
    if result.outcome.interrupted:
        raise KeyboardInterrupt  # Ctrl-C during a point: end the sweep, this point stays unchecked
    if scenario.protocol == "gradio":
        settle(base_url, run_dir)  # the next run must not start behind this one's abandoned backlog
    summary = summarize(Columns.of(result.records), Slo(**slo) if slo else None,
                        generator=result.summary.generator, server_traces=result.summary.server_traces)
    return PointRun(summary, result.outcome.stopped_early, result.records, result.run_info.server or None)


# ---------------------------------------------------------------- summaries -> PointResult


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def point_result(
    point: Point,
    summaries: list[Summary],
    constraints: Constraints,
    status: str,
    reason: str,
    resources: dict[str, float | None],
) -> PointResult:
    """The mean over repeats (one Summary each) of each figure, each repeat's goodput kept for its CI."""
    goodputs = [s.goodput_rps for s in summaries]
    extra = {}
    for metric in constraints.slo:
        if metric not in PointResult.__dataclass_fields__ and metric not in ("min_goodput", "min_throughput"):
            value = _mean([slo_actual(s, metric)[0] for s in summaries])
            if value is not None:
                extra[metric] = value

    return PointResult(
        point_id=point.point_id,
        knobs=dict(point.knobs),
        status=status if status in ("ok", "failed", "stopped", "knobs_not_applied") else "failed",  # type: ignore[arg-type]
        reason=reason,
        **Figures.mean([s.figures() for s in summaries]).figure_values(),
        p50_service_s=_mean([s.phase("service_s").p50 for s in summaries]),
        peak_rss_mb=resources.get("peak_rss_mb"),
        peak_gpu_mem_mb=resources.get("peak_gpu_mem_mb"),
        goodput_repeats=goodputs if len(goodputs) > 1 else [],
        extra=extra,
        slo_breaches=e2e_breaches(summaries),
    )
