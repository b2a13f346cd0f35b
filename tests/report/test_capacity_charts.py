"""Capacity charts (qbench.report.capacity_charts) from capacity.json contents built in memory: the
knee's percentile lines, SLO bounds, answer lines, confirmation star and failed probes, the run past
the capacity on two axes, and what reading a folder notes. (Whole reports: test_capacity_report.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from qbench.report.capacity_charts import (
    LoadedCapacity,
    is_capacity_dir,
    knee,
    overload_chart,
    read_capacity,
    render_capacity_charts,
)
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.verdicts.overload import Overload


def probe(rate: float, p95: float, passed: bool, **kw: Any) -> dict[str, Any]:
    return {"rate_rps": rate, "kind": "rate", "passed": passed, "p50_latency_s": p95 / 2,
            "p95_latency_s": p95, "p99_latency_s": p95 * 1.5, "verdict": "pass" if passed else "fail", **kw}


def loaded(probes: list[dict[str, Any]], capacity: float | None = 40.0, failing: float | None = 44.0,
           slo: dict[str, float] | None = None) -> LoadedCapacity:
    result = {"capacity_rps": capacity, "failing_rate_rps": failing, "probes": probes}
    file = CapacityFile.from_dict({"slo": {"p95_latency_s": 0.2} if slo is None else slo, "result": result})
    return LoadedCapacity(Path("."), file)


def labels(ax: Axes) -> list[str]:
    return ax.get_legend_handles_labels()[1]


def test_the_knee_draws_each_percentile_against_the_offered_rate() -> None:
    probes = [probe(30.0, 0.1, True), probe(40.0, 0.15, True), probe(48.0, 0.5, False),
              probe(44.0, 0.25, False), probe(39.0, 0.18, True, kind="confirm", duration_s=60.0)]
    (ax,) = knee(loaded(probes, slo={"p95_latency_s": 0.2, "p50_queue_wait_s": 0.1})).axes
    assert labels(ax) == ["p50", "p95", "p99", "p95 of the 60 s confirmation", "probe failed the SLO",
                          "SLO p95_latency_s <= 0.2", "capacity 40 req/s", "SLO first fails 44 req/s"]
    p95 = ax.get_lines()[1]
    assert np.asarray(p95.get_xdata()).tolist() == [30.0, 40.0, 44.0, 48.0]  # open-loop probes, by rate
    assert np.asarray(p95.get_ydata()).tolist() == [0.1, 0.15, 0.25, 0.5]
    failed = ax.get_lines()[4]
    assert np.asarray(failed.get_xdata()).tolist() == [44.0, 48.0]
    assert len(ax.patches) == 1  # the band between the capacity and the first failing rate
    assert ax.get_yscale() == "linear"


def test_a_probe_without_a_percentile_is_left_out_of_that_line() -> None:
    gap = probe(20.0, 0.1, True)
    gap["p99_latency_s"] = None
    (ax,) = knee(loaded([gap, probe(30.0, 0.2, True)], failing=None)).axes
    p50, p95, p99 = ax.get_lines()[:3]
    assert np.asarray(p99.get_xdata()).tolist() == [30.0]
    assert "SLO first fails" not in " ".join(labels(ax)) and len(ax.patches) == 0


def test_latencies_spread_past_20x_go_on_a_log_scale() -> None:
    (ax,) = knee(loaded([probe(10.0, 0.01, True), probe(50.0, 5.0, False)])).axes
    assert ax.get_yscale() == "log"


def test_a_knee_without_probes_says_so() -> None:
    (ax,) = knee(loaded([], capacity=None, failing=None)).axes
    assert [t.get_text() for t in ax.texts] == ["No open-loop probe: nothing to plot"]


OVERLOAD: dict[str, Any] = {
    "rate_rps": 52.0, "capacity_rps": 40.0, "base_rps": 39.0, "end_rps": 30.0, "fell_at_waiting": 100,
    "max_waiting": 200, "max_size": 80, "advice": "set max_size=80",
    "series": [[1.0, 39.0, 10.0], [3.0, 35.0, 60.0], [5.0, 30.0, 200.0], ["bad row"]],
}


def test_the_run_past_the_capacity_on_two_axes() -> None:
    overload = Overload.from_dict(OVERLOAD)
    assert overload is not None
    fig = overload_chart(overload)
    left, right = fig.axes
    assert left.get_title() == "Past the capacity: 52 req/s offered"
    ok, capacity = left.get_lines()
    assert np.asarray(ok.get_ydata()).tolist() == [39.0, 35.0, 30.0]  # the malformed row left out
    assert np.asarray(capacity.get_ydata()).tolist() == [40.0, 40.0]
    (waiting,) = right.get_lines()
    assert np.asarray(waiting.get_ydata()).tolist() == [10.0, 60.0, 200.0]
    legend = left.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
        "ok completions/s", "capacity 40 req/s", "requests waiting"]


def test_a_run_past_the_capacity_without_series_says_so() -> None:
    overload = Overload.from_dict({**OVERLOAD, "series": []})
    assert overload is not None
    (ax,) = overload_chart(overload).axes
    assert [t.get_text() for t in ax.texts] == ["No series recorded"]


def test_reading_a_folder_notes_what_is_missing_and_reads_a_plan(tmp_path: Path) -> None:
    assert not is_capacity_dir(tmp_path)
    missing = read_capacity(tmp_path)
    assert missing.notes == ["capacity.json is missing"] and missing.file.rate_probes == []
    (tmp_path / "capacity.json").write_text(json.dumps({"result": {"probes": []}}))
    assert is_capacity_dir(tmp_path)
    assert read_capacity(tmp_path).notes == ["capacity.json holds no open-loop probe"]
    (tmp_path / "plan.json").write_text(json.dumps({"kind": "plan", "lines": [["replicas", "3"], ["bad"]]}))
    assert read_capacity(tmp_path).plan == [("replicas", "3")]


def test_render_writes_the_knee_and_the_overload_only_when_measured(tmp_path: Path) -> None:
    data = loaded([probe(30.0, 0.1, True)])
    (chart,) = render_capacity_charts(data, tmp_path)
    assert chart.name == "capacity_knee" and chart.path == tmp_path / "capacity_knee.png"
    assert chart.path.read_bytes()[:4] == b"\x89PNG"
