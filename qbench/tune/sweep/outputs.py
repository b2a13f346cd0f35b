"""A sweep's files as data: sweep.json, the points for `--resume`, sweep.parquet, recommendation.json."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qbench.tune.ranking.recommend import Recommendation
from qbench.tune.search.smart import SearchResult
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.values.point_file import NAME as POINT_FILE
from qbench.tune.values.point_file import read_point_file
from qbench.tune.values.result import PointResult
from qbench.tune.values.sweep_info import SweepInfo

SCHEMA_VERSION = 1


def sweep_json(config: SweepConfig) -> dict[str, Any]:
    """sweep.json's body, through its readers' type (`SweepInfo`: a key must be one of its fields)."""
    return SweepInfo(schema_version=SCHEMA_VERSION, sweep_id=config.sweep_dir.name,
                     created_at=datetime.now(timezone.utc).isoformat(), **config.describe()).to_dict()


def load_done_points(sweep_dir: Path) -> dict[str, PointResult]:
    """Checkpointed points of a (possibly interrupted) sweep, by point id."""
    done: dict[str, PointResult] = {}
    for path in sorted((sweep_dir / "points").glob(f"*/{POINT_FILE}")):
        saved = read_point_file(path.parent)
        if saved is not None and saved.result is not None:
            done[saved.point_id] = saved.result
    return done


def write_outputs(sweep_dir: Path, search: SearchResult, rec: Recommendation, config: SweepConfig) -> None:
    """sweep.parquet (one row per measured point) and recommendation.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ranks = {r.point_id: r for r in rec.ranked}
    knob_names = list(dict.fromkeys(k for r in search.results for k in r.knobs))
    rows = [_row(r, knob_names, ranks) for r in search.results]
    columns = {name: [row[name] for row in rows] for name in (rows[0] if rows else {"point_id": None})}
    for name in knob_names:  # a knob with mixed types (max_size 4 / "none") becomes text
        kinds = {type(v) for v in columns[name] if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            columns[name] = [None if v is None else str(v) for v in columns[name]]
    table = pa.Table.from_pydict(columns)
    pq.write_table(
        table.replace_schema_metadata({b"qbench_sweep_schema_version": str(SCHEMA_VERSION).encode()}),
        sweep_dir / "sweep.parquet",
    )
    out = rec.to_dict()
    out["search"] = {"mode": config.search, **search.to_dict()}
    config.writer.json(sweep_dir / "recommendation.json", out)  # a server log tail may echo a secret


def _row(r: PointResult, knob_names: list[str], ranks: dict[str, Any]) -> dict[str, Any]:
    lo, hi = r.goodput_ci()
    ranked = ranks.get(r.point_id)
    row: dict[str, Any] = {"point_id": r.point_id}
    row.update({name: r.knobs.get(name) for name in knob_names})
    row.update(
        goodput_rps=r.goodput_rps,
        throughput_rps=r.throughput_rps,
        p50_latency_s=r.p50_latency_s,
        p95_latency_s=r.p95_latency_s,
        p99_latency_s=r.p99_latency_s,
        error_rate=r.error_rate,
        peak_rss_mb=r.peak_rss_mb,
        peak_gpu_mem_mb=r.peak_gpu_mem_mb,
        status=r.status,
        reason=r.reason,
        rank=ranked.rank if ranked else None,
        verdict=ranked.verdict if ranked else None,
        goodput_ci_low=lo,
        goodput_ci_high=hi,
        repeats=len(r.goodput_repeats) or 1,
        capacity_rps=r.capacity_rps,
    )
    return row
