"""`qbench report` on a capacity folder built by hand: the knee chart, the probe table, odd cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qbench.report.build import build_report
from qbench.run.results.steady import Steadiness, Trend


def probe(rate: float, p95: float, passed: bool, **kw: Any) -> dict[str, Any]:
    return {"rate_rps": rate, "kind": "rate", "passed": passed, "p50_latency_s": p95 / 2,
            "p95_latency_s": p95, "p99_latency_s": p95 * 1.1, "throughput_rps": rate, "error_rate": 0.0,
            "verdict": "pass" if passed else "fail", "violations": [] if passed else [f"p95 {p95} > 0.2"],
            **kw}


def write_folder(path: Path, result: dict[str, Any], answer: list[list[str]]) -> Path:
    path.mkdir(parents=True)
    info = {"kind": "capacity", "scenario": {"path": "s.yaml", "content": {"name": "sleep4"}},
            "target": "http://127.0.0.1:1", "slo": {"p95_latency_s": 0.2}, "max_error_rate": 0.01,
            "probe_duration_s": 2.0, "result": result, "answer": answer}
    (path / "capacity.json").write_text(json.dumps(info))
    return path


def test_a_capacity_folder_reports_the_knee_and_the_probes(tmp_path: Path) -> None:
    probes = [{"rate_rps": 39.0, "kind": "estimate", "users": 32, "passed": False, "verdict": "estimate"},
              probe(39.0, 0.11, True), probe(49.0, 0.6, False), probe(44.0, 0.3, False),
              probe(41.5, 0.19, True), probe(60.0, 2.0, False, stopped="queue ran away", verdict="runaway")]
    result = {"capacity_rps": 41.5, "failing_rate_rps": 44.0, "tolerance": 0.1, "converged": True,
              "probes": probes}
    folder = write_folder(tmp_path / "c", result, [["capacity", "41.5 req/s"], ["users", "~416 users"]])
    files = build_report(folder)
    assert [c.name for c in files.charts] == ["capacity_knee"]
    assert files.charts[0].path.stat().st_size > 10_000
    summary = files.markdown.read_text()
    assert "## qbench capacity: sleep4" in summary and "**capacity**: 41.5 req/s" in summary
    assert "| 0 | 32 users |" in summary and "queue ran away" in summary and "| runaway |" in summary
    html = files.html.read_text()
    assert 'id="probes"' in html and "chart-capacity_knee" in html


def test_no_capacity_and_no_probes_still_make_a_report(tmp_path: Path) -> None:
    result = {"capacity_rps": None, "failing_rate_rps": 0.05, "tolerance": 0.05, "converged": True,
              "probes": [probe(0.05, 3.0, False)]}
    none = write_folder(tmp_path / "none", result, [["no capacity", "the SLO fails even at 0.05 req/s"]])
    assert "no capacity" in build_report(none).markdown.read_text()
    empty = write_folder(tmp_path / "empty", {}, [])
    files = build_report(empty)
    assert "holds no open-loop probe" in files.markdown.read_text()


def test_the_confirmation_and_the_run_past_the_capacity_are_shown(tmp_path: Path) -> None:
    steady = Steadiness(True, 20.0, 712, 708, 35.6, 35.4, 0.05, backlog=Trend(0.3, 0.1)).to_dict()
    probes = [probe(39.0, 0.3, True), probe(48.7, 0.9, False), probe(43.6, 0.5, True),
              probe(43.6, 0.9, False, kind="confirm", duration_s=60.0),
              probe(39.6, 0.4, True, kind="confirm", duration_s=60.0, steady=True, steadiness=steady),
              probe(51.5, 6.0, False, kind="overload", duration_s=20.0, verdict="overload")]
    overload = {"rate_rps": 51.5, "capacity_rps": 39.6, "base_rps": 39.3, "end_rps": 30.9, "fall": 0.21,
                "fell_at_waiting": 130, "max_waiting": 230, "max_size": 104,
                "series": [[1.0 + 2 * i, 39.0 - i, 10.0 + 20 * i] for i in range(10)],
                "advice": "past about 130 waiting, throughput fell 21%: set max_size=104"}
    result = {"capacity_rps": 39.6, "failing_rate_rps": 43.6, "tolerance": 0.1, "converged": True,
              "confirmed": True, "probes": probes, "overload": overload}
    folder = write_folder(tmp_path / "c", result, [["capacity", "39.6 req/s"],
                                                   ["held", "for the whole 60 s confirmation"]])
    files = build_report(folder)
    assert [c.name for c in files.charts] == ["capacity_knee", "capacity_overload"]
    assert all(c.path.stat().st_size > 10_000 for c in files.charts)
    summary = files.markdown.read_text()
    assert "| confirm 60 s: 39.60 |" in summary and "| overload 20 s: 51.50 |" in summary
    assert "**held**: for the whole 60 s confirmation" in summary
    assert "set max_size=104" in files.html.read_text()  # the overload chart's caption
