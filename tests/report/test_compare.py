"""qbench compare: relative changes, regression thresholds, the scenario SLO, exit codes."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_synth import simulate, write_run
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError, SloViolation
from qbench.report.compare import Delta, compare, parse_max_regression
from qbench.report.rundir import mix_slos, scenario_slo
from qbench.run.records.schema import RequestRecord
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import summarize

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    return {
        "base": write_run(root / "base", simulate(n=200, service_s=0.05, seed=3)),
        "same": write_run(root / "same", simulate(n=200, service_s=0.05, seed=3)),
        "slow": write_run(root / "slow", simulate(n=200, service_s=0.09, seed=3)),
        "slo": write_run(root / "slo", simulate(n=200, service_s=0.05, seed=3),
                         {"scenario": {"name": "x", "slo": {"p95_latency_s": 0.001}}}),
    }


@pytest.mark.parametrize(("a", "b", "better", "threshold", "change", "regressed"), [
    (1.0, 1.2, "lower", 0.1, 0.2, True),     # latency up 20 %, 10 % allowed
    (1.0, 1.05, "lower", 0.1, 0.05, False),
    (1.0, 0.5, "lower", 0.1, -0.5, False),   # faster is never a regression
    (10.0, 9.0, "higher", 0.05, -0.1, True),  # throughput down 10 %, 5 % allowed
    (10.0, 12.0, "higher", 0.05, 0.2, False),
    (0.0, 0.01, "lower", 0.5, math.inf, True),  # errors appeared where there were none
    (0.0, 0.0, "lower", 0.0, 0.0, False),
    (1.0, None, "lower", 0.1, None, True),    # the metric vanished (no completed request in B)
    (1.0, 2.0, "lower", None, 1.0, False),    # no threshold: reported, never a regression
])
def test_delta(a: float, b: float | None, better: str, threshold: float | None, change: float | None,
               regressed: bool) -> None:
    d = Delta("m", a, b, better, threshold)  # type: ignore[arg-type]
    assert d.change == (pytest.approx(change) if change is not None and math.isfinite(change) else change)
    assert d.regressed is regressed


def test_parse_max_regression() -> None:
    assert parse_max_regression(["p95_latency_s=10%", "throughput_rps=0.05"]) == {
        "p95_latency_s": pytest.approx(0.1), "throughput_rps": 0.05}
    with pytest.raises(ScenarioError, match="METRIC one of throughput_rps"):
        parse_max_regression(["p95_latncy_s=10%"])
    with pytest.raises(ScenarioError, match="'ten%' is not a number"):
        parse_max_regression(["p95_latency_s=ten%"])
    with pytest.raises(ScenarioError, match=">= 0"):
        parse_max_regression(["p95_latency_s=-1%"])


def test_identical_runs_pass(runs: dict[str, Path]) -> None:
    result = compare(runs["base"], runs["same"], {"p95_latency_s": 0.0, "throughput_rps": 0.0})
    assert result.passed
    assert all(d.change == 0 for d in result.deltas)
    result.check()


def test_notes_flag_different_scenarios_and_load(runs: dict[str, Path], tmp_path: Path) -> None:
    assert compare(runs["base"], runs["same"]).notes() == []
    busier = write_run(tmp_path / "busier", simulate(n=200, rate_rps=30, service_s=0.05, seed=3),
                       {"scenario": {"name": "other"}})
    notes = compare(runs["base"], busier).notes()
    assert notes[0] == "A and B ran different scenarios (synthetic vs other)"
    assert notes[1].startswith("the offered load differs (")


def test_slower_run_regresses(runs: dict[str, Path]) -> None:
    result = compare(runs["base"], runs["slow"], {"p95_latency_s": 0.1, "p50_service_s": 0.1})
    names = [d.name for d in result.regressions()]
    assert names == ["p95_latency_s", "p50_service_s"]
    with pytest.raises(SloViolation, match=r"p95_latency_s \+\d+\.\d% \(allowed 10.0%\)"):
        result.check()
    assert compare(runs["base"], runs["slow"], {"p95_latency_s": 1000.0}).passed
    frame = result.to_frame()
    assert frame.loc[frame["regressed"]].index.tolist() == names
    p95 = frame.loc["p95_latency_s"]
    assert p95["change"] == pytest.approx((p95["b"] - p95["a"]) / p95["a"]) and p95["threshold"] == 0.1


def test_cli_exit_codes(runs: dict[str, Path]) -> None:
    ok = runner.invoke(app, ["compare", str(runs["base"]), str(runs["same"]),
                             "--max-regression", "p95_latency_s=5%"])
    assert ok.exit_code == 0, ok.output
    assert "p95_latency_s" in ok.output and "no regression" in ok.output
    bad = runner.invoke(app, ["compare", str(runs["base"]), str(runs["slow"]), "--max-regression",
                              "p95_latency_s=10%", "--max-regression", "throughput_rps=5%"])
    assert bad.exit_code == 3
    assert "REGRESSED" in bad.output and "p95_latency_s" in bad.output
    typo = runner.invoke(app, ["compare", str(runs["base"]), str(runs["same"]), "--max-regression", "p95=1"])
    assert typo.exit_code == 2 and "--max-regression 'p95=1'" in typo.output


def test_scenario_slo_gates_candidate(runs: dict[str, Path]) -> None:
    result = runner.invoke(app, ["compare", str(runs["base"]), str(runs["slo"])])
    assert result.exit_code == 3 and "SLO p95_latency_s" in result.output
    assert runner.invoke(app, ["compare", str(runs["base"]), str(runs["slo"]), "--no-slo"]).exit_code == 0


def test_sweep_stands_for_its_recommended_point(runs: dict[str, Path], sweep_dir: Path) -> None:
    result = compare(sweep_dir, runs["base"])
    winner = result.a.path
    assert winner.parent.name == "points" and winner.parent.parent == sweep_dir
    missing = runner.invoke(app, ["compare", str(runs["base"]), str(runs["base"].parent / "nothing")])
    assert missing.exit_code == 2 and "not a directory" in missing.output


def test_report_cli(runs: dict[str, Path], tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(runs["base"]), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report.html").exists() and "## qbench run" in result.output
    half = runner.invoke(app, ["report", str(runs["base"]), "--x", "max_threads"])
    assert half.exit_code == 2 and "--x and --y go together" in half.output


def test_compare_chart_for_paired_runs(runs: dict[str, Path], tmp_path: Path) -> None:
    """base and slow ran one schedule (same seed): the chart of B - A per request is written."""
    chart = tmp_path / "paired.png"
    out = runner.invoke(app, ["compare", str(runs["base"]), str(runs["slow"]), "--chart", str(chart)])
    assert out.exit_code == 0, out.output
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
    other = write_run(tmp_path / "other", simulate(n=200, service_s=0.05, seed=11))
    args = ["compare", str(runs["base"]), str(other), "--chart", str(tmp_path / "x.png")]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "--chart: unpaired" in refused.output
    assert not (tmp_path / "x.png").exists()


def _with_summary(path: Path, records: list[RequestRecord], extra: dict[str, Any] | None = None) -> Path:
    """A run folder as `qbench run` leaves it: records.parquet, run.json and summary.json (the Summary plus
    the diagnosis and notes beside it)."""
    write_run(path, records, extra)
    info = RunInfo.from_dict(json.loads((path / "run.json").read_text()))
    summary = summarize(records, scenario_slo(info, []), generator=info.generator,
                        endpoint_slos=mix_slos(info, []))
    (path / "summary.json").write_text(json.dumps({**summary.to_dict(), "diagnosis": [], "app_notes": []}))
    return path


def _gradio(n: int, seed: int, factor: float) -> list[RequestRecord]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from end_of_run import chunk_records  # two endpoints, every error kind, a warm-up, token streams

    records, _ = chunk_records(np.random.default_rng(seed), 0, n, 0.0, 200.0, factor, 0.5)
    return records


@pytest.mark.parametrize("kind", ["simulated", "two endpoints with an slo"])
def test_summary_json_gives_the_figures_the_records_give(kind: str, tmp_path: Path) -> None:
    """A finished run's summary.json is read instead of summarising its records again: every delta, every
    SLO check and the paired figures are the ones the records give."""
    if kind == "simulated":
        a, b = simulate(n=300, seed=3, fail_every=9), simulate(n=260, service_s=0.1, seed=4)
        extra: dict[str, Any] = {}
    else:
        a, b = _gradio(3000, 1, 1.0), _gradio(3000, 1, 1.05)
        extra = {"scenario": {"name": "x", "slo": {"p95_latency_s": 0.15, "error_rate": 0.05}}}
    limits = {"p95_latency_s": 0.01, "throughput_rps": 0.01}
    stored = compare(_with_summary(tmp_path / "a", a, extra), _with_summary(tmp_path / "b", b, extra), limits)
    again = compare(write_run(tmp_path / "a2", a, extra), write_run(tmp_path / "b2", b, extra), limits)
    assert stored.a.summary.to_dict() == again.a.summary.to_dict()
    assert stored.b.summary.to_dict() == again.b.summary.to_dict()
    assert stored.deltas == again.deltas and stored.slo == again.slo
    assert repr(stored.pairing) == repr(again.pairing)  # NaN-safe: the unpaired shares are NaN
    assert stored.pairing is not None and stored.pairing.phases


def test_compare_reads_summary_json_and_summarises_again_only_without_one(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    base = simulate(n=200, service_s=0.05, seed=3)
    a = _with_summary(tmp_path / "a", base)
    data = json.loads((a / "summary.json").read_text())
    data["latency"]["latency_s"]["p95"] = 9.5  # not what the records give: proves it was read
    (a / "summary.json").write_text(json.dumps(data))
    result = compare(a, runs["base"])
    assert {d.name: d.a for d in result.deltas}["p95_latency_s"] == 9.5
    assert result.a.notes == [] and result.pairing is not None and result.pairing.shared
    (a / "summary.json").write_text("{not json")
    broken = compare(a, runs["base"])
    assert broken.a.summary.to_dict() == compare(runs["base"], runs["base"]).a.summary.to_dict()
    assert broken.a.notes[0].startswith("summary.json could not be read")


def test_a_run_that_died_is_summarised_from_records_jsonl(golden_run: Path) -> None:
    (golden_run / "summary.json").write_text("{}")  # no Parquet file: records.jsonl is all there is
    result = compare(golden_run, golden_run)
    assert result.a.summary.requests > 0 and all(d.change in (0, None) for d in result.deltas)
    assert result.pairing is not None and result.pairing.shared
