"""`qbench sweep` on an unmodified LitServe 0.2.19 app (its own virtualenv), written as LitServe's docs
show: a batched function of 20 ms + 2 ms per row, its own LitAPI(max_batch_size=4, batch_timeout=0.01).

The truth is built in: at max_batch_size=1 it serves at most 1/0.022 = 45 req/s, at 8 up to
8/0.036 = 222. `--app` sets each point's knobs in the app's process and proves them from what LitServe
held and the batches it handed the app; the advice is LitServe code. A `--launch` command whose knob goes
to a variable the app never reads leaves the app's own 4: the points that asked for another size are
`knobs_not_applied`, never ranked. A knob LitServe lacks ends the sweep before any load, naming the
equivalent."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.tune.knobs.versions import KnobVersionError
from qbench.tune.sweep.config import SweepOptions, build_config
from qbench.tune.sweep.sweep import SweepResult, run_sweep
from tests.run.test_frameworks import LITSERVE, litserve_python

APP = Path(__file__).parents[2] / "run" / "litserve_app.py"
USERS = 16  # closed loop: 16 waiting requests fill batches of 8 twice over


def scenario(tmp_path: Path) -> Path:
    raw = {"name": "predict", "protocol": "http", "endpoint": {"method": "POST", "path": "/predict",
                                                               "body": {"input": "$0"}},
           "payload": {"inputs": [{"text": {"words": [1, 4]}}]},
           # sized in requests: 12 rounds of the users, the first the warm-up
           "load": {"users": USERS, "requests": 12 * USERS, "timeout": 30}, "slo": {"p95_latency_s": 5.0},
           "sweep": {"capacity_trials": 0, "warmup": 0.2}}
    path = tmp_path / "predict.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def sweep(tmp_path: Path, grid: str, **options: Any) -> SweepResult:
    config = build_config(SweepOptions(str(scenario(tmp_path)), grid=[grid],
                                       out_root=str(tmp_path / "reports"), ready_timeout_s=120, **options))
    return run_sweep(config)


def point_json(result: SweepResult, point_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((result.sweep_dir / "points" / point_id / "point.json").read_text())
    return data


def test_an_unmodified_litserve_app_swept_with_its_knobs_proven_and_litserve_advice(tmp_path: Path) -> None:
    result = sweep(tmp_path, "max_batch_size=1,8", app=str(APP), python=str(litserve_python()))
    assert [r.status for r in result.results] == ["ok", "ok"], [r.reason for r in result.results]
    for point_id, size in (("b1", 1), ("b8", 8)):
        check = point_json(result, point_id)["knobs_applied"]
        assert check["verdict"] == "applied", check["evidence"]
        assert f"/predict runs max_batch_size={size}" in check["evidence"]
        hook = check["hook"]
        assert hook["framework"] == "litserve" and hook["litserve"]["version"] == LITSERVE
        assert hook["litserve"]["apis"][0]["app"] == {"max_batch_size": 4, "batch_timeout": 0.01}
        sizes = {int(k): v for k, v in hook["batch_sizes"]["/predict"].items()}
        assert max(sizes) <= size and sum(k * v for k, v in sizes.items()) >= 12 * USERS, sizes
        if size > 1:  # 16 closed-loop users keep requests waiting while a batch runs: batches fill
            assert max(sizes) > 1, sizes
    rec = result.recommendation
    assert rec.winner is not None and rec.winner.knobs == {"max_batch_size": 8}, rec.why  # 45 vs ~200 req/s
    assert rec.app_change == [f"your app (LitServe {LITSERVE}): BatchedAPI(max_batch_size=4, "
                              "batch_timeout=0.01) -> recommended BatchedAPI(max_batch_size=8, "
                              "batch_timeout=0.01) at /predict"]
    assert "api = BatchedAPI(max_batch_size=8, batch_timeout=0.01)" in rec.server_code
    assert "server = ls.LitServer(api, workers_per_device=1)" in rec.server_code
    assert rec.server_code_label.startswith(f"LitServe {LITSERVE}")
    assert rec.max_size_advice is not None and rec.max_size_advice.max_size is None
    assert rec.max_size_advice.why.startswith("LitServe has no queue cap")


def test_a_launch_command_whose_knob_never_reaches_litserve_is_not_ranked(tmp_path: Path) -> None:
    # MAXBATCH: a misspelt variable; the app reads MAX_BATCH_SIZE, unset, so it keeps its own 4
    python, app = shlex.quote(str(litserve_python())), shlex.quote(str(APP))
    launch = f"env MAXBATCH={{max_batch_size}} {python} {app} {{port}}"
    result = sweep(tmp_path, "max_batch_size=4,8", launch=launch)
    statuses = [r.status for r in result.results]
    assert statuses == ["ok", "knobs_not_applied"], [r.reason for r in result.results]
    check = point_json(result, "b8")["knobs_applied"]
    assert check["verdict"] == "not_applied"
    assert ("/predict runs max_batch_size=4, not 8 (the command passes {max_batch_size} itself, and it did "
            "not reach LitServe)") in check["evidence"]
    assert point_json(result, "b4")["knobs_applied"]["verdict"] == "applied"  # the app's 4 is the knob's
    rec = result.recommendation
    assert rec.winner is not None and rec.winner.knobs == {"max_batch_size": 4}
    assert [r.verdict for r in rec.ranked if r.point_id == "b8"] == ["knobs_not_applied"]


@pytest.mark.parametrize(("knob", "equivalent"), [("concurrency_limit=1,2", "workers_per_device"),
                                                  ("batch_wait_ms=10", "batch_timeout (seconds"),
                                                  ("max_size=8", "it has no equivalent")])
def test_a_knob_litserve_lacks_ends_the_sweep_before_any_load(tmp_path: Path, knob: str,
                                                              equivalent: str) -> None:
    with pytest.raises(KnobVersionError, match="is a LitServe app, which has no") as error:
        build_config(SweepOptions(str(scenario(tmp_path)), grid=[knob], app=str(APP),
                                  out_root=str(tmp_path / "reports")))
    assert equivalent in str(error.value)
    assert not (tmp_path / "reports").exists()
