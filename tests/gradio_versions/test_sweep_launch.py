"""`qbench sweep --launch` against a real Gradio 3.50.2 app (tests/gradio_versions/app.py from its own
env, its knobs from QBENCH_* variables): a concurrency_count sweep advised in 3.x code. (A knob 3.x
lacks, refused at the first launch: tests/tune/e2e/test_sweep_gradio3.py, on the reference server.)"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from qbench.tune.sweep.command import run_sweep
from qbench.tune.sweep.config import SweepOptions, build_config

from .envs import EnvError, ensure_env
from .servers import APP

VERSION = "3.50.2"


@pytest.fixture(scope="module")
def launch() -> str:
    try:
        python = ensure_env(VERSION)
    except EnvError as exc:
        pytest.skip(f"gradio {VERSION}: its env could not be built: {exc}")
    return f"{shlex.quote(str(python))} {shlex.quote(str(APP))}"


def scenario(tmp_path: Path) -> Path:
    raw = {"name": "work3", "protocol": "gradio", "endpoint": {"api_name": "work"},
           "payload": {"inputs": [{"value": "hi"}]},
           "load": {"users": 4, "duration": 1.2, "timeout": 20}, "slo": {"p95_latency_s": 3.0},
           "sweep": {"capacity_trials": 0, "warmup": 0.3}}
    path = tmp_path / "work3.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_launch_sweep_of_concurrency_count_on_a_real_3x_app(launch: str, tmp_path: Path) -> None:
    options = SweepOptions(str(scenario(tmp_path)), grid=["concurrency_count=1,2"], launch=launch,
                           out_root=str(tmp_path / "reports"), ready_timeout_s=120)
    result = run_sweep(build_config(options))
    by_id = {r.point_id: r for r in result.results}
    assert [r.status for r in result.results] == ["ok", "ok"], [r.reason for r in result.results]
    assert all(r.error_rate == 0 for r in result.results)
    # what the knob allows, at any speed: one at a time at cc1, two at cc2, reached while requests waited
    # (typically fewer on a starved box: cc2 ran 2 at once, typically 1, where cc1 served 1.9 of its 5 req/s)
    for point_id, count in (("cc1", 1), ("cc2", 2)):
        check = by_id[point_id].knob_check
        assert check is not None and check.verdict == "applied", check
        assert check.evidence[0].startswith(f"{count} ran at once while requests waited ("), check
        assert check.evidence[0].endswith(f"limit {count})"), check
    rec = json.loads((result.sweep_dir / "recommendation.json").read_text())
    assert rec["gradio_version"] == "3.x"
    # work takes 0.2 s: one worker serves ~5 req/s, two ~10 (4 closed-loop users), where one worker served
    # most of its 5 (a busy box's cc1 served 2.0 req/s and cc2 1.7 once: the app's CPU, not the knob)
    if by_id["cc1"].goodput_rps >= 4.0:
        assert by_id["cc2"].goodput_rps > 1.4 * by_id["cc1"].goodput_rps, by_id
        assert rec["winner"]["point_id"] == "cc2"
    count = rec["winner"]["knobs"]["concurrency_count"]
    assert f"demo.queue(concurrency_count={count}, max_size=" in rec["gradio_code"]
    run = json.loads((result.sweep_dir / "points" / "cc1" / "run.json").read_text())
    assert run["server"]["gradio"]["version"] == VERSION
