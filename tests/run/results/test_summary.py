"""Summaries: hand-computed percentiles, rates, error accounting, SLO checks, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qbench.run.records import gap_histogram
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import SloCheck, Stats, Summary, e2e_breaches, judge_bound, summarize
from qbench.run.scenario.schema import Slo


def rec(
    i: int,
    intended: float,
    latency: float | None,
    *,
    kind: str | None = None,
    sent: bool = True,
    start: float | None = None,
    warmup: bool = False,
) -> RequestRecord:
    r = RequestRecord(
        request_id=i, user_id=i, session_id="s", endpoint="e", warmup=warmup, intended_at_s=intended
    )
    if sent:
        r.sent_at_s = intended
    if start is not None:
        r.started_at_s = intended + start
    if latency is not None:
        r.completed_at_s = intended + latency
    if kind is None and latency is not None:
        r.outcome = "ok"
    else:
        r.error_kind = kind
    return r


def test_percentiles_are_numpy_linear_on_raw_values() -> None:
    stats = Stats.of([1.0, 2.0, 3.0, 4.0])
    assert (stats.p50, stats.p90, stats.mean, stats.max, stats.min) == (
        2.5,
        pytest.approx(3.7),
        2.5,
        4.0,
        1.0,
    )
    stats = Stats.of([float(x) for x in range(1, 101)])  # 1..100: rank q/100 * 99
    assert stats.p95 == pytest.approx(95.05) and stats.p99 == pytest.approx(99.01)
    assert Stats.of([]).p50 is None and Stats.of([]).count == 0


def test_summary_counts_rates_and_phases() -> None:
    records = [rec(i, i * 0.5, 1.0 + i * 0.1, start=0.2) for i in range(5)]  # intended 0..2, done 1..3.4
    records.append(rec(5, 2.5, 0.3, kind="queue_full"))
    records.append(rec(6, 3.0, None, kind="interrupted", sent=False))
    records.append(rec(7, 0.0, 9.0, warmup=True))  # ignored everywhere
    s = summarize(records)
    assert (s.requests, s.sent, s.not_sent, s.completed_ok, s.errors) == (7, 6, 1, 5, 1)
    assert s.errors_by_kind == {"interrupted": 1, "queue_full": 1}
    assert s.error_rate == pytest.approx(1 / 6)
    assert s.duration_s == pytest.approx(3.4)  # first intended 0 -> last completion 2 + 1.4
    assert s.throughput_rps == pytest.approx(5 / 3.4)
    assert s.goodput_rps == s.throughput_rps  # no SLO
    assert s.offered_rps == pytest.approx(6 / 3.0)  # 7 arrivals over 3 s
    lat = s.latency["latency_s"]
    assert lat.count == 5 and lat.p50 == pytest.approx(1.2) and lat.max == pytest.approx(1.4)
    assert s.latency["queue_wait_s"].p50 == pytest.approx(0.2)
    assert s.latency["service_s"].p50 == pytest.approx(1.0)
    assert s.latency["ttfo_s"].count == 0


def test_a_timed_out_straggler_does_not_stretch_the_window() -> None:
    """100 requests at 10/s served in 0.2 s, one given up after a 60 s timeout: throughput stays ~10/s."""
    records = [rec(i, i / 10, 0.2) for i in range(99)]
    records.append(rec(99, 9.9, 60.0, kind="timeout"))
    s = summarize(records)
    assert s.duration_s == pytest.approx(10.0)  # first intended 0 -> last ok completion 9.8 + 0.2 (not 69.9)
    assert s.throughput_rps == pytest.approx(99 / 10.0)


def test_slo_checks_and_goodput() -> None:
    records = [rec(i, float(i), lat) for i, lat in enumerate([0.1, 0.2, 0.3, 0.4, 2.0])]
    slo = Slo(p95_latency_s=0.5, error_rate=0.1, min_throughput=10.0)
    s = summarize(records, slo, duration_s=5.0)
    checks = {c.name: c for c in s.slo}
    assert not checks["p95_latency_s"].passed and checks["p95_latency_s"].actual == pytest.approx(1.68)
    assert checks["error_rate"].passed
    assert not checks["min_throughput"].passed and checks["min_throughput"].kind == "min"
    assert s.goodput_rps == pytest.approx(4 / 5.0)  # the 2.0 s request misses the latency threshold
    assert not s.slo_passed and len(s.failed_checks()) == 2


@pytest.mark.parametrize(
    ("latencies", "failed", "q", "expected", "passed"),
    [
        # 19 fast ok requests and 1 timeout out of 20 sent: p95 rank 18.05 lands just past the last ok value
        ([0.1] * 19, 1, "p95_latency_s", None, False),
        # 1 failure in 100: p95 rank 94.05 among 99 ok values 0.01..0.99 -> 0.95 + 0.05 * 0.01
        ([i / 100 for i in range(1, 100)], 1, "p95_latency_s", 0.9505, False),
        ([i / 100 for i in range(1, 100)], 1, "p90_latency_s", 0.901, True),
        # no failures: the same figure as the ok-only table
        ([0.1, 0.2, 0.3, 0.4], 0, "p50_latency_s", 0.25, True),
        ([0.1, 0.2, 0.3, 0.4], 1, "max_latency_s", None, False),
    ],
)
def test_latency_slo_ranks_failed_requests_as_slowest(
    latencies: list[float], failed: int, q: str, expected: float | None, passed: bool
) -> None:
    """10% timeouts must not hide behind a fast p95 of the survivors (the ok-only table still shows it)."""
    records = [rec(i, float(i), lat) for i, lat in enumerate(latencies)]
    records += [rec(len(latencies) + j, 100.0 + j, 60.0, kind="timeout") for j in range(failed)]
    s = summarize(records, Slo(**{q: 0.91}))
    (check,) = s.slo
    assert check.passed is passed
    if expected is None:
        assert check.actual is None and check.note is not None and "failed" in check.note
    else:
        assert check.actual == pytest.approx(expected)
    if failed:
        ok_only = getattr(s.latency["latency_s"], "max" if q.startswith("max") else q.split("_")[0])
        assert ok_only is not None and (check.actual is None or check.actual >= ok_only)


def test_missing_value_fails_its_check() -> None:
    s = summarize([rec(0, 0.0, 1.0)], Slo(p95_ttfo_s=1.0))
    assert s.slo[0].actual is None and not s.slo_passed


def test_a_warmup_over_the_whole_run_says_so_instead_of_a_missing_figure() -> None:
    """It once read "SLO violated: p95_latency_s (actual none, limit 1)"."""
    from qbench.run.results.outcome import RunOutcome, verdict

    s = summarize([rec(i, float(i), 0.5, warmup=True) for i in range(3)], Slo(p95_latency_s=1.0))
    assert s.requests == 0 and not s.slo_passed
    error = verdict(RunOutcome(failed_checks=tuple(s.failed_checks())))
    assert str(error) == ("SLO violated: p95_latency_s (no request measured: load.warmup covered all 3 "
                          "requests of the run, limit 1)")


def test_an_error_rate_over_a_run_the_warmup_covered_is_not_measured_not_passed() -> None:
    """Every request failed inside load.warmup: error_rate has no figure (it read 0, "pass", beside "the
    first 12 requests all failed"), and its check says why."""
    failed = [rec(i, float(i), 0.5, warmup=True) for i in range(12)]
    for r in failed:
        r.outcome, r.error_kind = "error", "http_5xx"
    s = summarize(failed, Slo(error_rate=0.01))
    (check,) = s.slo
    assert check.actual is None and not check.passed and not s.slo_passed
    assert check.note == "no request measured: load.warmup covered all 12 requests of the run"


def test_json_round_trip() -> None:
    s = summarize([rec(i, float(i), 0.5, start=0.1) for i in range(3)], Slo(p95_latency_s=1.0))
    again = Summary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s
    assert again.latency["latency_s"].p95 == s.latency["latency_s"].p95


def test_empty_records() -> None:
    s = summarize([])
    assert s.requests == 0 and s.throughput_rps == 0.0 and s.error_rate == 0.0


def token_rec(i: int, ttft: float, tokens: int, gaps: tuple[float, float, float, float]) -> RequestRecord:
    """An ok token stream sent at i s: first token after `ttft`, `tokens` out, gap stats (mean, p50,
    p99, max) over tokens - 1 gaps, ending (tokens - 1) * mean after the first token."""
    r = rec(i, float(i), None)
    mean, p50, p99, top = gaps
    r.first_output_at_s = i + ttft
    r.completed_at_s = r.first_output_at_s + (tokens - 1) * mean
    r.outcome, r.output_tokens, r.input_tokens, r.itl_count = "ok", tokens, 3, tokens - 1
    r.itl_mean_s, r.itl_p50_s, r.itl_p99_s, r.itl_max_s = mean, p50, p99, top
    return r


def test_token_phases_pool_itl_and_count_tokens() -> None:
    records = [
        token_rec(0, 0.1, 5, (0.02, 0.02, 0.03, 0.03)),  # 4 gaps, ends at 0.18
        token_rec(1, 0.3, 3, (0.05, 0.04, 0.06, 0.06)),  # 2 gaps, ends at 1.4
    ]
    s = summarize(records, Slo(p99_itl_s=0.05, p95_ttft_s=1.0, min_output_tps=1.0))
    assert s.output_tokens == 8 and s.input_tokens == 6
    assert s.output_tps == pytest.approx(8 / 1.4)
    itl = s.phase("itl_s")
    assert itl.count == 6 and itl.mean == pytest.approx((4 * 0.02 + 2 * 0.05) / 6)
    # no histograms (records before schema v6): each stands in with its statistics, half its gaps at its
    # median, the rest at its p99: 0.02, 0.02, 0.03, 0.03 and 0.04, 0.06 (within a bucket's 0.5%)
    assert itl.p50 == pytest.approx(0.03, rel=0.005) and itl.min == pytest.approx(0.02, rel=0.005)
    assert itl.max == 0.06 and itl.p99 == pytest.approx(0.04 + 0.95 * 0.02, rel=0.005)
    assert s.phase("tpot_s").p50 == pytest.approx((0.02 + 0.05) / 2)
    assert s.phase("ttft_s").max == pytest.approx(0.3)
    assert s.request_output_tps.count == 2 and s.request_output_tps.max == pytest.approx(5 / 0.18)
    verdicts = {c.name: c.passed for c in s.slo}
    assert verdicts == {"p95_ttft_s": True, "p99_itl_s": False, "min_output_tps": True}
    # goodput judges each request by its own p99 gap: only the first stream meets 50 ms
    assert s.goodput_rps == pytest.approx(1 / 1.4)
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def stream_rec(i: int, answered: int, lat: tuple[float, float, float, float], gap: float) -> RequestRecord:
    """An ok stream of 10 chunks sent at i s, lasting 5 s: `answered` of them answered, chunk latency
    stats (mean, p50, p95, max) over answered - 1 chunks, outputs `gap` apart at p95."""
    r = rec(i, float(i), 5.0)
    r.chunks_sent, r.chunks_answered, r.chunk_latency_count = 10, answered, answered - 1
    r.chunk_latency_mean_s, r.chunk_latency_p50_s, r.chunk_latency_p95_s, r.chunk_latency_max_s = lat
    r.output_gap_p95_s = gap
    return r


def test_streamed_inputs_pool_chunk_latency_and_count_chunks() -> None:
    records = [stream_rec(0, 10, (0.05, 0.04, 0.09, 0.1), 0.5), stream_rec(1, 4, (0.2, 0.2, 0.3, 0.35), 0.9)]
    s = summarize(records, Slo(p95_chunk_latency_s=0.2, min_chunks_answered=0.7))
    assert (s.chunks_sent, s.chunks_answered) == (20, 14)
    chunk = s.phase("chunk_latency_s")
    assert chunk.count == 12 and chunk.mean == pytest.approx((9 * 0.05 + 3 * 0.2) / 12)
    # records before schema v7 stand in with their statistics: 4 of the first's 9 at 0.04, 5 at 0.09;
    # 2 of the second's 3 at 0.2, 1 at 0.3 (within a bucket's 0.5%); max exact
    assert chunk.p50 == pytest.approx(0.09, rel=0.005) and chunk.min == pytest.approx(0.04, rel=0.005)
    assert chunk.max == 0.35 and chunk.p95 == pytest.approx(0.2 + 0.45 * 0.1, rel=0.005)
    gap = s.phase("output_gap_s")  # each record's p95 as its one gap
    assert gap.max == 0.9 and gap.count == 2 and gap.mean == pytest.approx(0.7)
    assert [(c.name, c.actual, c.passed) for c in s.slo] == [
        ("p95_chunk_latency_s", pytest.approx(0.245, rel=0.005), False), ("min_chunks_answered", 0.7, True)]
    assert not summarize([rec(0, 0.0, 1.0)], Slo(min_chunks_answered=0.5)).slo_passed  # no chunk sent
    assert s.goodput_rps == pytest.approx(1 / 6)  # only the first stream's own p95 is within 0.2 s
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def gaps_rec(i: int, gaps: list[float]) -> RequestRecord:
    """An ok stream whose chunk latencies and output gaps are `gaps`, each kept whole (schema v7)."""
    p95 = float(np.percentile(gaps, 95))
    r = stream_rec(i, len(gaps) + 1, (float(np.mean(gaps)), float(np.median(gaps)), p95, max(gaps)), p95)
    r.chunk_latency_hist = r.output_gap_hist = gap_histogram.encode(gap_histogram.histogram(gaps))
    r.output_gap_count, r.output_gap_mean_s, r.output_gap_max_s = len(gaps), float(np.mean(gaps)), max(gaps)
    return r


def test_stream_tails_are_over_every_chunk_and_gap_not_each_requests_p95() -> None:
    """Two streams of 100 chunks at 10 ms and one of 10 at 1 s: 10 of 210 chunks (4.8%) are slow, so the
    p95 over every chunk is 10 ms and the p99 1 s (the p95 of the three requests' own p95s said 0.9 s).
    Mixed with a record from before its schema had the histogram, its statistics stand in for its
    chunks."""
    records = [gaps_rec(0, [0.01] * 100), gaps_rec(1, [0.01] * 100), gaps_rec(2, [1.0] * 10)]
    s = summarize(records)
    for phase in ("chunk_latency_s", "output_gap_s"):
        every = s.phase(phase)
        assert every.count == 210 and every.mean == pytest.approx((200 * 0.01 + 10) / 210), phase
        assert every.p95 == pytest.approx(0.01, rel=0.005) and every.p99 == pytest.approx(1.0, rel=0.005)
        assert every.max == 1.0 and every.min == pytest.approx(0.01, rel=0.005)
    old = gaps_rec(3, [0.5] * 50)
    old.chunk_latency_hist = None  # written before schema v7: 25 at its median, 23 at p95, 2 at its max
    old.chunk_latency_p50_s, old.chunk_latency_p95_s, old.chunk_latency_max_s = 0.2, 0.5, 2.0
    mixed = summarize([*records, old]).phase("chunk_latency_s")
    assert mixed.count == 260 and mixed.max == 2.0
    assert mixed.p90 == pytest.approx(0.5, rel=0.005)  # rank 233 of 260: past the 225 under 0.5 s
    assert mixed.p50 == pytest.approx(0.01, rel=0.005)  # 200 of 260 at 10 ms


def test_itl_percentiles_are_over_every_gap_not_per_request_p99s() -> None:
    """Streams of ~20 ms gaps with a few slow ones: the run's ITL p90/p95/p99 are the percentiles of ALL
    gaps (what a server's clock sees), within the histogram's 0.5%; the p99 of per-request p99s is far
    above. The p99_itl_s SLO judges the same figure."""
    from qbench.run.protocols.openai import TokenStream
    from qbench.run.records import gap_histogram

    rng = np.random.default_rng(3)
    records, every_gap = [], []
    for i in range(200):
        gaps = rng.normal(0.020, 0.001, 31).clip(0.015)
        if i % 4 == 0:  # one slow gap in every 4th request (0.8% of gaps): that request's p99 sees it
            gaps[rng.integers(31)] = rng.uniform(0.025, 0.035)
        every_gap.extend(gaps)
        stream = TokenStream(chat=True)
        stream.times = (i + 0.05 + np.concatenate([[0.0], np.cumsum(gaps)])).tolist()
        r = rec(i, float(i), None)
        stream.fill(r)
        r.outcome, r.completed_at_s = "ok", stream.times[-1]
        records.append(r)
    exact = np.percentile(every_gap, [50, 90, 95, 99])
    s = summarize(records, Slo(p99_itl_s=float(exact[3]) * 1.01))
    itl = s.phase("itl_s")
    assert itl.count == 200 * 31 and itl.max == pytest.approx(max(every_gap))
    for got, want in zip((itl.p50, itl.p90, itl.p95, itl.p99), exact, strict=True):
        assert got == pytest.approx(want, rel=gap_histogram.RELATIVE_ERROR)
    per_request_p99 = np.percentile([r.itl_p99_s for r in records], 99)
    assert per_request_p99 > exact[3] * 1.05  # what the old pooling reported
    assert [c.passed for c in s.slo] == [True]


@pytest.mark.parametrize(("name", "bound", "actual", "note", "why"), [
    ("p95_latency_s", 2.0, 2.0, None, ""),  # at the bound: held
    ("p95_latency_s", 2.0, 2.5, None, "p95_latency_s 2.5 > 2"),
    ("min_goodput", 8.0, 5.0, None, "min_goodput 5 < 8"),
    ("min_goodput", 8.0, 8.0, None, ""),
    ("error_rate", 0.01, 0.05, None, "error_rate 5.0% > 1.0%"),
    ("p95_latency_s", 2.0, None, None, "p95_latency_s not measured (no completed request)"),
    ("p95_latency_s", 2.0, None, "20.0% of sent requests failed: the p95 falls among them",
     "p95_latency_s: 20.0% of sent requests failed: the p95 falls among them"),
    ("p95_latency_s", 2.0, 2.4, "over all 10 sent requests, the 2 failed ones ranked slowest",
     "p95_latency_s 2.4 > 2 (failed requests ranked slowest)"),
])
def test_one_judge_for_every_bound(name: str, bound: float, actual: float | None, note: str | None,
                                   why: str) -> None:
    check = judge_bound(name, bound, actual, note)
    assert check.passed == (why == "") and check.why == why
    assert check.kind == ("min" if name.startswith("min_") else "max")
    assert check.excess == (0.0 if check.passed else 10.0 if actual is None else abs(actual / bound - 1))


def test_the_runs_e2e_breaches_one_per_bound() -> None:
    """The failed end-to-end latency checks of the runs, one per bound; other failed bounds are not."""
    among = "20.0% of sent requests failed: the p95 falls among them"
    a = Summary(slo=[judge_bound("p95_latency_s", 2.0, None, among), judge_bound("min_goodput", 9.0, 1.0)])
    b = Summary(slo=[judge_bound("p95_latency_s", 2.0, 2.5, "ranked"),
                     judge_bound("p99_latency_s", 3.0, 2.0)])
    breaches = e2e_breaches([a, b])
    assert [c.name for c in breaches] == ["p95_latency_s"] and breaches[0].why.startswith("p95_latency_s 2.5")
    assert all(isinstance(c, SloCheck) for c in breaches) and e2e_breaches([Summary()]) == []
