"""One measurement inside a sweep: overrides -> run_scenario -> Summary -> PointResult.

Runaway detection (`RunawayDetector`, the runner's stop_when hook): over the last `window_s` seconds,
if requests complete at less than `ratio` (half) of the rate they arrive and the backlog (sent - completed)
has grown past `min_backlog`, for `patience` consecutive checks, the queue is running away: the point
can only get worse, so it is stopped early (status `stopped`) and the sweep moves on.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qbench.run.scenario import Scenario, Slo
from qbench.run.summary import summarize
from qbench.tune.grid import Point
from qbench.tune.recommend import Constraints, PointResult
from qbench.tune.settle import settle

if TYPE_CHECKING:
    from qbench.run.loadgen import LiveStats
    from qbench.tune.config import SweepConfig

DEFAULT_WARMUP_S = 0.5


@dataclass
class RunawayDetector:
    window_s: float = 1.0
    ratio: float = 0.5
    min_backlog: int = 8
    min_elapsed_s: float = 1.0
    patience: int = 3
    _history: deque[tuple[float, int, int]] = field(default_factory=deque)
    _strikes: int = 0

    def __call__(self, stats: LiveStats) -> str | None:
        return self.check(stats.elapsed_s, stats.sent, stats.completed)

    def check(self, elapsed_s: float, sent: int, completed: int) -> str | None:
        self._history.append((elapsed_s, sent, completed))
        while len(self._history) > 2 and self._history[1][0] <= elapsed_s - self.window_s:
            self._history.popleft()
        t0, sent0, done0 = self._history[0]
        dt = elapsed_s - t0
        if elapsed_s < self.min_elapsed_s or dt < self.window_s / 2:
            return None
        arrivals, completions = sent - sent0, completed - done0
        backlog, backlog0 = sent - completed, sent0 - done0
        running_away = (
            arrivals > 0
            and completions < self.ratio * arrivals
            and backlog > max(backlog0, self.min_backlog - 1)
        )
        self._strikes = self._strikes + 1 if running_away else 0
        if self._strikes < self.patience:
            return None
        return (
            f"queue ran away: {completions / dt:.1f} completions/s vs {arrivals / dt:.1f} arrivals/s, "
            f"backlog {backlog} and growing after {elapsed_s:.1f} s"
        )


def point_warmup(config: SweepConfig) -> float:
    """The sweep's warm-up, else the scenario's own when it sets one (0 included), else DEFAULT_WARMUP_S;
    never a default for a burst, whose requests all share intended time 0 and would all be excluded."""
    load = config.scenario.load
    if config.warmup_s is not None:
        return config.warmup_s
    if "warmup" in load.model_fields_set or load.shape == "burst":
        return load.warmup
    return DEFAULT_WARMUP_S


def point_overrides(config: SweepConfig, point: Point) -> dict[str, Any]:
    """Scenario overrides for a point: client knobs, point duration, warm-up and the sweep's SLO."""
    overrides: dict[str, Any] = {f"slo.{k}": v for k, v in config.constraints.slo.items()}
    if config.point_duration_s:
        overrides["load.duration"] = config.point_duration_s
    overrides["load.warmup"] = point_warmup(config)
    overrides.update(point.client_overrides())
    return overrides


def run_once(
    scenario: Scenario,
    slo: dict[str, float],
    base_url: str,
    run_dir: Path,
    overrides: dict[str, Any],
    detector: RunawayDetector | None,
) -> tuple[dict[str, Any], str | None]:
    """One run of `scenario` with `overrides`: (summary dict under `slo`, reason if stopped early)."""
    from qbench.run.runner import run_scenario

    result = run_scenario(
        scenario, target=base_url, out_dir=run_dir, overrides=overrides, live=False, stop_when=detector
    )
    if result.run_info.get("stop_kind") == "interrupted":
        raise KeyboardInterrupt  # Ctrl-C during a point: end the sweep, this point stays unchecked
    if scenario.protocol == "gradio":
        settle(base_url, run_dir)  # the next run must not start behind this one's abandoned backlog
    summary = summarize(result.records, Slo(**slo) if slo else None)
    stopped = result.run_info.get("stop_reason") if result.run_info.get("stop_kind") == "deadline" else None
    return summary.to_dict(), stopped


def run_point(
    config: SweepConfig, base_url: str, point: Point, run_dir: Path, detector: RunawayDetector | None
) -> tuple[dict[str, Any], str | None]:
    """One repeat of one point: (summary dict, reason if stopped early)."""
    overrides = point_overrides(config, point)
    return run_once(config.scenario, config.constraints.slo, base_url, run_dir, overrides, detector)


# ---------------------------------------------------------------- summaries -> PointResult


def _stat(summary: dict[str, Any], stat: str, phase: str = "latency_s") -> float | None:
    value = (summary.get("latency") or {}).get(phase, {}).get(stat)
    return float(value) if isinstance(value, int | float) else None


def _slo_actual(summary: dict[str, Any], metric: str) -> float | None:
    stat, _, phase = metric.partition("_")
    return _stat(summary, stat, phase)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def point_result(
    point: Point,
    repeats: list[dict[str, Any]],
    constraints: Constraints,
    status: str,
    reason: str,
    resources: dict[str, float | None],
) -> PointResult:
    """Mean over repeats of each figure (goodput per repeat kept for confidence intervals)."""
    summaries = [r["summary"] for r in repeats]
    goodputs = [float(s.get("goodput_rps", 0.0)) for s in summaries]
    extra = {}
    for metric in constraints.slo:
        if metric not in PointResult.__dataclass_fields__ and not metric.startswith("min_"):
            value = _mean([_slo_actual(s, metric) for s in summaries])
            if value is not None:
                extra[metric] = value
    return PointResult(
        point_id=point.point_id,
        knobs=dict(point.knobs),
        status=status if status in ("ok", "failed", "stopped", "knobs_not_applied") else "failed",  # type: ignore[arg-type]
        reason=reason,
        goodput_rps=statistics.fmean(goodputs) if goodputs else 0.0,
        throughput_rps=_mean([s.get("throughput_rps") for s in summaries]) or 0.0,
        p50_latency_s=_mean([_stat(s, "p50") for s in summaries]),
        p95_latency_s=_mean([_stat(s, "p95") for s in summaries]),
        p99_latency_s=_mean([_stat(s, "p99") for s in summaries]),
        mean_latency_s=_mean([_stat(s, "mean") for s in summaries]),
        p50_service_s=_mean([_stat(s, "p50", "service_s") for s in summaries]),
        error_rate=_mean([s.get("error_rate") for s in summaries]) or 0.0,
        peak_rss_mb=resources.get("peak_rss_mb"),
        peak_gpu_mem_mb=resources.get("peak_gpu_mem_mb"),
        goodput_repeats=goodputs if len(goodputs) > 1 else [],
        extra=extra,
        slo_breaches=sorted({_breach(c) for s in summaries for c in s.get("slo", []) if _e2e_failed(c)}),
    )


def _e2e_failed(check: dict[str, Any]) -> bool:
    return str(check.get("name", "")).endswith("_latency_s") and not check.get("passed", True)


def _breach(check: dict[str, Any]) -> str:
    """A failed end-to-end latency check as a reason ('p95_latency_s: 20.0% of sent requests failed...')."""
    name, actual = check["name"], check.get("actual")
    if actual is None:
        return f"{name}: {check.get('note') or 'not measured'}"
    return f"{name} {actual:.3g} > {check['threshold']:g} (failed requests ranked slowest)"
