"""`qbench capacity` on a mix: every endpoint must meet the SLO on its own, and the verdict names the
endpoint that breaks first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import GeneratorStats, summarize
from qbench.tune.capacity.probe import endpoint_violations, judge
from qbench.tune.values.constraints import Constraints
from reference_server.settings import load_preset
from reference_server.testing import serve_in_thread

ROOT = Path(__file__).resolve().parents[3]


def records() -> list[RequestRecord]:
    """a: 40 fast requests (0.1 s); c: 10 slow ones (1.5 s)."""
    out = []
    for i in range(50):
        label, service = ("c", 1.5) if i % 5 == 0 else ("a", 0.1)
        out.append(RequestRecord(request_id=i, user_id=i, session_id="", endpoint=label, warmup=False,
                                 intended_at_s=i * 0.1, sent_at_s=i * 0.1, started_at_s=i * 0.1,
                                 completed_at_s=i * 0.1 + service, outcome="ok"))
    return out


def test_the_endpoint_that_breaks_the_slo_is_named() -> None:
    summary = summarize(records(), None)
    constraints = Constraints(slo={"p95_latency_s": 1.0, "min_throughput": 1.0})
    assert endpoint_violations(summary, constraints) == ["c: p95_latency_s 1.5 > 1"]
    probe = judge("rate", 10.0, summary, None, constraints)
    assert not probe.passed and "c: p95_latency_s 1.5 > 1" in probe.violations
    assert probe.violations[0].startswith("p95_latency_s")  # the total's p95 (1.5 s) breaks too
    relaxed = Constraints(slo={"p95_latency_s": 2.0})
    assert judge("rate", 10.0, summary, None, relaxed).passed
    stricter_for_a = judge("rate", 10.0, summary, None, relaxed, own={"a": {"p95_latency_s": 0.05}})
    assert stricter_for_a.violations == ["a: p95_latency_s 0.1 > 0.05"]  # a mix entry's own slo


def test_the_docs_capacity_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/traffic-mixes-and-journeys.md: qbench capacity scenarios/mix.yaml against the abc preset
    (two 2 s probes): a probe's verdict names each endpoint it checks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    with serve_in_thread(load_preset("abc")) as server:
        args = ["capacity", "scenarios/mix.yaml", "--target", server.url, "--duration", "2", "--warmup", "0",
                "--max-probes", "2", "--start-rate", "40"]
        out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert re.search(r"\b[ab]: p95_latency_s [\d.]+ > 2", out.output), out.output  # the shared group's


def test_a_probe_whose_load_generator_lagged_says_the_host_stalled() -> None:
    # Sends 0.4 s behind their intended times at the 99th percentile: half the 0.5 s bound is 0.25 s.
    late = [RequestRecord(request_id=r.request_id, user_id=r.user_id, session_id="", endpoint="a",
                          warmup=False, intended_at_s=r.intended_at_s, sent_at_s=r.intended_at_s + 0.4,
                          started_at_s=r.intended_at_s + 0.4, completed_at_s=r.intended_at_s + 1.0,
                          outcome="ok") for r in records()]
    constraints = Constraints(slo={"p95_latency_s": 0.5})
    probe = judge("rate", 10.0, summarize(late, None), None, constraints)
    assert not probe.passed and probe.host_stall.startswith("the load generator stalled (p99 lag 0.4 s")
    assert probe.why.endswith("the host, not only the server, was slow")
    assert judge("rate", 10.0, summarize(records(), None), None, constraints).host_stall == ""


def test_a_probe_keeps_how_long_its_generator_waited_for_a_core() -> None:
    summary = summarize(records(), None, generator=GeneratorStats(loop_wait_share=0.25))
    assert judge("rate", 10.0, summary, None, Constraints()).host_wait == 0.25
