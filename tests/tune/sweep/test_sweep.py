"""qbench.tune.sweep.sweep: what the orchestration keeps when a phase fails, and its pure helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.tune.knobs.grid import Point
from qbench.tune.ranking.recommend import RankedPoint, Recommendation
from qbench.tune.search.search import SearchResult
from qbench.tune.sweep.config import SweepConfig, SweepOptions, build_config
from qbench.tune.sweep.sweep import (
    SCHEMA_VERSION,
    _coords_of,
    _estimate_users,
    load_done_points,
    paired_note,
    server_advice,
    write_outputs,
)
from qbench.tune.values.point_file import NAME as POINT_FILE
from qbench.tune.values.point_file import PointFile
from qbench.tune.values.result import PointResult
from tests.report.report_synth import simulate, write_run

from ..conftest import write_scenario


def test_a_crash_in_the_capacity_phase_keeps_the_measured_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qbench.tune.sweep import sweep
    from qbench.tune.values.result import PointResult

    def measured(config: Any, servers: Any, point: Any) -> PointResult:
        return PointResult(point.point_id, dict(point.knobs), goodput_rps=10.0, p95_latency_s=0.1)

    def crash(*args: Any) -> None:
        raise FileNotFoundError("capacity/server.yaml")

    monkeypatch.setattr(sweep, "evaluate_point", measured)
    monkeypatch.setattr(sweep, "_capacity", crash)
    path = write_scenario(tmp_path, {"capacity_trials": 2})
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1"], out_root=str(tmp_path)))
    result = sweep.run_sweep(config)
    assert result.recommendation.winner is not None and result.capacity is None
    assert (config.sweep_dir / "sweep.parquet").is_file()
    assert any("FileNotFoundError" in note for note in result.recommendation.notes)


def config_for(tmp_path: Path, *grid: str) -> SweepConfig:
    path = write_scenario(tmp_path)  # the base server: predict, concurrency_limit 1, max_batch_size 4
    return build_config(SweepOptions(str(path), grid=list(grid), out_root=str(tmp_path / "r")))


def test_relaunch_advice_is_the_base_settings_with_the_winners_knobs(tmp_path: Path) -> None:
    config = config_for(tmp_path, "concurrency_limit=1,2")
    code, label = server_advice(config, PointResult("c2", {"concurrency_limit": 2}), advised=16)
    settings = yaml.safe_load(code)
    predict = settings["functions"][0]
    assert (predict["concurrency_limit"], predict["max_batch_size"]) == (2, 4)
    assert settings["queue"]["max_size"] == 16 and label.startswith("reference server settings")
    # a swept max_size is the winner's own, not the advised one
    code, _ = server_advice(config, PointResult("q8", {"max_size": 8}), advised=16)
    assert yaml.safe_load(code)["queue"]["max_size"] == 8


@pytest.mark.parametrize(
    ("knobs", "users"),
    [
        ({"concurrency_limit": 2}, 16),  # 2 x the base server's max_batch_size 4 x 2
        ({"concurrency_limit": 1, "max_batch_size": 1}, 4),  # at least 4
        ({"concurrency_limit": "none"}, 32),  # unknown work slots: 32
    ],
)
def test_a_points_capacity_estimate_uses_twice_its_work_slots(
    tmp_path: Path, knobs: dict[str, Any], users: int
) -> None:
    config = config_for(tmp_path, "concurrency_limit=1,2")
    assert _estimate_users(config, Point(knobs)) == users


def test_a_results_coordinates_on_the_grid(tmp_path: Path) -> None:
    config = config_for(tmp_path, "concurrency_limit=1,2,4", "max_batch_size=1,8")
    point = config.grid.point_at((2, 1))
    assert _coords_of(config.grid, PointResult(point.point_id, dict(point.knobs))) == (2, 1)


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


# ---------------------------------------------------------------- the paired note


def ranked(*ids: str) -> list[RankedPoint]:
    return [RankedPoint(i + 1, pid, {}, "winner" if i == 0 else "feasible", "", goodput_rps=10.0,
                        p95_latency_s=0.1)
            for i, pid in enumerate(ids)]


def test_a_faster_winner_on_the_same_schedule_is_confirmed(tmp_path: Path) -> None:
    write_run(tmp_path / "points" / "fast", simulate(n=300, service_s=0.04, seed=5))
    write_run(tmp_path / "points" / "slow", simulate(n=300, service_s=0.05, seed=5))
    (note,) = paired_note(tmp_path, ranked("fast", "slow"))
    assert note.startswith("per request, fast against the runner-up slow (")
    assert "fast faster for" in note and note.endswith("(faster)")


def test_identical_points_are_called_within_the_noise(tmp_path: Path) -> None:
    write_run(tmp_path / "points" / "a", simulate(n=200, seed=6))
    write_run(tmp_path / "points" / "b", simulate(n=200, seed=6))
    (note,) = paired_note(tmp_path, ranked("a", "b"))
    assert "no clear latency difference" in note and "within the noise" in note


def test_no_note_without_a_shared_schedule_or_a_runner_up(tmp_path: Path) -> None:
    write_run(tmp_path / "points" / "a", simulate(n=200, seed=1))
    write_run(tmp_path / "points" / "b", simulate(n=200, seed=2))  # other arrivals: closed loop, say
    assert paired_note(tmp_path, ranked("a", "b")) == []
    assert paired_note(tmp_path, ranked("a")) == []
    assert paired_note(tmp_path, ranked("a", "missing")) == []
