"""Paired comparison: shared-schedule detection, the paired verdict, and why pairing pays."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.report.compare import compare
from qbench.run.records import RequestRecord
from qbench.run.results.paired import pair_runs, unpaired_phase

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from report_synth import simulate, write_run  # noqa: E402


def slower(
    records: list[RequestRecord], factor: float, noise_s: float = 0.0, seed: int = 0
) -> list[RequestRecord]:
    """The same requests with every service time scaled (and some per-request noise): a slower server."""
    rng = np.random.default_rng(seed)
    out = []
    for r in records:
        if r.started_at_s is None or r.completed_at_s is None:
            out.append(r)
            continue
        service = (r.completed_at_s - r.started_at_s) * factor + abs(rng.normal(0, noise_s))
        out.append(replace(r, completed_at_s=r.started_at_s + service))
    return out


def test_a_replayed_schedule_is_paired_and_a_5_percent_slowdown_is_found() -> None:
    base = simulate(n=200, service_s=0.05, seed=3)
    result = pair_runs(base, slower(base, 1.05, noise_s=0.001))
    assert result.shared and result.matched == 200 and "paired" in result.reason
    latency = {p.phase: p for p in result.phases}["service_s"]
    assert latency.verdict == "slower" and latency.b_slower > 0.9
    assert 0 < latency.ci_low <= latency.median_diff <= latency.ci_high
    assert latency.p_value is not None and latency.p_value < 0.01


def test_identical_runs_show_no_difference() -> None:
    base = simulate(n=100, seed=2)
    result = pair_runs(base, base)
    assert result.shared and all(p.verdict == "no clear difference" for p in result.phases)
    assert all(p.p_value is None and p.median_diff == 0 for p in result.phases)


def test_different_schedules_are_unpaired_with_the_reason() -> None:
    result = pair_runs(simulate(n=100, seed=1), simulate(n=100, seed=2))
    assert not result.shared and "unpaired" in result.reason and "--replay" in result.reason
    assert result.phases and all(not p.paired for p in result.phases)


def test_pairing_finds_what_an_unpaired_test_misses_at_the_same_count() -> None:
    """The issue's claim on a queue, over 12 repeats: 5% slower service, 150 requests each. Paired (B on
    A's schedule): B slower every time. Unpaired (B on another day's arrivals and service draws): the
    same change is found in a minority of repeats."""
    paired_found = unpaired_found = 0
    for seed in range(12):
        a = simulate(n=150, service_s=0.05, seed=100 + seed)
        paired = {p.phase: p for p in pair_runs(a, slower(a, 1.05)).phases}["latency_s"]
        other_day = simulate(n=150, service_s=0.0525, seed=200 + seed)
        unpaired = unpaired_phase(a, other_day, "latency_s")
        assert unpaired is not None
        paired_found += paired.verdict == "slower"
        unpaired_found += unpaired.verdict == "slower"
    assert paired_found == 12 and unpaired_found <= 4, (paired_found, unpaired_found)


def test_failures_in_one_run_only_are_counted() -> None:
    base = simulate(n=100, seed=4)
    hit = {r.request_id for r in base if r.request_id % 10 == 5}
    broken = [replace(r, outcome="error", error_kind="timeout") if r.request_id in hit else r for r in base]
    result = pair_runs(base, broken)
    assert result.shared
    assert result.ok_in_a_only == sum(1 for r in base if r.request_id in hit and not r.warmup)


def test_compare_prints_the_paired_verdict(tmp_path: Path) -> None:
    base = simulate(n=200, service_s=0.05, seed=3)
    a = write_run(tmp_path / "a", base)
    b = write_run(tmp_path / "b", slower(base, 1.2))
    comparison = compare(a, b)
    assert comparison.pairing is not None and comparison.pairing.shared
    out = CliRunner().invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "paired: same schedule" in out.output and "B slower" in out.output
    assert "Wilcoxon p =" in out.output and "B faster for 0% of" in out.output
    c = write_run(tmp_path / "c", simulate(n=200, service_s=0.05, seed=9))
    unpaired = CliRunner().invoke(app, ["compare", str(a), str(c)], env={"COLUMNS": "200"})
    assert "unpaired" in unpaired.output and "Mann-Whitney p =" in unpaired.output


@pytest.mark.parametrize("n", [5])
def test_too_few_requests_are_not_judged(n: int) -> None:
    base = simulate(n=n, warmup=0, seed=1)
    result = pair_runs(base, base)
    assert not result.shared and "unpaired" in result.reason
