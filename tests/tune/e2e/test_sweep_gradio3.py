"""Sweeps of Gradio 3's knobs on the reference server in `gradio: 3` mode (the README's commands at
reduced size: 64-request points on a slower server, a 2x2 grid live, 2 of its points relaunched), the
advice in 3.x code, and a knob the target's release lacks refused before any point runs."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.knobs.versions import KnobVersionError, check_knobs, gradio_major
from qbench.tune.ranking.recommend import gradio_code
from qbench.tune.sweep.command import run_sweep
from qbench.tune.sweep.config import CapacityOptions, SweepOptions, build_config
from tests.docs.test_readme_capacity import ROOT, readme_commands

#: Points sized in requests, not seconds: eight rounds of the 8 users (~4 s at one worker of 16.7 req/s on
#: a quiet box; on a busy one, as many requests however long they take). Their p95 bound at 10 s, not the
#: scenario's 1 s (~0.5 s by construction at cc1-b4): the test is about the knobs reaching the server and
#: the advice in 3.x code, and a busy box once stretched both points past 1 s (p95 1.9 and 2.0 s while the
#: server timed its batches at 0.25 s), leaving no winner to advise
REDUCED = ["--set", "load.duration=null", "--set", "load.requests=64", "--capacity-trials", "0",
           "--set", "slo.p95_latency_s=10"]
SMALL_GRID = {"live": ["--grid", "concurrency_count=1,2", "--grid", "max_batch_size=1,4"],
              "relaunch": ["--grid", "concurrency_count=1,2", "--grid", "max_batch_size=4"]}


def run(args: list[str], code: int = 0) -> str:
    out = CliRunner().invoke(app, args)
    assert out.exit_code == code, f"qbench {' '.join(args)}\n{out.output}"
    return out.output


def reduced(args: list[str], mode: str) -> list[str]:
    """The README's sweep with its grid cut to SMALL_GRID (the --grid options replaced)."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--grid":
            skip = True
        else:
            kept.append(arg)
    return kept + SMALL_GRID[mode] + REDUCED


def slow_gradio3(folder: Path) -> None:
    """scenarios/gradio3.yaml in `folder`, its sweep's server the gradio3 preset 4x slower a batch (200 ms
    + 10 ms an item: 16.7 req/s a worker with batches of 4) and 8 users: the points then differ by what
    the knobs allow, not by what a busy box's CPU allows (at the preset's 44 and 88 req/s, a busy box
    served one worker 23.7 req/s and two 20.6)."""
    folder.mkdir()
    preset = yaml.safe_load((ROOT / "reference_server" / "presets" / "gradio3.yaml").read_text())
    preset["functions"][0]["params"].update(base_ms=200, per_item_ms=10)
    (folder / "gradio3-server.yaml").write_text(yaml.safe_dump(preset))
    scenario = yaml.safe_load((ROOT / "scenarios" / "gradio3.yaml").read_text())
    scenario["sweep"] = {**scenario.get("sweep", {}), "server": {"config": "gradio3-server.yaml"}}
    scenario["load"]["users"] = 8  # 16 users on one 4x slower worker wait past the 1 s SLO, batched or not
    (folder / "gradio3.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))


def point_file(sweep_dir: Path, point: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((sweep_dir / "points" / point / "point.json").read_text())
    return data


def parallelism(sweep_dir: Path, point: str) -> dict[str, float]:
    """What the point's records say its server ran at once (qbench.tune.points.knobcheck.Parallelism)."""
    applied = point_file(sweep_dir, point)["knobs_applied"]
    assert applied["verdict"] == "applied", applied  # proven from the records, not contradicted
    return dict(applied["parallelism"])


def peak(sweep_dir: Path, point: str) -> int:
    """The most requests the point's server ran at once (held for half a service time), from its records."""
    return int(parallelism(sweep_dir, point)["peak_running"])


def two_workers_seen(sweep_dir: Path) -> bool:
    """cc2-b4 ran more at once than cc1-b4 can: held for half a service time, or, where the client's own
    lag set the hold (twice its p99 lag: 231 ms of a 232 ms service on a busy box, where two batches
    staggered by a few ms never overlap that long), while requests waited (6 there, against 4)."""
    two, one = parallelism(sweep_dir, "cc2-b4"), peak(sweep_dir, "cc1-b4")
    if two["peak_running"] > one:
        return True
    service = point_file(sweep_dir, "cc2-b4")["result"]["p50_service_s"]
    return bool(two["hold_s"] > 0.55 * service and two["reached_while_waiting"] > one)


@pytest.mark.parametrize("mode", ["relaunch", "live"])
def test_the_readme_gradio3_sweep_runs_and_advises_3x_code(mode: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    relaunch, live = readme_commands("## Gradio 3 knobs")
    assert relaunch[:2] == ["sweep", "scenarios/gradio3.yaml"] and live == [*relaunch, "--live"]
    assert "concurrency_count=1,2,4,8" in relaunch and "max_batch_size=1,4,16" in relaunch
    monkeypatch.chdir(tmp_path)
    slow_gradio3(tmp_path / "scenarios")
    output = run(reduced(live if mode == "live" else relaunch, mode))
    assert "Gradio 3.x" in output
    (sweep_dir,) = (tmp_path / "reports").glob("sweep-gradio3-*")
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    assert rec["gradio_version"] == "3.x" and rec["winner"]["status"] == "ok"
    count = rec["winner"]["knobs"]["concurrency_count"]
    assert f"demo.queue(concurrency_count={count}," in rec["gradio_code"]
    assert "default_concurrency_limit" not in rec["gradio_code"]
    points = {p.name for p in (sweep_dir / "points").iterdir()}
    # the knobs reach the server: a second worker runs a second batch beside the first, and batching runs
    # 4 at once on one worker (what the knobs allow, at any speed: a busy box's goodput at cc2 fell to
    # half cc1's once, where one starved point is the box, not the knob)
    assert two_workers_seen(sweep_dir) and peak(sweep_dir, "cc1-b4") > 1
    if mode == "relaunch":
        assert points == {"cc1-b4", "cc2-b4"}
    else:
        assert points == {"cc1-b1", "cc1-b4", "cc2-b1", "cc2-b4"}
        assert peak(sweep_dir, "cc1-b4") > peak(sweep_dir, "cc1-b1") == 1
        run(["report", str(sweep_dir)])
        summary = (sweep_dir / "summary.md").read_text()
        assert "Code for Gradio 3.x:" in summary and "demo.queue(concurrency_count=" in summary
        assert "(Gradio 3.x)" in (sweep_dir / "report.html").read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--grid", "concurrency_limit=1,2"], "Gradio 3.x, which has no 'concurrency_limit' knob; the "
                                              "equivalent there is concurrency_count"),
        (["--grid", "concurrency_id=a"],
         "Gradio 3.x, which has no 'concurrency_id' knob; it has no equivalent"),
        (["--preset", "sleep", "--grid", "concurrency_count=1,2"],
         "Gradio 6.x, which has no 'concurrency_count' knob; the equivalent there is "
         "default_concurrency_limit"),
    ],
)
def test_a_knob_the_release_lacks_fails_before_any_point(args: list[str], expected: str,
                                                         tmp_path: Path) -> None:
    output = run(["sweep", str(ROOT / "scenarios/gradio3.yaml"), *args, "--out", str(tmp_path)], code=2)
    assert expected in " ".join(output.split())
    assert not list(tmp_path.glob("sweep-*/points/*"))


def test_launch_mode_reads_the_release_at_the_first_launch_and_refuses_a_knob_it_lacks(
        tmp_path: Path) -> None:
    """In launch mode the release is known only once the app answers /config: the first point's server
    starts, its /config says 3.50.2, and the sweep ends there, before any load is sent."""
    launch = f"{shlex.quote(sys.executable)} -m reference_server --preset gradio3 --port {{port}}"
    options = SweepOptions(str(ROOT / "scenarios/gradio3.yaml"), grid=["concurrency_limit=1,2"],
                           launch=launch, out_root=str(tmp_path), duration=1,
                           capacity=CapacityOptions(trials=0))
    config = build_config(options)
    assert config.mode == "launch" and config.gradio_major is None
    with pytest.raises(KnobVersionError, match="is Gradio 3.x, which has no 'concurrency_limit' knob"):
        run_sweep(config)
    assert config.gradio_major is None  # read by the sweep's servers; the config is never changed
    assert not list(config.sweep_dir.glob("points/*/records*"))


def test_gradio3_code_and_version_parsing() -> None:
    code = gradio_code({"concurrency_count": 8, "max_batch_size": 16, "max_threads": 4}, 12, 3)
    assert code.splitlines() == [
        "# fn must take lists (one per input) and return lists: batch=True",
        "demo.queue(concurrency_count=8, max_size=12)",
        "btn.click(fn, inputs, outputs, batch=True, max_batch_size=16)",
        "demo.launch(max_threads=8)",  # 3.x raises max_threads to concurrency_count: said explicitly
    ]
    assert gradio_code({"concurrency_count": 2}, None, 3).splitlines() == [
        "demo.queue(concurrency_count=2, max_size=None)", "demo.launch(max_threads=40)"]
    assert "default_concurrency_limit=4" in gradio_code({"concurrency_limit": 4}, None, 4)
    assert [gradio_major(v) for v in ("3.50.2", "4.44.1", "6.31.0", None, "dev")] == [3, 4, 6, None, None]
    check_knobs(["max_batch_size", "max_threads", "max_size", "concurrency_count"], 3, "app")
    check_knobs(["concurrency_limit"], None, "a plain HTTP server")  # unknown release: nothing to check
    with pytest.raises(KnobVersionError, match="Gradio 5.x, which has no 'concurrency_count'"):
        check_knobs(["concurrency_count"], 5, "app")
