"""End to end: `qbench run` against the reference server (sleep preset), then `qbench report` on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.report.build import build_report
from qbench.report.rundir import read_run
from qbench.run.pipeline import run_scenario
from qbench.run.scenario.schema import Scenario
from qbench.tune.servers.server_process import start_reference_server


@pytest.mark.slow
def test_report_of_a_real_run(tmp_path: Path) -> None:
    scenario = Scenario.model_validate({
        "name": "e2e-report",
        "protocol": "gradio",
        "endpoint": {"api_name": "predict"},
        "payload": {"seed": 1, "inputs": [{"text": {"words": [2, 5]}}]},
        "load": {"rate": 40, "arrival": "poisson", "duration": 3, "warmup": 0.5, "timeout": 20},
        "slo": {"p95_latency_s": 5.0},
    })
    with start_reference_server("sleep") as url:
        result = run_scenario(scenario, target=url, out_dir=tmp_path / "run", live=False)
    files = build_report(result.run_dir)
    run = read_run(result.run_dir)
    assert run.summary.completed_ok > 50
    assert run.summary.latency["latency_s"].p95 == pytest.approx(result.summary.latency["latency_s"].p95)
    html = files.html.read_text()
    assert html.count('<img src="data:image/png;base64,') == 7  # the six run charts and where the time went
    assert "Where the time went" in html and "server phases" in files.markdown.read_text()
    assert url in html and "Server config (/config)" in html
    assert "- **SLO**: passed" in files.markdown.read_text()
    ranks = [r.rank for r in run.records if r.rank is not None]
    assert ranks, "the reference server sends estimation messages: the rank chart has data"
