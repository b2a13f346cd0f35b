"""qbench.tune.sweep.config: the sweep's options and scenario section -> SweepConfig (grid, SLO,
objective)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.errors import ScenarioError
from qbench.tune.sweep.config import CapacityOptions, SweepOptions, build_config
from qbench.tune.values.constraints import parse_slo_options

from ..conftest import write_scenario


def test_slo_options() -> None:
    assert parse_slo_options(["p95_latency_s=2", "error_rate=0.05"]) == {
        "p95_latency_s": 2.0,
        "error_rate": 0.05,
    }
    with pytest.raises(ScenarioError, match="metric=number"):
        parse_slo_options(["p95_latency_s"])


def test_config_merges_scenario_section_and_cli(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"grid": {"concurrency_limit": [1, 2], "max_threads": [4]}, "repeat": 2})
    options = SweepOptions(
        str(path),
        grid=["concurrency_limit=3,4"],
        links=["users=concurrency_limit*2"],
        slo={"error_rate": 0.1},
        out_root=str(tmp_path),
    )
    config = build_config(options)
    assert config.grid.axes == {"concurrency_limit": [3, 4], "max_threads": [4]}
    assert [p.knobs["users"] for p in config.grid.points()] == [6, 8]
    assert config.constraints.slo == {"p95_latency_s": 1.0}
    assert config.constraints.max_error_rate == 0.1
    assert config.mode == "relaunch" and config.repeat == 2
    assert config.base_settings is not None and config.base_settings["functions"][0]["api_name"] == "predict"


def test_cli_link_may_use_an_axis_of_the_scenario_grid(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"grid": {"concurrency_limit": [1, 2]}})
    config = build_config(
        SweepOptions(str(path), links=["users=3*concurrency_limit"], out_root=str(tmp_path))
    )
    assert [p.knobs["users"] for p in config.grid.points()] == [3, 6]


@pytest.mark.parametrize(
    ("sweep", "options", "message"),
    [
        ({}, {}, "nothing to sweep"),
        ({"grid": {"max_threads": [1]}, "bogus": 1}, {}, "unknown keys"),
        ({"grid": {"max_threads": [1]}}, {"target": "http://127.0.0.1:9"}, "server knobs"),
        ({"grid": {"users": [1]}}, {"target": "http://127.0.0.1:9", "live": True}, "choose one"),
        ({"grid": {"users": [1]}, "server": {}}, {}, "base server config"),
        ({"grid": {"users": [1]}}, {"slo": {"p95_latency_s": -1}}, "SLO"),
        ({"grid": {"users": [1]}}, {"slo": {"p95": 1}}, "p95: unknown SLO key; expected one of p50_lat"),
        ({"grid": {"users": [1]}, "search": "random"}, {}, "grid, smart, model or sim"),
        ({"grid": {"users": [1]}, "link": ["users=1"]}, {}, "sweep.link"),
    ],
)
def test_config_errors_are_clear(
    tmp_path: Path, sweep: dict[str, Any], options: dict[str, Any], message: str
) -> None:
    path = write_scenario(tmp_path, sweep)
    with pytest.raises(ScenarioError, match=message):
        build_config(SweepOptions(str(path), out_root=str(tmp_path), **options))


@pytest.mark.parametrize(
    ("load", "sweep", "slo", "objective", "why"),
    [
        ({"rate": 5}, {}, {"p95_latency_s": 1.0}, "capacity", "open-loop rate"),
        ({"stages": [{"duration": 2, "rate": 1, "to": 5}]}, {}, {"p95_latency_s": 1.0}, "capacity", "stages"),
        ({"users": 2}, {}, {"p95_latency_s": 1.0}, "latency", "2 closed-loop users"),
        ({"burst": 20}, {}, {"p95_latency_s": 1.0}, "latency", "a burst of 20"),
        ({"rate": 5}, {}, {"min_throughput": 1.0}, "latency", "no latency SLO"),
        ({"rate": 5}, {"capacity_trials": 0}, {"p95_latency_s": 1.0}, "latency", "capacity_trials is 0"),
        ({"rate": 5}, {"grid": {"rate": [5, 10]}}, {"p95_latency_s": 1.0}, "latency", "sweeps the load"),
        ({"users": 2}, {"objective": "capacity"}, {"p95_latency_s": 1.0}, "capacity", "asked for"),
        ({"rate": 5}, {"objective": "latency"}, {"p95_latency_s": 1.0}, "latency", "asked for"),
    ],
)
def test_default_objective_rule(
    tmp_path: Path,
    load: dict[str, Any],
    sweep: dict[str, Any],
    slo: dict[str, float],
    objective: str,
    why: str,
) -> None:
    path = write_scenario(tmp_path, sweep={"capacity_trials": 4, **sweep}, **load)
    raw = yaml.safe_load(path.read_text())
    raw["slo"] = slo
    if "burst" in load or "stages" in load:
        raw["load"].pop("users", None)
    path.write_text(yaml.safe_dump(raw))
    grid = [] if "grid" in sweep else ["max_batch_size=1,4"]
    config = build_config(SweepOptions(str(path), grid=grid, out_root=str(tmp_path / "r")))
    assert config.constraints.objective == objective and why in config.objective_why


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"objective": "capacity", "slo": {}}, "needs an SLO"),
        ({"objective": "capacity", "capacity": CapacityOptions(trials=0)}, "capacity_trials must be > 0"),
        ({"objective": "capacity", "grid": ["rate=5,10"]}, "do not sweep rate"),
        ({"objective": "fastest"}, "expected capacity or latency"),
        ({"capacity": CapacityOptions(tolerance=3.0)}, "capacity tolerance"),
    ],
)
def test_objective_errors_are_clear(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    path = write_scenario(tmp_path, sweep={"capacity_trials": 4}, rate=5)
    raw = yaml.safe_load(path.read_text())
    if options.get("slo") == {}:
        raw.pop("slo")
        options.pop("slo")
    path.write_text(yaml.safe_dump(raw))
    options.setdefault("grid", ["max_batch_size=1,4"])
    with pytest.raises(ScenarioError, match=message):
        build_config(SweepOptions(str(path), out_root=str(tmp_path / "r"), **options))


SAVED_KEYS = ["scenario", "grid", "links", "slo", "repeat", "search", "live", "preset", "server_config",
              "launch", "target", "duration", "warmup", "max_memory_mb", "max_error_rate", "tolerated_wait_s",
              "capacity_trials", "capacity_tolerance", "capacity_duration", "confirm_duration", "objective",
              "ready_timeout_s", "out_root", "app", "app_args", "python", "knob_scope", "overrides"]


def test_sweep_json_keeps_the_capacity_options_flat_and_resume_reads_them_back() -> None:
    capacity = CapacityOptions(trials=3, tolerance=0.2, duration=1.0, confirm_duration=0.0)
    options = SweepOptions("s.yaml", grid=["concurrency_limit=1"], capacity=capacity)
    saved = options.to_json()
    assert list(saved) == SAVED_KEYS  # sweep.json's `options`, as before the capacity ones were nested
    assert [saved[k] for k in SAVED_KEYS[16:20]] == [3, 0.2, 1.0, 0.0]
    assert SweepOptions.from_json(json.loads(json.dumps({**saved, "gone": 1}))) == options
    assert SweepOptions.from_json({"scenario": "s.yaml"}) == SweepOptions("s.yaml")


def test_the_sweep_command_gives_its_options_as_one_typed_value() -> None:
    from qbench.cli.sweep import SweepArgs, SweepCapacityArgs

    args = SweepArgs(slo=["p95_latency_s=2"], set_=["load.rate=3"], out=Path("r"),
                     server_config=Path("s.yaml"),
                     capacity=SweepCapacityArgs(capacity_tolerance="20%", confirm_duration=0.0))
    options = args.options(Path("x.yaml"))
    assert (options.scenario, options.out_root) == (str(Path("x.yaml").resolve()), str(Path("r").resolve()))
    assert options.server_config == str(Path("s.yaml").resolve()) and options.app is None
    assert options.slo == {"p95_latency_s": 2.0} and options.overrides == {"load.rate": 3}
    assert options.capacity == CapacityOptions(tolerance=0.2, confirm_duration=0.0)
