"""The forward passes beside the served rate (qbench.run.results.device), on runs whose answer is built in."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord
from qbench.run.results.device import DeviceStats, device_stats, with_gpu_busy
from qbench.run.results.summary import Summary, summarize


def batches(spec: list[tuple[int, int, float]], start: float = 0.0) -> list[RequestRecord]:
    """(count, batch size, forward s): `count` batches of that size, each record of one carrying its
    batch's forward pass; one request sent every 10 ms from `start`."""
    rows: list[RequestRecord] = []
    for count, size, forward in spec:
        for _ in range(count * size):
            t = start + 0.01 * len(rows)
            rows.append(RequestRecord(
                request_id=len(rows), user_id=0, session_id="s", endpoint="predict", warmup=False,
                intended_at_s=t, sent_at_s=t, started_at_s=t + 0.001,
                completed_at_s=t + 0.05, outcome="ok", server_forward_s=forward, server_batch_size=size))
    return rows


def test_one_size_of_batch() -> None:
    """100 batches of 4 at 10 ms over a 4 s window: 100 req/s served, 400 req/s of forward time."""
    device = device_stats(Columns.of(batches([(100, 4, 0.010)])), 4.0)
    assert device is not None
    assert device.records == 400 and device.batch_size == 4.0
    assert device.forward_ms == pytest.approx(10.0)
    assert device.forward_rps == pytest.approx(400.0) and device.served_rps == pytest.approx(100.0)
    assert device.served_share == pytest.approx(0.25)


def test_mixed_batches_weigh_each_forward_pass_once() -> None:
    """10 batches of 8 at 20 ms and 20 of 2 at 5 ms: 120 requests in 30 passes (4 a pass), 0.3 s of
    forward time (400 req/s); the median pass is 5 ms (20 of 30 passes), though 80 of 120 records
    carry 20 ms."""
    device = device_stats(Columns.of(batches([(10, 8, 0.020), (20, 2, 0.005)])), 1.2)
    assert device is not None
    assert device.batch_size == pytest.approx(4.0)
    assert device.forward_ms == pytest.approx(5.0)
    assert device.forward_rps == pytest.approx(400.0)
    assert device.served_share == pytest.approx(100.0 / 400.0)


def test_no_forward_phase_no_figures() -> None:
    rows = batches([(5, 1, 0.01)])
    for r in rows:
        r.server_forward_s = None
    assert device_stats(Columns.of(rows), 1.0) is None


def test_a_missing_batch_size_is_a_batch_of_one() -> None:
    rows = batches([(4, 1, 0.01)])
    for r in rows[:2]:
        r.server_batch_size = None
    device = device_stats(Columns.of(rows), 1.0)
    assert device is not None and device.batch_size == 1.0 and device.forward_rps == pytest.approx(100.0)


def test_the_gpu_busy_share_joins_or_stands_alone() -> None:
    assert with_gpu_busy(None, None) is None
    alone = with_gpu_busy(None, [0.31])
    assert alone == DeviceStats(gpu_busy=[0.31]) and alone.line() == "device: GPU busy 31%"
    both = with_gpu_busy(DeviceStats(records=400, batch_size=32.0, forward_ms=31.0, forward_rps=1031.0,
                                     served_rps=473.0, served_share=473.0 / 1031.0), [0.31])
    assert both is not None and both.line() == (
        "device: served 473.0 req/s, 46% of what its forward passes could serve back to back (1,031.0 "
        "req/s at batches of 32.0, 31.0 ms each); GPU busy 31%")


def test_the_summary_carries_it_over_the_measured_ok_requests() -> None:
    """Warm-up and failed requests are left out; summary.json's dict reads back."""
    rows = batches([(10, 4, 0.01)])
    rows[0].warmup = True
    rows[1].outcome = "error"
    summary = summarize(rows)
    assert summary.device is not None and summary.device.records == 38
    assert summary.device.served_rps == pytest.approx(38 / summary.duration_s)
    assert Summary.from_dict(summary.to_dict()).device == summary.device
    assert Summary.from_dict({}).device is None  # a summary.json from before


def test_summed_in_any_order_the_same() -> None:
    rows = batches([(7, 3, 0.012), (5, 5, 0.02)])
    order = np.random.default_rng(3).permutation(len(rows))
    a = device_stats(Columns.of(rows), 2.0)
    b = device_stats(Columns.of([rows[i] for i in order]), 2.0)
    assert a is not None and b is not None
    assert a.forward_ms == b.forward_ms and a.forward_rps == pytest.approx(b.forward_rps)
