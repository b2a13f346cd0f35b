"""qbench.tune.sweep.command: what the orchestration keeps when a phase fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qbench.tune.sweep import command, winner
from qbench.tune.sweep.config import SweepOptions, build_config
from qbench.tune.values.result import PointResult

from ..conftest import write_scenario


def test_a_crash_in_the_capacity_phase_keeps_the_measured_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def measured(config: Any, servers: Any, point: Any) -> PointResult:
        return PointResult(point.point_id, dict(point.knobs), goodput_rps=10.0, p95_latency_s=0.1)

    def crash(*args: Any) -> None:
        raise FileNotFoundError("capacity/server.yaml")

    monkeypatch.setattr(command, "evaluate_point", measured)
    monkeypatch.setattr(winner, "measure_capacity", crash)
    path = write_scenario(tmp_path, {"capacity_trials": 2})
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1"], out_root=str(tmp_path)))
    result = command.run_sweep(config)
    assert result.recommendation.winner is not None and result.capacity is None
    assert (config.sweep_dir / "sweep.parquet").is_file()
    assert any("FileNotFoundError" in note for note in result.recommendation.notes)
