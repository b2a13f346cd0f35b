"""Small real sweeps (sleep workload, 2-s points) through every launch mode, resume, and failing points."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from qbench.analysis import load_sweep
from qbench.cli import app
from qbench.run.records.columns import Columns
from qbench.run.records.schema import read_records
from qbench.tune.knobs.grid import Point
from qbench.tune.points.knobcheck import observed_parallelism
from qbench.tune.servers.server_process import start_reference_server
from qbench.tune.sweep.command import SweepResult, run_sweep
from qbench.tune.sweep.config import CapacityOptions, SweepOptions, build_config, resume_options
from qbench.tune.values.result import PointResult
from tests.tune.conftest import SLOW_SERVER, write_scenario

PARQUET_COLUMNS = {
    "point_id",
    "goodput_rps",
    "throughput_rps",
    "p50_latency_s",
    "p95_latency_s",
    "p99_latency_s",
    "error_rate",
    "peak_rss_mb",
    "peak_gpu_mem_mb",
    "status",
    "reason",
}
EXAMPLE_APP = Path(__file__).resolve().parents[3] / "examples" / "gradio_app.py"


class Recorder:
    """Observer that remembers which points were measured; can interrupt after N points (Ctrl-C)."""

    def __init__(self, interrupt_after: int | None = None) -> None:
        self.started: list[str] = []
        self.interrupt_after = interrupt_after

    def point_started(self, point: Point, index: int, total: int) -> None:
        self.started.append(point.point_id)

    def point_done(self, result: PointResult, best: PointResult | None) -> None:
        if self.interrupt_after is not None and len(self.started) >= self.interrupt_after:
            raise KeyboardInterrupt

    def phase(self, text: str) -> None:
        pass


#: A point sized in requests, where a test compares two points' served rates: four rounds of the 16
#: users at concurrency_limit=2 (a 2 s point on a busy box was mostly the relaunched server's first slow
#: calls: limit 2 served 5.1 req/s, half of it over the SLO, against limit 1's 5.8)
BY_REQUESTS = {"duration": None, "requests": 64}


def sweep(tmp_path: Path, grid: list[str], observer: Recorder | None = None,
          server: dict[str, Any] | None = None, load: dict[str, Any] | None = None,
          **options: Any) -> SweepResult:
    path = write_scenario(tmp_path, server=server, **(load or {}))
    config = build_config(SweepOptions(str(path), grid=grid, out_root=str(tmp_path / "reports"), **options))
    return run_sweep(config, observer)


def check_layout(result: SweepResult) -> dict[str, Any]:
    d = result.sweep_dir
    sweep_json = json.loads((d / "sweep.json").read_text())
    assert {"grid", "slo", "mode", "scenario"} <= set(sweep_json)
    table = pq.read_table(d / "sweep.parquet")
    assert PARQUET_COLUMNS | set(sweep_json["grid"]["axes"]) <= set(table.column_names)
    assert table.num_rows == len(result.results)
    for r in result.results:
        point = json.loads((d / "points" / r.point_id / "point.json").read_text())
        assert point["status"] == r.status and point["knobs"] == r.knobs
        if r.status == "ok":
            assert (d / "points" / r.point_id / "records.parquet").exists()
    rec: dict[str, Any] = json.loads((d / "recommendation.json").read_text())
    loaded = load_sweep(d)  # what a notebook sees of the same folder
    assert sorted(loaded.points["point_id"]) == sorted(r.point_id for r in result.results)
    assert loaded.winner == (rec["winner"] or {}).get("point_id")
    ok_points = [r.point_id for r in result.results if r.status == "ok"]
    assert set(loaded.records()["point_id"]) == set(ok_points)
    return rec


def test_relaunch_mode_end_to_end_with_capacity(tmp_path: Path) -> None:
    result = sweep(tmp_path, ["concurrency_limit=1,2"], links=["users=4*concurrency_limit"],
                   capacity=CapacityOptions(trials=4, duration=2.0), server=SLOW_SERVER, load=BY_REQUESTS)
    rec = check_layout(result)
    assert [r.status for r in result.results] == ["ok", "ok"]
    # two workers serve about twice as fast as one: the recommendation must see it
    by_id = {r.point_id: r for r in result.results}
    assert by_id["c2-u8"].goodput_rps > 1.4 * by_id["c1-u4"].goodput_rps
    assert rec["winner"]["point_id"] == "c2-u8"
    assert "concurrency_limit=2" in rec["gradio_code"]
    assert rec["max_size_advice"]["max_size"] >= 1
    # up to four probes, then the first passing again. Four, not two: the first guess (the point's goodput,
    # about the ceiling: 2 x 4 / 240 ms = 33 req/s) and the next step down can both fail as not steady; two
    # more steps reach well under the ceiling on any box. A probe that failed while the host stalled is
    # kept as "stalled" and its rate measured again (a busy box's run: 36, 45, 70 failed, 56 stalled, 56)
    kinds = [p["kind"] for p in rec["capacity"]["probes"]]
    assert kinds[-1] == "recheck" and set(kinds[:-1]) <= {"rate", "stalled"}, kinds
    assert 2 <= kinds.count("rate") <= 4, kinds
    assert rec["capacity"]["capacity_rps"] > 0
    assert all(r.peak_rss_mb and r.peak_rss_mb > 10 for r in result.results)


def test_live_reconfiguration_matches_relaunching(tmp_path: Path) -> None:
    """A live server moved by /admin/config runs the knobs a relaunched one runs. Checked on what the
    knobs guarantee, from each point's records: the batch size never above max_batch_size, the requests
    running at once never above limit x batch, two batches at once at concurrency_limit=2 (8 users, at
    most 4 in a batch: a work-conserving queue starts a waiting request in the free slot), and the
    second slot's served rate. Not on two runs' latencies: 4 closed-loop users per slot fall into
    batches of 4 or drift into smaller ones, so p50 moves by 40% between identical servers."""
    grid = ["concurrency_limit=1,2"]
    relaunch = sweep(tmp_path / "a", grid, links=["users=4*concurrency_limit"], server=SLOW_SERVER,
                     load=BY_REQUESTS)
    live = sweep(tmp_path / "b", grid, links=["users=4*concurrency_limit"], live=True, server=SLOW_SERVER,
                 load=BY_REQUESTS)
    check_layout(live)
    assert json.loads((live.sweep_dir / "sweep.json").read_text())["mode"] == "live"
    for result in (relaunch, live):
        c1, c2 = result.results
        assert (c1.point_id, c2.point_id) == ("c1-u4", "c2-u8")
        assert c1.status == c2.status == "ok"
        cols = [Columns.read(result.sweep_dir / "points" / r.point_id) for r in (c1, c2)]
        assert all(np.nanmax(c.floats("server_batch_size")) <= 4 for c in cols)
        peaks = [observed_parallelism(c).peak_running for c in cols]
        assert peaks[0] <= 4 < peaks[1] <= 8, (result.sweep_dir, peaks)
        assert [r.knob_check.verdict if r.knob_check else None for r in (c1, c2)] != ["not_applied"] * 2
        assert c2.goodput_rps > 1.2 * c1.goodput_rps, (c1.goodput_rps, c2.goodput_rps)


def test_launch_mode_with_a_real_gradio_app(tmp_path: Path) -> None:
    command = f"{sys.executable} {EXAMPLE_APP} --port {{port}} --max-batch-size {{max_batch_size}}"
    result = sweep(
        tmp_path,
        ["concurrency_limit=1,2", "max_batch_size=4"],
        links=["users=8*concurrency_limit"],
        launch=command,
    )
    check_layout(result)
    assert [r.status for r in result.results] == ["ok", "ok"], [r.reason for r in result.results]
    c1, c2 = result.results
    # QBENCH_CONCURRENCY_LIMIT reached the app: two batches of 4 ran at once, never more than one before.
    # Counted from the records (a goodput ratio would measure the loaded CPU, not the knob).
    peaks = [observed_parallelism(read_records(result.sweep_dir / "points" / r.point_id)).peak_running
             for r in (c1, c2)]
    assert peaks[0] <= 4 < peaks[1] <= 8, peaks
    assert [r.knob_check.verdict if r.knob_check else None for r in (c1, c2)] == ["applied"] * 2, [
        c1.knob_check, c2.knob_check]
    assert all(r.peak_rss_mb and r.peak_rss_mb > 50 for r in result.results)  # psutil on the process tree


def test_failing_point_is_reported_and_the_sweep_goes_on(tmp_path: Path) -> None:
    result = sweep(tmp_path, ["max_threads=0,4"], ready_timeout_s=20)
    bad, good = result.results
    assert bad.status == "failed" and ("exited" in bad.reason or "quit" in bad.reason)
    assert good.status == "ok"
    rec = check_layout(result)
    assert rec["winner"]["point_id"] == good.point_id
    assert rec["ranked"][-1]["verdict"] == "failed" and rec["ranked"][-1]["point_id"] == bad.point_id


def test_resume_after_an_interrupted_sweep(tmp_path: Path) -> None:
    grid = ["concurrency_limit=1,2", "max_batch_size=1,4"]
    first = Recorder(interrupt_after=2)
    with pytest.raises(KeyboardInterrupt):
        sweep(tmp_path, grid, first, duration=1.5)
    (sweep_dir,) = (tmp_path / "reports").iterdir()
    assert len(list((sweep_dir / "points").glob("*/point.json"))) == 2
    second = Recorder()
    result = run_sweep(build_config(resume_options(sweep_dir), sweep_dir=sweep_dir), second)
    assert len(second.started) == 2 and not set(second.started) & set(first.started)
    assert len(result.results) == 4
    check_layout(result)


def test_target_mode_sweeps_client_knobs_and_stops_a_runaway_point(tmp_path: Path) -> None:
    # One 250 ms worker (4 req/s), offered 2 and 20 req/s: a rate any client sends on time, so the
    # backlog grows 16/s at r20 on any box (at 120 req/s on a 44 req/s server a busy box's client sent
    # about what the server served, and the point ended "infeasible" from its send lag, never stopped).
    # The server in its own process (in this one it shared the GIL with the generator and the check).
    slow = {"functions": [{"api_name": "predict", "workload": "sleep", "params": {"base_ms": 250},
                           "concurrency_limit": 1}]}
    path = write_scenario(tmp_path, rate=2, duration=8)
    with start_reference_server(slow) as url:
        out = CliRunner().invoke(
            app, ["sweep", str(path), "--target", url, "--grid", "rate=2,20", "--out", str(tmp_path / "r")]
        )
    assert out.exit_code == 0, out.output
    assert "winner" in out.output and "r2" in out.output
    (sweep_dir,) = (tmp_path / "r").iterdir()
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    verdicts = {r["point_id"]: (r["verdict"], r["reason"]) for r in rec["ranked"]}
    assert verdicts["r2"][0] == "winner", verdicts
    assert verdicts["r20"][0] == "failed" and "not steady, backlog +" in verdicts["r20"][1], verdicts


def test_smart_search_on_a_real_server_skips_points_and_reports_it(tmp_path: Path) -> None:
    # Middle point c2 first; c4 is better, so the climb ends there and never needs c1.
    result = sweep(tmp_path, ["concurrency_limit=1,2,4"], links=["users=4*concurrency_limit"], search="smart")
    rec = check_layout(result)
    assert [r.point_id for r in result.results] == ["c2-u8", "c4-u16"]
    assert rec["search"] == {
        "mode": "smart",
        "trials": 2,
        "grid_size": 3,
        "saved": 1,
        "path": ["c2-u8", "c4-u16"],
    }
    assert rec["winner"]["point_id"] == "c4-u16"


EXAMPLE_SWEEP = Path(__file__).resolve().parents[3] / "examples" / "sweep_sleep.yaml"


@pytest.mark.parametrize("live", [True, False], ids=["live", "relaunch"])
def test_readme_example_sweep_reaches_the_capacity_phase(tmp_path: Path, live: bool) -> None:
    # The README's `qbench sweep examples/sweep_sleep.yaml --live`, cut to 2 points of 40 requests and 4
    # probes of 1 s (2 probes, as this once had, both failed on a busy box: no capacity, no recheck).
    args = ["sweep", str(EXAMPLE_SWEEP), "--grid", "concurrency_limit=1,2", "--grid", "max_batch_size=2"]
    args += ["--set", "load.duration=null", "--set", "load.requests=40", "--capacity-duration", "1",
             "--capacity-trials", "4", "--out", str(tmp_path / "r")]
    out = CliRunner().invoke(app, args + (["--live"] if live else []))
    assert out.exit_code == 0, out.output
    (sweep_dir,) = (tmp_path / "r").iterdir()
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    # up to four probes, then the first passing again. Four, not two: the first guess (the point's goodput,
    # about the ceiling: 2 x 4 / 240 ms = 33 req/s) and the next step down can both fail as not steady; two
    # more steps reach well under the ceiling on any box. A probe that failed while the host stalled is
    # kept as "stalled" and its rate measured again (a busy box's run: 36, 45, 70 failed, 56 stalled, 56)
    kinds = [p["kind"] for p in rec["capacity"]["probes"]]
    assert kinds[-1] == "recheck" and set(kinds[:-1]) <= {"rate", "stalled"}, kinds
    assert 2 <= kinds.count("rate") <= 4, kinds
    assert rec["capacity"]["capacity_rps"] > 0, rec["notes"]
    assert len(list((sweep_dir / "capacity").glob("*-rate-*/summary.json"))) == len(kinds) - 1
    assert (sweep_dir / "capacity" / "server.yaml").is_file()


def test_a_trace_drives_a_sweep(tmp_path: Path) -> None:
    """scenarios/trace.yaml swept over max_batch_size (10x faster, 2 s a point): every point replays the
    same trace, so batching shows as the only difference."""
    shipped = Path(__file__).resolve().parents[3] / "scenarios" / "trace.yaml"
    args = ["sweep", str(shipped), "--preset", "sleep", "--grid", "max_batch_size=1,8",
            "--grid", "load.trace.speedup=10", "--duration", "2", "--capacity-trials", "0",
            "--out", str(tmp_path / "r")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    (sweep_dir,) = (tmp_path / "r").iterdir()
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    assert rec["winner"]["knobs"]["max_batch_size"] == 8
    points = sorted((sweep_dir / "points").iterdir())
    intended = [sorted(r.intended_at_s for r in read_records(p)) for p in points]
    shared = min(len(x) for x in intended)
    assert shared > 10 and intended[0][:shared] == intended[1][:shared]
