"""points/<id>/point.json as data (qbench.tune.values.point_file): written and read back the same, and read
without raising when it is old, partial or broken."""

from __future__ import annotations

import json
from pathlib import Path

from qbench.tune.values.ceiling import Capacity, Probe
from qbench.tune.values.point_file import PointFile, read_point_file
from qbench.tune.values.result import PointResult


def test_a_point_file_round_trips(tmp_path: Path) -> None:
    knobs = {"concurrency_limit": 2}
    result = PointResult("c2", knobs, goodput_rps=9.0, p95_latency_s=0.4, capacity_rps=12.0)
    capacity = Capacity(12.0, 13.5, 0.1, True, probes=[Probe(12.0, True), Probe(13.5, False)])
    point = PointFile("c2", knobs, "ok", "", "", {"peak_rss_mb": 310.0, "peak_gpu_mem_mb": None},
                      result, [{"run_dir": "points/c2", "summary": {"requests": 10}}], capacity,
                      {"verdict": "applied", "evidence": ["2 ran at once"]}, 12.5)
    (tmp_path / "c2").mkdir()
    (tmp_path / "c2" / "point.json").write_text(json.dumps(point.to_dict()))
    again = read_point_file(tmp_path / "c2")
    assert again == point and again.to_dict() == point.to_dict()


def test_a_partial_or_broken_point_file_reads_without_raising(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "point.json").write_text(json.dumps({"status": "failed", "reason": "boom"}))
    old = read_point_file(tmp_path / "old")
    assert old is not None and old.point_id == "old" and old.result is None and old.capacity is None
    assert (old.status, old.reason, old.repeats) == ("failed", "boom", [])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "point.json").write_text("{not json")
    assert read_point_file(tmp_path / "broken") is None and read_point_file(tmp_path / "none") is None


def test_an_older_point_file_reads_its_old_shapes(tmp_path: Path) -> None:
    """Releases that wrote {} for no capacity and no knob check, the probe list in the result's capacity,
    or a mistyped entry: each part reads as its default, the rest as written."""
    result = {"point_id": "c1", "knobs": {"concurrency_limit": 1}, "knob_check": {},
              "capacity": {"capacity_rps": 4.0, "probes": [{"rate_rps": 4.0}, {"rate_rps": 5.0}]}}
    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "point.json").write_text(json.dumps({
        "point_id": "", "capacity": {}, "result": result, "elapsed_s": "x", "resources": None}))
    point = read_point_file(tmp_path / "c1")
    assert point is not None and point.point_id == "c1" and point.capacity is None
    assert point.result is not None and point.result.knob_check is None
    assert point.result.capacity is not None and point.result.capacity.probes == 2
    assert (point.elapsed_s, point.resources) == (0.0, {})
