"""A soak run's "over time" charts: health.jsonl and soak.json -> one panel per judged signal (its samples,
the steady part's trend line, its verdict)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes

from qbench.report.charts import Chart, new_figure, note, save
from qbench.run import HealthSample, SoakReport, Verdict, read_health, read_report

COLORS = {"growing": "#d62728", "falling": "#d62728", "bounded": "#e8871e", "flat": "#2e9a4a",
          "unsure": "#7f7f7f", "short": "#7f7f7f"}
GROUPS = (
    ("soak_memory", "Over time: the server's memory and file cache",
     ("rss_bytes", "status_rss_bytes", "cache_bytes")),
    ("soak_resources", "Over time: the server's open files, threads, processes and queue",
     ("open_files", "threads", "children", "status_waiting")),
    ("soak_latency", "Over time: latency, throughput and errors per slice",
     ("p95_latency_s", "throughput_rps", "error_pct", "queue_size")),
    ("soak_qbench", "Over time: qbench's own memory and open files",
     ("qbench_rss_bytes", "qbench_open_files")),
)
SCALE = {"B": (2**20, "MiB"), "s": (1e-3, "ms")}


def render_soak_charts(run_dir: Path, charts_dir: Path) -> list[Chart]:
    """The over-time charts of a soak run folder ([] for a folder without soak.json)."""
    report = read_report(run_dir)
    if report is None:
        return []
    samples = [s for s in read_health(run_dir / "health.jsonl") if s.live]
    charts = []
    for name, title, keys in GROUPS:
        verdicts = [v for key in keys if (v := report.verdict(key)) is not None]
        if not verdicts:
            continue
        fig, axes = new_figure(len(verdicts), height=2.6)
        for ax, verdict in zip(axes, verdicts, strict=True):
            _panel(ax, verdict, *_series(verdict.key, samples, report), report.steady_from_s)
        axes[-1].set_xlabel("seconds from the start")
        caption = "; ".join(v.text() for v in verdicts)
        charts.append(Chart(name, title, caption, save(fig, charts_dir / f"{name}.png")))
    return charts


def _series(key: str, samples: Sequence[HealthSample], report: SoakReport) -> tuple[np.ndarray, np.ndarray]:
    """Seconds and values of one signal (None values left out)."""
    if any(key in row for row in report.slices):
        pairs = [(row["t_s"], row[key]) for row in report.slices if row.get(key) is not None]
    else:
        pairs = [(s.t_s, getattr(s, key)) for s in samples if getattr(s, key) is not None]
    t, v = (np.array([p[i] for p in pairs], dtype=np.float64) for i in (0, 1))
    return t, v


def _panel(ax: Axes, verdict: Verdict, t: np.ndarray, v: np.ndarray, steady_from_s: float) -> None:
    if t.size == 0:
        note(ax, f"{verdict.signal}: no samples")
        return
    scale, unit = SCALE.get(verdict.unit, (1.0, verdict.unit))
    ax.plot(t, v / scale, ".-", color="#1f5fa8", lw=0.8, ms=3)
    ax.axvspan(float(t.min()), steady_from_s, color="#bbbbbb", alpha=0.35, lw=0)
    steady = t >= steady_from_s
    if verdict.per_hour is not None and steady.sum() >= 2:
        ts = t[steady]
        centre_t, centre_v = float(ts.mean()), float(v[steady].mean())
        line = centre_v + verdict.per_hour.value / 3600 * (ts - centre_t)
        ax.plot(ts, line / scale, "-", color=COLORS.get(verdict.kind, "#000000"), lw=2)
    ax.set_ylabel(unit or "count")
    ax.set_title(f"{verdict.signal}: {verdict.kind}", fontsize=10, loc="left",
                 color=COLORS.get(verdict.kind, "#000000"))
    ax.grid(alpha=0.3)
