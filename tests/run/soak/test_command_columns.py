"""qbench.run.soak.command's slices and verdicts from columns: the same figures as from records, to the digit.

A day's soak is tens of millions of records; `judge_soak` reads the run's columns (records.parquet, a few
at a time) instead of every record as an object. The records-based slicing it replaced is kept here as
the oracle."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord, write_parquet
from qbench.run.soak.command import SoakOptions, judge_soak, slice_series
from qbench.run.soak.health import HealthSample


def oracle_slices(records: Sequence[RequestRecord], slice_s: float) -> list[dict[str, float | None]]:
    """slice_series as it was, one record object at a time (before the columns)."""
    done = sorted((r for r in records if r.completed_at_s is not None), key=lambda r: r.completed_at_s or 0.0)
    if not done or slice_s <= 0:
        return []
    ends = np.array([r.completed_at_s for r in done], dtype=np.float64)
    window = max(r.intended_at_s for r in records)
    series: list[dict[str, float | None]] = []
    for k in range(max(int(window // slice_s), 1)):
        lo, hi = np.searchsorted(ends, [k * slice_s, (k + 1) * slice_s], side="left")
        part = done[lo:hi]
        ok = [r.latency_s for r in part if r.outcome == "ok" and r.latency_s is not None]
        queued = [r.queue_size for r in part if r.queue_size is not None]
        series.append({
            "t_s": (k + 0.5) * slice_s,
            "requests": float(hi),
            "p95_latency_s": float(np.percentile(ok, 95)) if ok else None,
            "throughput_rps": len(part) / slice_s,
            "error_pct": 100.0 * (len(part) - len(ok)) / len(part) if part else None,
            "queue_size": float(np.median(queued)) if queued else None,
        })
    return series


def soak_records(n: int, seed: int) -> list[RequestRecord]:
    """A soak's records: Poisson sends at 50/s, latency growing over the run, 4% errors, some never
    finished, queue sizes on most, completion order unlike send order, ties in completion times."""
    rng = np.random.default_rng(seed)
    sends = np.cumsum(rng.exponential(1 / 50, n))
    out = []
    for i, t in enumerate(sends):
        latency = float(rng.gamma(2.0, 0.05) * (1 + t / sends[-1]))
        done = round(float(t + latency), 3)  # rounded: ties in completion time
        kind = rng.random()
        r = RequestRecord(request_id=i, user_id=i % 7, session_id=f"s{i % 5}", endpoint="predict",
                          warmup=bool(t < 2.0), intended_at_s=float(t), sent_at_s=float(t) + 0.001,
                          joined_at_s=float(t) + 0.002, started_at_s=float(t) + latency / 3,
                          completed_at_s=done, outcome="ok",
                          queue_size=int(rng.integers(0, 30)) if kind > 0.1 else None)
        if kind < 0.04:
            r.outcome, r.error_kind = "error", "server_error"
        elif kind < 0.05:
            r.completed_at_s, r.outcome, r.error_kind = None, "error", "timeout"
        out.append(r)
    return out


@pytest.mark.parametrize(("n", "seed", "slice_s"), [(3000, 1, 2.0), (5000, 2, 7.5), (400, 3, 100.0)])
def test_slices_from_columns_equal_the_records_slices(n: int, seed: int, slice_s: float,
                                                      tmp_path: Path) -> None:
    records = soak_records(n, seed)
    expected = oracle_slices(records, slice_s)
    assert slice_series(records, slice_s) == expected  # Columns.of(records)
    write_parquet(records, tmp_path / "records.parquet")
    assert slice_series(Columns.read(tmp_path, keep=2), slice_s) == expected  # from disk, as a soak's end


def test_no_finished_request_is_no_slice() -> None:
    records = soak_records(50, 4)
    for r in records:
        r.completed_at_s = None
    assert slice_series(records, 1.0) == [] == oracle_slices(records, 1.0)


def test_the_verdicts_from_the_run_folder_equal_those_from_records(tmp_path: Path) -> None:
    """judge_soak over records.parquet read as columns gives the report it gave from the records."""
    records = soak_records(4000, 5)
    samples = [HealthSample(t_s=float(t), at=1e9 + float(t), sent=int(t * 50), completed=int(t * 50) - 3,
                            ok=int(t * 48), in_flight=3, rss_bytes=300 * 2**20 + int(t) * 4096)
               for t in np.arange(0.0, 80.0, 2.0)]
    options = SoakOptions(interval_s=2.0, warmup_s=5.0)
    write_parquet(records, tmp_path / "records.parquet")
    from_disk = judge_soak(samples, Columns.read(tmp_path, keep=2), options)
    assert from_disk.to_dict() == judge_soak(samples, records, options).to_dict()
    assert from_disk.requests == sum(r.completed_at_s is not None for r in records)
    assert from_disk.slices == oracle_slices(records, max(2.0, samples[-1].t_s / 20))
