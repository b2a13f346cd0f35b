"""A run's records as numpy columns (qbench.report.chart_columns): missing phases as NaN, the phases, the
span and warm-up window, errors by kind and when, ETA pairs and round time bins. (In-flight counts,
fmt_s and the usual bin widths are in test_report_run.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qbench.report.chart_columns import RunColumns, fmt_s, time_bins
from qbench.run.records.schema import RequestRecord


def rec(i: int, t: float, *, ok: bool = True, warmup: bool = False, sent: float | None = 0.01,
        started: float | None = 0.1, done: float | None = 0.3, kind: str | None = None,
        eta: float | None = None) -> RequestRecord:
    """A request intended at `t`; the other times are offsets from it (None: never happened)."""
    def at(offset: float | None) -> float | None:
        return None if offset is None else t + offset

    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=warmup,
                         intended_at_s=t, sent_at_s=at(sent), estimation_at_s=at(sent), rank_eta_s=eta,
                         started_at_s=at(started), completed_at_s=at(done), outcome="ok" if ok else "error",
                         error_kind=kind)


def test_missing_phases_are_nan_and_errors_without_a_kind_are_unknown() -> None:
    data = RunColumns.from_records([rec(0, 1.0), rec(1, 2.0, ok=False, sent=None, started=None, done=None)])
    assert len(data) == 2
    assert np.isnan(data.sent[1]) and np.isnan(data.rank).all()
    assert data.ok.tolist() == [True, False] and data.error_kind.tolist() == ["", "unknown"]
    assert data.send_lag[0] == pytest.approx(0.01) and np.isnan(data.send_lag[1])


def test_phases_by_record_property_name() -> None:
    data = RunColumns.from_records([rec(0, 1.0)])
    expected = {"latency_s": 0.3, "latency_from_send_s": 0.29, "queue_wait_s": 0.09, "service_s": 0.2,
                "send_lag_s": 0.01}
    for name, value in expected.items():
        assert data.phase(name)[0] == pytest.approx(value), name
    assert np.isnan(data.phase("ttfo_s")[0])
    with pytest.raises(KeyError):
        data.phase("nonsense_s")


def test_the_span_starts_at_zero_and_is_never_empty() -> None:
    assert RunColumns.from_records([]).span() == (0.0, 1.0)
    assert RunColumns.from_records([rec(0, 5.0)]).span() == pytest.approx((0.0, 5.3))
    unsent = rec(0, 2.0, sent=None, started=None, done=None)
    lo, hi = RunColumns.from_records([unsent]).span()
    assert (lo, hi) == (0.0, 2.0)
    early = RunColumns.from_records([rec(0, -1.0, sent=None, started=None, done=None)])
    assert early.span() == pytest.approx((-1.0, -0.999))  # at least 1 ms wide


def test_the_warmup_window_reaches_the_first_measured_request() -> None:
    assert RunColumns.from_records([rec(0, 1.0)]).warmup_window() is None
    data = RunColumns.from_records([rec(0, 0.5, warmup=True), rec(1, 1.0, warmup=True), rec(2, 3.0)])
    assert data.warmup_window() == (0.5, 3.0)
    assert data.measured.tolist() == [False, False, True]
    only = RunColumns.from_records([rec(0, 0.5, warmup=True), rec(1, 1.0, warmup=True)])
    assert only.warmup_window() == (0.5, 1.0)


def test_errors_by_kind_and_when_each_failed() -> None:
    records = [rec(0, 1.0, ok=False, kind="timeout"), rec(1, 2.0, ok=False, kind="timeout", done=None),
               rec(2, 3.0, ok=False, kind="connect", sent=None, started=None, done=None),
               rec(3, 4.0, warmup=True, ok=False, kind="timeout"), rec(4, 5.0)]
    data = RunColumns.from_records(records)
    assert data.error_counts() == {"timeout": 3, "connect": 1}  # warm-up included
    assert data.error_time().tolist() == pytest.approx([1.3, 2.01, 3.0, 4.3, 5.3])


def test_eta_pairs_only_for_measured_ok_requests_with_an_eta() -> None:
    records = [rec(0, 1.0, eta=0.25), rec(1, 2.0, eta=0.5, ok=False), rec(2, 3.0, eta=0.5, warmup=True),
               rec(3, 4.0), rec(4, 5.0, eta=0.1, done=None)]
    estimated, actual = RunColumns.from_records(records).eta_pairs()
    assert estimated.tolist() == [0.25] and actual.tolist() == pytest.approx([0.29])


@pytest.mark.parametrize(("span", "first", "width"), [
    ((0.25, 0.75), 0.25, 0.005),  # starts on a multiple of the width at or below the span
    ((0.0, 100_000.0), 0.0, 600),  # past the widest step: 600 s bins, more than the target
])
def test_time_bins_start_and_width(span: tuple[float, float], first: float, width: float) -> None:
    edges = time_bins(span)
    assert edges[0] == pytest.approx(first) and edges[1] - edges[0] == pytest.approx(width)
    assert edges[-1] >= span[1]


def test_a_span_ending_on_an_edge_gets_one_bin_more_so_the_last_value_counts() -> None:
    edges = time_bins((0.0, 1.0), target=10)
    assert edges[-1] > 1.0 and np.histogram([1.0], bins=edges)[0].sum() == 1


@pytest.mark.parametrize(("value", "text"), [(-0.5, "-500 ms"), (0.0, "0 ms"), (123.0, "123 s"),
                                             (float("inf"), "n/a")])
def test_fmt_s_signs_zero_and_infinity(value: float, text: str) -> None:
    assert fmt_s(value) == text


# ---------------------------------------------------------------- the columns read from disk, as before


def _old_column(records: list[RequestRecord], name: str) -> np.ndarray:
    """The chart columns as they were built before (one pass over the records per column)."""
    return np.array([np.nan if getattr(r, name) is None else getattr(r, name) for r in records], dtype=float)


@pytest.fixture(scope="module")
def gradio_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[RequestRecord], Path]:
    import sys

    from qbench.run.records.schema import write_parquet

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from end_of_run import chunk_records

    rows, _ = chunk_records(np.random.default_rng(11), 0, 4000, 0.0, 1000.0, 1.0, 0.4)
    rows[3].error_kind = None  # an error without a kind
    rows[3].outcome = "error"
    folder = tmp_path_factory.mktemp("run")
    write_parquet(rows, folder / "records.parquet")
    return rows, folder


def test_charts_columns_from_parquet_are_the_records_columns(
        gradio_run: tuple[list[RequestRecord], Path]) -> None:
    from collections import Counter

    from qbench.run.records.columns import Columns

    records, folder = gradio_run
    data = RunColumns(Columns.read(folder, keep=3))
    fields = {"intended": "intended_at_s", "sent": "sent_at_s", "estimation": "estimation_at_s",
              "started": "started_at_s", "first_output": "first_output_at_s", "completed": "completed_at_s",
              "rank": "rank", "queue_size": "queue_size", "rank_eta": "rank_eta_s"}
    for attribute, name in fields.items():
        np.testing.assert_array_equal(getattr(data, attribute), _old_column(records, name), err_msg=name)
    assert data.ok.tolist() == [r.ok for r in records]
    assert data.warmup.tolist() == [r.warmup for r in records]
    old_kinds = ["" if r.ok else (r.error_kind or "unknown") for r in records]
    assert data.error_kind.tolist() == old_kinds
    failed = [k for k, r in zip(old_kinds, records, strict=True) if not r.ok]
    assert data.error_counts() == dict(Counter(failed))
    assert list(data.error_counts()) == list(dict(Counter(k for k in old_kinds if k)))  # first-sight order
    completed, sent, intended = (_old_column(records, n)
                                 for n in ("completed_at_s", "sent_at_s", "intended_at_s"))
    stacked = np.concatenate([intended, sent, completed])
    finite = stacked[np.isfinite(stacked)]
    assert data.span() == (float(min(0.0, finite.min())), max(float(finite.max()), 1e-3))
    started = _old_column(records, "started_at_s")
    phases = {"latency_s": completed - intended, "queue_wait_s": started - sent,
              "service_s": completed - started,
              "ttfo_s": _old_column(records, "first_output_at_s") - intended, "send_lag_s": sent - intended,
              "latency_from_send_s": completed - sent}
    for name, values in phases.items():
        np.testing.assert_array_equal(data.phase(name), values, err_msg=name)
    estimated, actual = data.eta_pairs()
    rank_eta, waited = _old_column(records, "rank_eta_s"), completed - _old_column(records, "estimation_at_s")
    keep = np.isfinite(rank_eta) & np.isfinite(waited) & data.ok & ~data.warmup
    np.testing.assert_array_equal(estimated, rank_eta[keep])
    np.testing.assert_array_equal(actual, waited[keep])


def test_a_scatter_draws_every_request_up_to_the_limit_then_a_stated_uniform_sample() -> None:
    data = RunColumns.from_records([rec(i, i * 0.1) for i in range(100)])
    every = np.ones(100, dtype=bool)
    assert data.sample(every, limit=100).tolist() == every.tolist()
    drawn = data.sample(every, limit=30)
    assert drawn.sum() == 30 and drawn.tolist() == data.sample(every, limit=30).tolist()  # the same draw
    assert 0 < np.flatnonzero(drawn).mean() < 99  # from across the run, not its start
    half = np.arange(100) % 2 == 0
    assert not (data.sample(half, limit=10) & ~half).any()
    from qbench.report.chart_columns import points_label

    assert points_label(30, 30) == "" and points_label(30, 1_000_000) == (
        "a uniform sample of 30 of 1,000,000 requests")
