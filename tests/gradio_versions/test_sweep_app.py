"""`qbench sweep --app` on unmodified apps of every release (3.50.2, 4.44.1, 5.50.0 from their envs; 6.x
beside qbench): the startup hook reaches the hard-coded queue(), launch(server_port=7860) and per-event
limit; each point's observed parallelism equals its knob; the advice names the app's own setting. An app
the hook cannot reach (mounted on uvicorn) gives `knobs_not_applied` and no recommendation, and
max_batch_size on a function that is not batch=True ends the sweep before its load."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.tune.points.knobcheck import BatchKnobError
from qbench.tune.sweep.command import SweepResult, run_sweep
from qbench.tune.sweep.config import SweepOptions, build_config

from .envs import RELEASES, EnvError, ensure_env
from .servers import MAIN

HERE = Path(__file__).parent
APP, MOUNTED = HERE / "unmodified_app.py", HERE / "mounted_app.py"

pytestmark = pytest.mark.slow


def python_of(version: str) -> str:
    if version == MAIN:
        return sys.executable
    try:
        return str(ensure_env(version))
    except EnvError as exc:
        pytest.skip(f"gradio {version}: its env could not be built: {exc}")


def scenario(tmp_path: Path) -> Path:
    raw = {"name": "respond", "protocol": "gradio", "endpoint": {"api_name": "respond"},
           "payload": {"inputs": [{"value": "hi"}]},
           # sized in requests: three rounds of the 10 users, the first the warm-up (in 3 s a busy box's
           # Gradio 4 app served 2 requests at limit 1, and no point was feasible)
           "load": {"users": 10, "requests": 30, "timeout": 20}, "slo": {"p95_latency_s": 5.0},
           "sweep": {"capacity_trials": 0, "warmup": 0.3}}
    path = tmp_path / "respond.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def sweep(tmp_path: Path, app: Path, version: str, grid: str) -> SweepResult:
    options = SweepOptions(str(scenario(tmp_path)), grid=[grid], app=str(app), python=python_of(version),
                           out_root=str(tmp_path / "reports"), ready_timeout_s=120)
    return run_sweep(build_config(options))


def point_json(result: SweepResult, point_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((result.sweep_dir / "points" / point_id / "point.json").read_text())
    return data


@pytest.mark.parametrize("version", [*RELEASES, MAIN])
def test_knobs_reach_an_unmodified_app(version: str, tmp_path: Path) -> None:
    knob = "concurrency_count" if version.startswith("3.") else "concurrency_limit"
    result = sweep(tmp_path, APP, version, f"{knob}=1,4")
    assert [r.status for r in result.results] == ["ok", "ok"], [r.reason for r in result.results]
    for point_id, limit in (("cc1" if knob == "concurrency_count" else "c1", 1),
                            ("cc4" if knob == "concurrency_count" else "c4", 4)):
        check = point_json(result, point_id)["knobs_applied"]
        assert check["verdict"] == "applied", check["evidence"]
        # 10 users for a limit of 4: requests wait even when a busy client re-sends late (6 users once
        # left the point unsaturated, at most 2 running at limit 4, on a box 2.5 x slower).
        # saturated, the verdict rests on running(t) while requests waited: the held peak can read one
        # higher on a busy machine, where the server's tasks send one stream's process_completed after
        # another stream's process_starts (seen: peak 5 at limit 4, the median 4), and the typical one
        # lower where each freed slot's next process_starts reaches a busy client late (seen beside four
        # busy loops: typical 3 at limit 4, the peak 4)
        par = check["parallelism"]
        typical, peak = par["typical_while_waiting"], par["peak_running"]
        if par["saturated"]:
            assert typical == limit or typical == limit - 1 and peak == limit, check
        else:
            assert peak == limit, check
        hook = check["hook"]
        assert hook["launch"]["app"]["server_port"] == 7860  # hard-coded, overridden
        assert hook["launch_checked"] is True  # launch()'s own check passed before any load
        respond = next(e for e in hook["events"] if e["api_name"] == "respond")
        assert respond["effective"]["concurrency_limit"] == limit
    rec = result.recommendation
    assert rec.winner is not None and rec.winner.knobs[knob] == 4
    change = ("concurrency_count=3 -> recommended concurrency_count=4" if knob == "concurrency_count"
              else "concurrency_limit=2 -> recommended concurrency_limit=4 on `respond`")
    assert any(change in line for line in rec.app_change), rec.app_change
    saved = json.loads((result.sweep_dir / "recommendation.json").read_text())
    assert saved["app_change"] == rec.app_change


def test_an_app_the_hook_cannot_reach_is_never_ranked(tmp_path: Path) -> None:
    result = sweep(tmp_path, MOUNTED, MAIN, "concurrency_limit=1,4")
    assert [r.status for r in result.results] == ["knobs_not_applied"] * 2, [r.reason for r in result.results]
    assert result.recommendation.winner is None
    assert all(r.verdict == "knobs_not_applied" for r in result.recommendation.ranked)
    evidence = point_json(result, "c1")["knobs_applied"]["evidence"]
    assert any("no Blocks.launch()" in e for e in evidence)
    assert any("above the limit 1" in e for e in evidence)
    assert any("at most 2 ran at once" in e for e in point_json(result, "c4")["knobs_applied"]["evidence"])


def test_batching_a_function_that_is_not_batch_is_an_error(tmp_path: Path) -> None:
    match = r"`respond` is not a batch function.*batch=True, max_batch_size=4"
    with pytest.raises(BatchKnobError, match=match):
        sweep(tmp_path, APP, MAIN, "max_batch_size=1,4")  # refused at the first point, b1
    records = list((tmp_path / "reports").glob("*/points/*/records.*"))
    assert records == []  # no load was sent
