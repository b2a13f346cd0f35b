"""`qbench sweep` and `qbench capacity` take --set KEY=VALUE like `qbench run`: applied to the scenario
before anything runs (a bad key is the scenario's error, naming it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.sweep.config import SweepOptions, build_config


def scenario(tmp_path: Path) -> Path:
    raw = {"name": "s", "protocol": "gradio", "endpoint": {"api_name": "respond"},
           "payload": {"inputs": [{"value": "hi"}]}, "load": {"users": 2, "duration": 1},
           "slo": {"p95_latency_s": 1}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_sweep_overrides_reach_the_scenario(tmp_path: Path) -> None:
    options = SweepOptions(str(scenario(tmp_path)), grid=["users=1,2"], target="http://127.0.0.1:9",
                           overrides={"load.timeout": 7, "slo.p95_latency_s": 4}, out_root=str(tmp_path))
    config = build_config(options)
    assert config.scenario.load.timeout == 7 and config.constraints.slo["p95_latency_s"] == 4


def test_a_bad_set_key_is_refused_by_sweep_and_capacity(tmp_path: Path) -> None:
    path = str(scenario(tmp_path))
    for argv in (["sweep", path, "--grid", "users=1,2", "--target", "http://127.0.0.1:9"],
                 ["capacity", path, "--target", "http://127.0.0.1:9"]):
        result = CliRunner().invoke(app, [*argv, "--set", "load.bogus=1", "--out", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert "bogus" in result.output


def test_arguments_after_a_double_dash_need_app(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sweep", str(scenario(tmp_path)), "--grid", "users=1,2",
                                      "--target", "http://127.0.0.1:9", "--", "--model", "x"])
    assert result.exit_code == 2 and "arguments after -- go to --app" in result.output
