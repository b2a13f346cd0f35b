"""Paired comparison: shared-schedule detection, the paired verdict, and why pairing pays."""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.report.compare import compare
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord
from qbench.run.results.paired import pair_runs, unpaired_phase
from tests import golden

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from report_synth import simulate, write_run  # noqa: E402


def cols(records: list[RequestRecord]) -> Columns:
    return Columns.of(records)


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
    result = pair_runs(cols(base), cols(slower(base, 1.05, noise_s=0.001)))
    assert result.shared and result.matched == 200 and "paired" in result.reason
    latency = {p.phase: p for p in result.phases}["service_s"]
    assert latency.verdict == "slower" and latency.b_slower > 0.9
    assert 0 < latency.ci_low <= latency.median_diff <= latency.ci_high
    assert latency.p_value is not None and latency.p_value < 0.01


def test_identical_runs_show_no_difference() -> None:
    base = simulate(n=100, seed=2)
    result = pair_runs(cols(base), cols(base))
    assert result.shared and all(p.verdict == "no clear difference" for p in result.phases)
    assert all(p.p_value is None and p.median_diff == 0 for p in result.phases)


def test_different_schedules_are_unpaired_with_the_reason() -> None:
    result = pair_runs(cols(simulate(n=100, seed=1)), cols(simulate(n=100, seed=2)))
    assert not result.shared and "unpaired" in result.reason and "--replay" in result.reason
    assert result.phases and all(not p.paired for p in result.phases)


def test_pairing_finds_what_an_unpaired_test_misses_at_the_same_count() -> None:
    """The issue's claim on a queue, over 12 repeats: 5% slower service, 150 requests each. Paired (B on
    A's schedule): B slower every time. Unpaired (B on another day's arrivals and service draws): the
    same change is found in a minority of repeats."""
    paired_found = unpaired_found = 0
    for seed in range(12):
        a = simulate(n=150, service_s=0.05, seed=100 + seed)
        paired = {p.phase: p for p in pair_runs(cols(a), cols(slower(a, 1.05))).phases}["latency_s"]
        other_day = simulate(n=150, service_s=0.0525, seed=200 + seed)
        unpaired = unpaired_phase(cols(a), cols(other_day), "latency_s")
        assert unpaired is not None
        paired_found += paired.verdict == "slower"
        unpaired_found += unpaired.verdict == "slower"
    assert paired_found == 12 and unpaired_found <= 4, (paired_found, unpaired_found)


def test_failures_in_one_run_only_are_counted() -> None:
    base = simulate(n=100, seed=4)
    hit = {r.request_id for r in base if r.request_id % 10 == 5}
    broken = [replace(r, outcome="error", error_kind="timeout") if r.request_id in hit else r for r in base]
    result = pair_runs(cols(base), cols(broken))
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
    result = pair_runs(cols(base), cols(base))
    assert not result.shared and "unpaired" in result.reason


# ---------------------------------------------------------------- the golden figures (tests/golden.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from end_of_run import chunk_records  # noqa: E402  (realistic Gradio records, in completion order)


def _gradio(n: int, seed: int, factor: float = 1.0) -> list[RequestRecord]:
    """Chat and non-chat requests with every error kind, a warm-up, in the order they finished."""
    records, _ = chunk_records(np.random.default_rng(seed), 0, n, 0.0, 200.0, factor, 0.5)
    return records


def _pairs() -> dict[str, tuple[list[RequestRecord], list[RequestRecord]]]:
    base = simulate(n=300, service_s=0.05, seed=3)
    failing = simulate(n=260, service_s=0.05, max_queue=6, fail_every=7, seed=8)
    twice = base + [replace(r, intended_at_s=r.intended_at_s + 1.0) for r in base[:40]]  # ids twice in A
    hit = {r.request_id for r in base if r.request_id % 9 == 4}
    broken = [replace(r, outcome="error", error_kind="timeout") if r.request_id in hit else r for r in base]
    return {
        "slower": (base, slower(base, 1.2, noise_s=0.002)),
        "faster": (base, slower(base, 0.9, noise_s=0.002, seed=1)),
        "equal": (base, base),
        "shorter B": (base, slower(base[:250], 1.05)),
        "errors in B only": (base, broken),
        "errors in both": (failing, slower(failing, 1.1, noise_s=0.001)),
        "ids twice in A": (twice, slower(base, 1.05)),
        "unpaired, other lengths": (base, simulate(n=181, service_s=0.06, seed=9)),
        "unpaired, errors": (failing, base),
        "gradio, paired": (_gradio(3000, 5), _gradio(3000, 5, 1.05)),
        "gradio, unpaired": (_gradio(3000, 5), _gradio(2400, 6, 1.05)),
        "too few": (base[:25], base[:25]),
    }


@pytest.mark.parametrize("case", list(_pairs()))
def test_the_figures_are_the_golden_ones(case: str) -> None:
    """Every field of the Pairing and of each phase, the golden digits (written when the columns replaced
    the records-and-loops code, and equal to its figures)."""
    a, b = _pairs()[case]
    new = pair_runs(cols(a), cols(b), seed=4)
    golden.check("paired", case, asdict(new))
    assert new.phases or case == "too few"


@pytest.mark.parametrize("n", [10, 11, 64, 999, 4_000, 50_001])
def test_the_block_bootstrap_medians_are_the_gathered_resamples_medians(n: int) -> None:
    """The resampled medians, found without gathering the resamples, equal np.median of each resample
    gathered by brute force (ties included: values rounded to the millisecond), seed for seed: windows of
    `length` consecutive values at starts drawn 100 series at a time, end to end, cut to n values."""
    from qbench.run.results.paired import _block_bootstrap, blocks

    x = np.round(np.random.default_rng(n).lognormal(-3, 1, n), 3)
    resamples = 2000 if n < 10_000 else 150
    length = -(-n // blocks(n))
    count = -(-n // length)
    rng = np.random.default_rng(1)
    starts = np.concatenate([rng.integers(0, n - length + 1, size=(min(100, resamples - first), count))
                             for first in range(0, resamples, 100)])
    brute = [np.median(np.concatenate([x[s:s + length] for s in row])[:n]) for row in starts]
    assert np.array_equal(_block_bootstrap(x, np.random.default_rng(1), resamples), np.array(brute))
