"""The sweep's paired note: do the winner and the runner-up really differ request by request?"""

from __future__ import annotations

import sys
from pathlib import Path

from qbench.tune.recommend import RankedPoint
from qbench.tune.sweep import paired_note

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_synth import simulate, write_run  # noqa: E402


def ranked(*ids: str) -> list[RankedPoint]:
    return [RankedPoint(i + 1, pid, {}, "winner" if i == 0 else "feasible", "", 10.0, 0.1)
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
