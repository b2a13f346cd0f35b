"""Sweep reports: heatmaps, Pareto, per-point latencies, the recommendation; missing files become notes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from qbench.errors import QbenchError
from qbench.report.build import build_report, sweep_headline
from qbench.report.sweep_charts import LoadedSweep, heatmap_axes, pareto_front, read_sweep
from qbench.tune.ranking.recommend import Recommendation
from qbench.tune.values.sweep_info import SweepInfo

SWEEP_CHARTS = ("goodput_heatmap", "p95_heatmap", "pareto", "point_distributions")


def test_sweep_report_has_every_chart_and_the_recommendation(sweep_dir: Path, tmp_path: Path) -> None:
    files = build_report(sweep_dir, tmp_path)
    assert [c.name for c in files.charts] == list(SWEEP_CHARTS)
    for chart in files.charts:
        with Image.open(chart.path) as img:
            assert img.width >= 800
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    winner = rec["winner"]
    html = files.html.read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == len(SWEEP_CHARTS)
    assert 'id="recommendation"' in html and "Ready-to-paste code" in html
    assert "demo.queue(" in html and "max_batch_size" in rec["gradio_code"]
    md = files.markdown.read_text()
    assert rec["why"] in md
    assert "```python\n" + rec["gradio_code"].strip() + "\n```" in md
    label = ", ".join(f"{k}={v}" for k, v in winner["knobs"].items())
    assert f"| 1 | winner | {label} |" in md
    assert "failed: server did not start" in md
    assert "- **points**: 12 measured (11 ok, 1 failed, 0 stopped)" in md


def test_heatmap_axes_default_and_choice(sweep_dir: Path, tmp_path: Path) -> None:
    data = read_sweep(sweep_dir)
    assert list(data.knobs) == ["concurrency_limit", "max_batch_size", "max_threads"]
    assert heatmap_axes(data) == ("concurrency_limit", "max_batch_size")
    build_report(sweep_dir, tmp_path, heatmap_axes=("max_threads", "concurrency_limit"))
    with pytest.raises(QbenchError, match="'workers' is not a swept knob; choose from concurrency_limit"):
        build_report(sweep_dir, tmp_path, heatmap_axes=("workers", "concurrency_limit"))


def test_the_readme_heatmap_report_command(sweep_dir: Path, tmp_path: Path) -> None:
    """README: `qbench report reports/<sweep-id> --x concurrency_limit --y max_batch_size`."""
    from typer.testing import CliRunner

    from qbench.cli import app

    args = ["report", str(sweep_dir), "--x", "concurrency_limit", "--y", "max_batch_size",
            "--out", str(tmp_path)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert (tmp_path / "report.html").exists() and list(tmp_path.rglob("goodput_heatmap*.png"))


def test_missing_files_become_notes(sweep_dir: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(sweep_dir, partial)
    (partial / "sweep.parquet").unlink()
    (partial / "recommendation.json").unlink()
    shutil.rmtree(partial / "points" / "p000")
    files = build_report(partial)
    assert any("sweep.parquet is missing" in n for n in files.notes)
    assert "recommendation.json is missing" in files.notes
    assert "- **recommended**: no point met the constraints" in files.markdown.read_text()
    assert len(files.charts) == len(SWEEP_CHARTS)


def test_sweep_of_failed_points_only(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep-bad"
    (sweep / "points" / "p0").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"grid": {"axes": {"max_threads": [1, 2]}}}))
    (sweep / "points" / "p0" / "point.json").write_text(json.dumps(
        {"point_id": "p0", "knobs": {"max_threads": 1}, "status": "failed", "reason": "port in use"}))
    files = build_report(sweep)
    assert "port in use" in files.markdown.read_text()
    assert len(files.charts) == len(SWEEP_CHARTS)


@pytest.mark.parametrize(("points", "front"), [
    ([(10, 1.0), (12, 2.0), (8, 3.0), (12, 1.5)], [0, 3]),
    ([(5, 1.0)], [0]),
    ([(5, 1.0), (5, 1.0)], [0, 1]),
    ([(1, 1.0), (2, 2.0), (3, 3.0)], [0, 1, 2]),
])
def test_pareto_front(points: list[tuple[float, float]], front: list[int]) -> None:
    assert pareto_front(points) == front


def test_mixed_type_knob_stored_as_text_still_fills_the_heatmap(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qbench.report.sweep_charts import heatmaps

    sweep = tmp_path / "sweep-mixed"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps(
        {"grid": {"axes": {"concurrency_limit": [1, 2], "max_size": [4, "none"]}}}))
    rows = [{"point_id": f"p{c}{m}", "concurrency_limit": c, "max_size": m, "goodput_rps": float(c * 10),
             "status": "ok"} for c in (1, 2) for m in ("4", "none")]
    pq.write_table(pa.Table.from_pylist(rows), sweep / "sweep.parquet")
    figure = heatmaps(read_sweep(sweep), "goodput_rps", "Goodput")
    cells = sorted(t.get_text() for t in figure.axes[0].texts)
    assert cells == ["10", "10", "20", "20"]


def test_the_headline_of_a_capacity_sweep_leads_with_the_capacity(tmp_path: Path) -> None:
    winner = {"point_id": "c4-b16", "knobs": {"concurrency_limit": 4, "max_batch_size": 16},
              "capacity_rps": 456.2, "goodput_rps": 19.8, "p95_latency_s": 0.0565}
    rec = {"objective": "capacity", "objective_why": "the question is how many users", "winner": winner}
    data = LoadedSweep(tmp_path, SweepInfo(mode="live", search="sim"), [], Recommendation.from_dict(rec), {})
    headline = dict(sweep_headline(data))
    expected = ("concurrency_limit=4, max_batch_size=16: capacity 456.20 req/s meeting the SLO; at the "
                "scenario's load: goodput 19.80 req/s, p95 56.5 ms")
    assert headline["recommended"] == expected
    as_latency = Recommendation.from_dict({**rec, "objective": "latency"})
    latency = dict(sweep_headline(LoadedSweep(tmp_path, SweepInfo(), [], as_latency, {})))
    assert latency["recommended"].startswith("concurrency_limit=4, max_batch_size=16: goodput 19.80")
