"""qbench.tune.sweep.advice: the winner as the reference server's settings, and the paired note (do the
winner and the runner-up really differ, request by request?)."""

from __future__ import annotations

from pathlib import Path

import yaml

from qbench.tune.ranking.recommend import RankedPoint
from qbench.tune.sweep.advice import paired_note, server_advice
from qbench.tune.values.result import PointResult
from tests.report.report_synth import simulate, write_run

from .sweep_configs import config_for


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
