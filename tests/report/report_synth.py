"""Fabricated but realistic runs for report tests: an open-loop Poisson load on a k-worker FIFO queue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from qbench.run.records.schema import RequestRecord, write_parquet


def simulate(
    n: int = 400,
    rate_rps: float = 20.0,
    service_s: float = 0.08,
    workers: int = 2,
    max_queue: int | None = None,
    warmup: int = 20,
    fail_every: int = 0,
    seed: int = 1,
) -> list[RequestRecord]:
    """Simulate `n` Poisson arrivals served FIFO by `workers` servers with exponential service times."""
    rng = np.random.default_rng(seed)
    intended = np.cumsum(rng.exponential(1.0 / rate_rps, n))
    lag = rng.exponential(0.002, n)
    free = np.zeros(workers)
    waiting_ends: list[float] = []
    records = []
    for i in range(n):
        sent = float(intended[i] + lag[i])
        waiting_ends = [t for t in waiting_ends if t > sent]
        base = dict(request_id=i, user_id=i % 8, session_id=f"s{i}", endpoint="/predict",
                    warmup=i < warmup, intended_at_s=float(intended[i]), sent_at_s=sent)
        if max_queue is not None and len(waiting_ends) >= max_queue:
            records.append(RequestRecord(**base, completed_at_s=sent + 0.003, error_kind="queue_full",
                                         http_status=503, error_message="Queue is full."))
            continue
        joined = sent + 0.002
        w = int(np.argmin(free))
        start = max(joined, float(free[w]))
        duration = float(rng.exponential(service_s))
        done = start + duration
        free[w] = done
        rank = len(waiting_ends)
        waiting_ends.append(start)
        ok = not (fail_every and i % fail_every == fail_every - 1)
        records.append(RequestRecord(
            **base, joined_at_s=joined, estimation_at_s=joined + 0.001, rank=rank, queue_size=rank + 1,
            rank_eta_s=(rank + 1) * service_s / workers + service_s * rng.uniform(0.5, 1.5),
            started_at_s=start, start_eta_s=service_s, completed_at_s=done,
            outcome="ok" if ok else "error", error_kind=None if ok else "server_error",
            error_message=None if ok else "boom", http_status=200, bytes_sent=120, bytes_received=300,
            server_duration_s=duration, event_id=f"e{i}",
        ))
    return records


def write_run(path: Path, records: list[RequestRecord], extra: dict[str, Any] | None = None) -> Path:
    """A run directory as `qbench run` writes it: records.parquet + run.json."""
    path.mkdir(parents=True, exist_ok=True)
    write_parquet(records, path / "records.parquet")
    run = {
        "run_id": path.name,
        "qbench_version": "0.1.0",
        "started_at": "2026-11-22T01:00:00Z",
        "scenario": {"name": "synthetic", "arrival": {"kind": "poisson", "rate_rps": 20}},
        "target": "http://127.0.0.1:7860",
        "server_config": {"default_concurrency_limit": 2, "max_size": None},
        "host": {"hostname": "test", "cpus": 2, "python": "3.11"},
        "generator": {"planned": len(records)},
    }
    run.update(extra or {})
    (path / "run.json").write_text(json.dumps(run, indent=2))
    return path


GRID = {"concurrency_limit": [1, 2, 4], "max_batch_size": [1, 4], "max_threads": [4, 40]}


def write_sweep(path: Path, n: int = 120, fail_point: bool = True) -> Path:
    """A sweep directory laid out as `qbench sweep` writes it, measured by `simulate` per point.

    sweep.parquet and recommendation.json come from qbench's own `recommend()` and `write_outputs()`;
    one point failed to start (no run folder).
    """
    import itertools
    from types import SimpleNamespace

    from qbench.run.results.files import Writer
    from qbench.run.results.summary import summarize
    from qbench.run.scenario.schema import Slo
    from qbench.tune.ranking.recommend import recommend
    from qbench.tune.search.smart import SearchResult
    from qbench.tune.sweep.outputs import write_outputs
    from qbench.tune.values.constraints import Constraints
    from qbench.tune.values.result import PointResult

    slo = {"p95_latency_s": 0.6}
    results = []
    for i, values in enumerate(itertools.product(*GRID.values())):
        knobs = dict(zip(GRID, values, strict=True))
        point_id = f"p{i:03d}"
        point_dir = path / "points" / point_id
        if fail_point and i == 5:
            results.append(PointResult(point_id, knobs, status="failed", reason="server did not start"))
            continue
        workers = min(knobs["concurrency_limit"] * knobs["max_batch_size"], knobs["max_threads"])
        records = simulate(n=n, rate_rps=15, service_s=0.1 + 0.02 * workers, workers=workers, seed=i)
        write_run(point_dir, records)
        s = summarize(records, Slo(**slo))
        total = s.phase("latency_s")
        results.append(PointResult(
            point_id, knobs, goodput_rps=s.goodput_rps, throughput_rps=s.throughput_rps,
            p50_latency_s=total.p50, p95_latency_s=total.p95, p99_latency_s=total.p99,
            error_rate=s.error_rate,
            peak_rss_mb=200.0 + 10 * workers,
        ))
    for r in results:
        (path / "points" / r.point_id).mkdir(parents=True, exist_ok=True)
        (path / "points" / r.point_id / "point.json").write_text(json.dumps(
            {"point_id": r.point_id, "knobs": r.knobs, "status": r.status, "reason": r.reason,
             "result": r.to_dict()}))
    rec = recommend(results, Constraints(slo=slo))
    config = SimpleNamespace(search="grid", writer=Writer())
    write_outputs(path, SearchResult(results, grid_size=len(results)), rec, config)  # type: ignore[arg-type]
    (path / "sweep.json").write_text(json.dumps({
        "schema_version": 1, "sweep_id": path.name, "mode": "relaunch", "search": "grid",
        "grid": {"axes": GRID, "links": {}}, "slo": slo,
        "scenario": {"path": "scenarios/x.yaml", "content": {"name": "synthetic-sweep"}},
    }))
    return path
