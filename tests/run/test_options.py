"""`qbench run` as a library call (qbench.run.options): the options as scenario overrides, the --api
rule, a scenario written from the app when there is no file, and one short run of each kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from qbench.errors import ScenarioError
from qbench.run.options import (
    NO_SCENARIO,
    RunOptions,
    check_api_option,
    run_with_options,
    scenario_from_app,
    workers_value,
)
from reference_server.testing import RunningServer


def test_the_options_become_dotted_overrides_sets_first() -> None:
    options = RunOptions(sets={"load.rate": 5, "load.processes": 9}, credentials={"auth.bearer": "t"},
                         processes=2, replay=Path("runs/a"), ray="ray://h:10001", workers="auto")
    overrides = options.overrides()
    assert overrides["load.rate"] == 5 and overrides["auth.bearer"] == "t"
    assert overrides["load.processes"] == 2  # the dedicated option wins over --set
    assert overrides["load.replay"] == str(Path("runs/a").resolve())
    assert (overrides["load.executor"], overrides["load.ray_address"], overrides["load.workers"]) == (
        "ray", "ray://h:10001", "auto")
    assert RunOptions().overrides() == {}


@pytest.mark.parametrize(("text", "expected"), [("4", 4), ("auto", "auto"), (" many ", "many")])
def test_workers_is_a_number_or_the_text_the_scenario_check_names(text: str, expected: int | str) -> None:
    assert workers_value(text) == expected


def test_api_applies_only_without_a_scenario_file() -> None:
    check_api_option(None, "/predict")
    check_api_option(Path("s.yaml"), None)
    with pytest.raises(ScenarioError, match=r"--api /predict: applies without a scenario file .*s\.yaml"):
        check_api_option(Path("s.yaml"), "/predict")


def test_no_file_and_no_target_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        scenario_from_app(None, None, {}, tmp_path / "scenario.yaml")
    assert str(caught.value) == NO_SCENARIO


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "echo.yaml"
    path.write_text(yaml.safe_dump({
        "name": "echo", "target": "http://127.0.0.1:1",
        "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"text": {"words": [1, 2]}}]},
        "load": {"burst": 1},
    }))
    return path


def test_a_scenario_file_runs_with_the_overrides(echo_server: RunningServer, tmp_path: Path) -> None:
    options = RunOptions(scenario=_scenario_file(tmp_path), target=echo_server.url, out=tmp_path / "run",
                         sets={"load.burst": 3}, live=False)
    run = run_with_options(options)
    assert run.written is None and run.scenario.load.burst == 3
    assert run.result.summary.completed_ok == 3 and run.result.run_dir == tmp_path / "run"


def test_without_a_file_the_scenario_is_written_from_the_app_and_saved(echo_server: RunningServer,
                                                                         tmp_path: Path) -> None:
    options = RunOptions(target=echo_server.url, api="/echo", out=tmp_path / "run",
                         sets={"load.duration": 0.5, "load.rate": 4, "load.warmup": 0}, live=False)
    run = run_with_options(options)
    assert run.written == tmp_path / "run" / "scenario.yaml" and run.written.is_file()
    assert "qbench init" in run.written.read_text() and "THIS_FILE" not in run.written.read_text()
    assert run.result.summary.completed_ok >= 1
