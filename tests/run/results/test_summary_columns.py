"""The summary is the golden one, key for key and digit for digit, from records and from records.parquet.

Each shape of run below is summarised from the records' columns (`Columns.of`) and from the
records.parquet they write (`Columns.read`); each number's type is checked (a float never an int or a
numpy scalar) and the `to_dict()` must equal the stored golden output (tests/golden.py; written when the
columns replaced the list-of-records summary, and equal to its figures).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench.run.records import gap_histogram
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord, read_records, write_parquet
from qbench.run.results import summary as new
from qbench.run.results.server_phases import TraceReport
from qbench.run.scenario.schema import Slo
from tests import golden

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from end_of_run import chunk_records  # noqa: E402  (the benchmark's realistic Gradio records)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-2026-11-26"
Shape = Callable[[np.random.Generator], list[RequestRecord]]


def gradio(rng: np.random.Generator, n: int = 2_000) -> list[RequestRecord]:
    """Two endpoints (chat streams), ~3% errors of five kinds, a warm-up, in completion order."""
    rows, _ = chunk_records(rng, 0, n, 0.0, 400.0, 1.0, 0.4)
    return rows


def tokens(rng: np.random.Generator, every_hist: bool = True) -> list[RequestRecord]:
    """Token streams on the ok chat requests: 0, 1 or many tokens, each gap in the histogram (or, for
    some, none: records before schema v6)."""
    rows = gradio(rng)
    for k, r in enumerate(rows):
        if r.endpoint != "chat" or not r.ok:
            continue
        count = int(rng.integers(0, 40))
        r.input_tokens, r.output_tokens = int(rng.integers(5, 50)), count
        r.tokens_from = "usage"
        gaps = sorted(rng.lognormal(np.log(0.02), 0.4, max(count - 1, 0)).tolist())
        r.itl_count = len(gaps)
        if gaps:
            r.itl_mean_s = sum(gaps) / len(gaps)
            r.itl_p50_s, r.itl_p99_s, r.itl_max_s = gaps[len(gaps) // 2], gaps[-1] * 0.99, gaps[-1]
            if every_hist or k % 7:
                r.itl_hist = gap_histogram.encode(gap_histogram.histogram(gaps))
    return rows


def phases(rng: np.random.Generator) -> list[RequestRecord]:
    """The server's phases on most ok requests, output files fetched on some, a lost worker's error."""
    rows = gradio(rng)
    for k, r in enumerate(rows):
        if r.ok and k % 5:
            r.server_queue_wait_s = float(rng.exponential(0.01))
            r.server_upload_s = float(rng.exponential(0.002)) if k % 3 else None
            r.server_fn_s, r.server_total_s = float(rng.exponential(0.05)), float(rng.exponential(0.07))
            r.server_forward_s, r.server_batch_size = float(rng.exponential(0.04)), int(rng.integers(1, 9))
        if r.ok and k % 11 == 0:
            r.result_at_s = r.completed_at_s
            r.completed_at_s = (r.completed_at_s or 0.0) + float(rng.exponential(0.05))
    rows[3].outcome, rows[3].error_kind, rows[3].error_message = "error", None, "worker died"  # -> client
    rows[4].outcome, rows[4].error_kind, rows[4].error_message = "error", "client", ""
    return rows


def streams(rng: np.random.Generator) -> list[RequestRecord]:
    """Streamed inputs on the chat requests: chunks sent, answered, their latencies and output gaps."""
    rows = gradio(rng)
    for k, r in enumerate(rows):
        if r.endpoint == "chat":
            r.chunks_sent = int(rng.integers(1, 20))
            r.chunks_answered = int(rng.integers(0, r.chunks_sent + 1))
            r.chunk_latency_count = max(r.chunks_answered - 1, 0)
            if r.chunk_latency_count and k % 9:
                lat = np.sort(rng.exponential(0.05, r.chunk_latency_count))
                r.chunk_latency_mean_s, r.chunk_latency_p50_s = float(lat.mean()), float(np.median(lat))
                r.chunk_latency_p95_s, r.chunk_latency_max_s = float(np.percentile(lat, 95)), float(lat[-1])
                r.chunk_latency_p50_s = None if k % 13 == 0 else r.chunk_latency_p50_s
                if k % 5:  # the others: records before schema v7 (their statistics stand in)
                    r.chunk_latency_hist = gap_histogram.encode(gap_histogram.histogram(lat.tolist()))
            if k % 4:
                gaps = rng.exponential(0.1, int(rng.integers(1, 12)))
                r.output_gap_p95_s = float(np.percentile(gaps, 95))
                if k % 3:  # the others: before schema v7, their p95 alone
                    r.output_gap_count, r.output_gap_mean_s = int(gaps.size), float(gaps.mean())
                    r.output_gap_max_s = float(gaps.max())
                    r.output_gap_hist = gap_histogram.encode(gap_histogram.histogram(gaps.tolist()))
    return rows


def journeys(rng: np.random.Generator, length: int = 3) -> list[RequestRecord]:
    """Journeys of `length` steps (one endpoint each): some fail, some are cut off by the end of the
    run (deadline, interrupted, never sent), the first ones start in the warm-up."""
    rows = gradio(rng)
    for r in rows:
        r.journey_id, r.step, r.turn = r.request_id // length, r.request_id % length, 0
        r.endpoint = f"step{r.step}"
    for r in rows[-40:]:
        r.outcome, r.error_message = "error", None
        r.error_kind = "deadline" if r.request_id % 2 else "interrupted"
        if r.request_id % 4 == 1:
            r.sent_at_s = r.completed_at_s = None
    return rows


def burst(rng: np.random.Generator) -> list[RequestRecord]:
    """Every request intended at once (a burst: offered = n / duration)."""
    rows = gradio(rng, 300)
    for r in rows:
        r.intended_at_s, r.warmup = 0.0, False
    return rows


def all_warmup(rng: np.random.Generator) -> list[RequestRecord]:
    rows = gradio(rng, 50)
    for r in rows:
        r.warmup, r.journey_id, r.step = True, r.request_id // 2, r.request_id % 2
    return rows


TOKEN_SLO = Slo(p99_itl_s=0.03, p95_ttft_s=0.1, p95_tpot_s=0.05, min_output_tps=10.0, min_goodput=5.0)
CASES: dict[str, tuple[Shape, dict[str, Any]]] = {
    "plain": (gradio, {}),
    "slo": (gradio, {"slo": Slo(p95_latency_s=0.12, max_latency_s=5.0, error_rate=0.01, p95_queue_wait_s=0.05,
                                p95_service_s=0.1, p95_ttfo_s=0.05, min_throughput=10.0, min_goodput=200.0)}),
    "slo_ok": (gradio, {"slo": Slo(p50_latency_s=10.0, p99_queue_wait_s=10.0), "duration_s": 4.5}),
    "mix": (gradio, {"slo": Slo(p95_latency_s=0.12, error_rate=0.05, min_throughput=10.0),
                     "endpoint_slos": {"chat": Slo(p95_latency_s=0.2, p95_ttfo_s=0.05), "embed": None}}),
    "tokens": (tokens, {"slo": TOKEN_SLO}),
    "tokens_v5": (lambda rng: tokens(rng, every_hist=False), {"slo": TOKEN_SLO}),
    "phases": (phases, {"slo": Slo(p95_service_s=0.2), "generator": new.GeneratorStats(cpu_s=1.5),
                        "server_traces": TraceReport(source="traces", traces=9, matched=7)}),
    "streams": (streams, {"slo": Slo(p95_chunk_latency_s=0.08, p50_chunk_latency_s=0.05,
                                     min_chunks_answered=0.4)}),
    "journeys": (journeys, {"slo": Slo(p95_latency_s=0.2), "journey_length": 3}),
    "burst": (burst, {"slo": Slo(p95_latency_s=0.2)}),
    "all_warmup": (all_warmup, {"slo": Slo(p95_latency_s=0.2, error_rate=0.1), "journey_length": 2}),
    "empty": (lambda rng: [], {"slo": Slo(p95_latency_s=0.2)}),
    "one": (lambda rng: [r for r in gradio(rng, 400) if r.ok and not r.warmup][:1],
            {"slo": Slo(p99_latency_s=1.0)}),
}


def checked(summary: Any) -> dict[str, Any]:
    """The summary's to_dict(), each number's type checked: what summary.json would hold."""
    def check(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)
        else:
            assert value is None or type(value) in (int, float, str, bool), (type(value), value)

    data: dict[str, Any] = summary.to_dict()
    check(data)
    return data


@pytest.mark.parametrize("source", ["records", "parquet"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_summary_is_the_golden_one_from_records_and_parquet(case: str, source: str,
                                                                tmp_path: Path) -> None:
    shape, kwargs = CASES[case]
    records = shape(np.random.default_rng(sorted(CASES).index(case)))
    if source == "parquet":
        write_parquet(records, tmp_path / "records.parquet")
        cols = Columns.read(tmp_path, keep=3)
    else:
        cols = Columns.of(records)
    golden.check("summary", case, checked(new.summarize(cols, **kwargs)))


@pytest.mark.parametrize("run", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_a_real_gpu_run_summarises_the_same(run: str) -> None:
    records = read_records(FIXTURES / run)
    slo = Slo(p95_latency_s=0.5, p99_service_s=0.3, error_rate=0.01, min_goodput=1.0)
    got = new.summarize(Columns.read(FIXTURES / run), slo)
    golden.check("summary", f"gpu {run}", checked(got))
    golden.check("summary", f"gpu {run}", checked(new.summarize(records, slo)))  # records, as columns
    assert got.completed_ok > 5_000 and not math.isnan(got.latency["latency_s"].p99 or math.nan)
