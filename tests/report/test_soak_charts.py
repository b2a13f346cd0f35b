"""A soak run's over-time charts (qbench.report.soak_charts) from verdicts and samples built by hand:
the series of a signal (health samples, or the report's slices), a panel's units, warm-up shade,
trend line and title, and which groups get a chart. (The report section: test_soak_report.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from qbench.report.charts import new_figure
from qbench.report.soak_charts import COLORS, _panel, _series, render_soak_charts
from qbench.run.soak.command import SoakReport, write_report
from qbench.run.soak.drift import Slope, Verdict
from qbench.run.soak.health import HealthSample

MIB = 2**20


def samples(n: int = 10) -> list[HealthSample]:
    """rss grows 1 MiB a second from 100 MiB; threads unknown on odd seconds."""
    return [HealthSample(t_s=float(t), at=1e9 + t, sent=t, completed=t, ok=t, in_flight=0,
                         rss_bytes=(100 + t) * MIB, threads=6 if t % 2 == 0 else None) for t in range(n)]


def verdict(key: str, kind: str = "growing", unit: str = "B", per_hour: float | None = 3600 * MIB,
            signal: str = "server RSS") -> Verdict:
    slope = None if per_hour is None else Slope(per_hour, per_hour * 0.9, per_hour * 1.1)
    return Verdict(signal=signal, key=key, unit=unit, kind=kind, samples=8, steady_from_s=2.0,
                   start=102 * MIB, end=109 * MIB, per_1k=Slope(1000 * MIB, 900 * MIB, 1100 * MIB),
                   per_hour=slope)


def report(verdicts: list[Verdict], slices: list[dict[str, float | None]] | None = None) -> SoakReport:
    return SoakReport(verdicts, None, 2.0, 9.0, 9, 1.0, 10, slices or [])


def test_a_signals_series_from_samples_leaves_out_unmeasured_ones() -> None:
    t, v = _series("threads", samples(), report([]))
    assert t.tolist() == [0, 2, 4, 6, 8] and v.tolist() == [6] * 5


def test_a_signal_the_slices_carry_is_read_from_them() -> None:
    slices: list[dict[str, float | None]] = [
        {"t_s": 1.0, "p95_latency_s": 0.2}, {"t_s": 3.0, "p95_latency_s": None},
        {"t_s": 5.0, "p95_latency_s": 0.3}]
    t, v = _series("p95_latency_s", samples(), report([], slices))
    assert t.tolist() == [1.0, 5.0] and v.tolist() == [0.2, 0.3]
    t, v = _series("open_files", samples(), report([]))  # never measured
    assert t.size == 0 and v.size == 0


def test_a_panel_in_mib_with_the_warmup_shaded_and_the_trend_over_the_steady_part() -> None:
    fig, (ax,) = new_figure()
    t, v = _series("rss_bytes", samples(), report([]))
    _panel(ax, verdict("rss_bytes"), t, v, steady_from_s=2.0)
    data, trend = ax.get_lines()
    assert np.asarray(data.get_ydata()).tolist() == [100.0 + k for k in range(10)]  # MiB
    trend_x, trend_y = np.asarray(trend.get_xdata()), np.asarray(trend.get_ydata())
    assert trend_x.tolist() == [2.0 + k for k in range(8)]
    assert np.diff(trend_y) == pytest.approx([1.0] * 7)  # 1 MiB a second: the verdict's slope
    assert trend_y.mean() == pytest.approx(105.5)  # centred on the steady part's mean
    assert trend.get_color() == COLORS["growing"]
    (shade,) = ax.patches
    assert shade.get_extents().width > 0
    assert ax.get_ylabel() == "MiB" and ax.get_title(loc="left") == "server RSS: growing"


def test_a_flat_latency_panel_in_ms_and_a_panel_without_samples() -> None:
    fig, (ax, empty) = new_figure(rows=2)
    flat = verdict("p95_latency_s", kind="flat", unit="s", per_hour=0.0, signal="p95 latency")
    _panel(ax, flat, np.array([0.0, 3.0, 6.0]), np.array([0.2, 0.2, 0.2]), steady_from_s=2.0)
    assert np.asarray(ax.get_lines()[0].get_ydata()).tolist() == pytest.approx([200.0] * 3)
    assert ax.get_ylabel() == "ms" and ax.get_lines()[1].get_color() == COLORS["flat"]
    _panel(empty, verdict("threads", unit=""), np.array([]), np.array([]), steady_from_s=2.0)
    assert [t.get_text() for t in empty.texts] == ["server RSS: no samples"]


def test_no_trend_line_without_a_slope_or_with_one_steady_sample() -> None:
    fig, (ax, other) = new_figure(rows=2)
    _panel(ax, verdict("threads", kind="short", unit="", per_hour=None), np.array([0.0, 5.0]),
           np.array([6.0, 6.0]), steady_from_s=2.0)
    assert len(ax.get_lines()) == 1 and ax.get_ylabel() == "count"
    _panel(other, verdict("threads", unit=""), np.array([0.0, 5.0]), np.array([6.0, 6.0]), steady_from_s=2.0)
    assert len(other.get_lines()) == 1  # one sample after the cut: no line to fit


def test_a_chart_per_group_that_has_a_verdict(tmp_path: Path) -> None:
    assert render_soak_charts(tmp_path, tmp_path / "charts") == []  # not a soak run
    (tmp_path / "health.jsonl").write_bytes(b"".join(orjson.dumps(s.to_dict()) + b"\n" for s in samples()))
    write_report(tmp_path, report([verdict("rss_bytes"),
                                   verdict("threads", kind="flat", unit="", signal="server threads")]))
    charts = render_soak_charts(tmp_path, tmp_path / "charts")
    assert [c.name for c in charts] == ["soak_memory", "soak_resources"]
    assert charts[0].title == "Over time: the server's memory and file cache"
    assert charts[0].caption.startswith("server RSS: growing")
    assert all(c.path.read_bytes()[:4] == b"\x89PNG" for c in charts)
