"""qbench.tune.sweep.outputs: the checkpointed points read back for --resume, sweep.parquet and
recommendation.json."""

from __future__ import annotations

import json
from pathlib import Path

from qbench.tune.ranking.recommend import RankedPoint, Recommendation
from qbench.tune.search.smart import SearchResult
from qbench.tune.sweep.outputs import SCHEMA_VERSION, load_done_points, write_outputs
from qbench.tune.values.point_file import NAME as POINT_FILE
from qbench.tune.values.point_file import PointFile
from qbench.tune.values.result import PointResult

from .sweep_configs import config_for


def test_load_done_points_reads_each_checkpointed_result(tmp_path: Path) -> None:
    points = tmp_path / "points"
    done = PointResult("c1", {"concurrency_limit": 1}, goodput_rps=7.0)
    files = {"c1": PointFile("c1", {"concurrency_limit": 1}, result=done).to_dict(),
             "c2": PointFile("c2", {"concurrency_limit": 2}, status="failed").to_dict()}  # no result
    for pid, data in files.items():
        (points / pid).mkdir(parents=True)
        (points / pid / POINT_FILE).write_text(json.dumps(data))
    (points / "c4").mkdir()
    (points / "c4" / POINT_FILE).write_text("{cut short")  # interrupted while writing
    (points / "c8").mkdir()  # started, never checkpointed
    loaded = load_done_points(tmp_path)
    assert list(loaded) == ["c1"] and loaded["c1"].goodput_rps == 7.0
    assert load_done_points(tmp_path / "empty") == {}


def test_write_outputs_writes_one_row_per_point_and_the_recommendation(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    config = config_for(tmp_path, "max_size=4,none")
    config.sweep_dir.mkdir(parents=True, exist_ok=True)
    four = PointResult("q4", {"max_size": 4}, goodput_rps=9.0, goodput_repeats=[8.0, 10.0])
    none = PointResult("qnone", {"max_size": "none"}, status="failed", reason="crashed")
    ranked = [RankedPoint(1, "q4", four.knobs, "winner", "best", goodput_rps=9.0)]
    rec = Recommendation(winner=four, ranked=ranked, why="q4")
    write_outputs(config.sweep_dir, SearchResult([four, none], grid_size=2), rec, config)
    table = pq.read_table(config.sweep_dir / "sweep.parquet")
    rows = table.to_pylist()
    assert [r["max_size"] for r in rows] == ["4", "none"]  # mixed int / text: written as text
    assert (rows[0]["rank"], rows[0]["verdict"], rows[0]["repeats"]) == (1, "winner", 2)
    assert (rows[1]["rank"], rows[1]["verdict"], rows[1]["status"], rows[1]["reason"]) == (
        None, None, "failed", "crashed")
    assert rows[0]["goodput_ci_low"] < 9.0 < rows[0]["goodput_ci_high"]
    assert table.schema.metadata[b"qbench_sweep_schema_version"] == str(SCHEMA_VERSION).encode()
    out = json.loads((config.sweep_dir / "recommendation.json").read_text())
    assert out["search"] == {"mode": "grid", "trials": 2, "grid_size": 2, "saved": 0, "path": []}
    assert out["winner"]["point_id"] == "q4"
