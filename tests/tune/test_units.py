"""Pure pieces of the sweep: runaway detection, knobs -> server settings, launch templates, options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from qbench.errors import ScenarioError
from qbench.tune.app_process import knob_env, render_command
from qbench.tune.config import SweepOptions, build_config, parse_slo_options
from qbench.tune.point import DEFAULT_WARMUP_S, RunawayDetector, point_warmup
from qbench.tune.resources import status_memory
from qbench.tune.server_knobs import admin_body, apply_server_knobs

from .conftest import SERVER, write_scenario


def feed(
    detector: RunawayDetector, arrivals_per_s: float, completions_per_s: float, seconds: float
) -> str | None:
    reason = None
    t = 0.0
    while t <= seconds and reason is None:
        reason = detector.check(t, int(arrivals_per_s * t), int(completions_per_s * t))
        t += 0.25
    return reason


def test_runaway_queue_is_stopped() -> None:
    reason = feed(RunawayDetector(), arrivals_per_s=100, completions_per_s=10, seconds=5)
    assert reason is not None and "not steady, backlog +" in reason and "vs arrivals 100/s" in reason


def test_a_slow_overload_is_stopped_once_its_trend_is_certain() -> None:
    reason = feed(RunawayDetector(margin=0.025), arrivals_per_s=44, completions_per_s=40, seconds=20)
    assert reason is not None and "not steady" in reason


@pytest.mark.parametrize(("arrivals", "completions"), [(20, 19.8), (10, 10), (0, 0), (5, 4.9)])
def test_keeping_up_is_not_a_runaway(arrivals: float, completions: float) -> None:
    assert feed(RunawayDetector(), arrivals, completions, seconds=5) is None


def test_apply_server_knobs_targets_the_scenario_function() -> None:
    base: dict[str, Any] = {
        **SERVER,
        "functions": [*SERVER["functions"], {"api_name": "other", "workload": "echo"}],
    }
    knobs = {
        "concurrency_limit": 2,
        "max_batch_size": 8,
        "max_threads": 4,
        "max_size": "none",
        "batch_wait_ms": 5,
    }
    out = apply_server_knobs(base, knobs, "predict")
    fn, other = out["functions"]
    assert (fn["concurrency_limit"], fn["max_batch_size"], fn["batch"], fn["batch_wait_ms"]) == (
        2,
        8,
        True,
        5,
    )
    assert other == {"api_name": "other", "workload": "echo"}
    assert out["launch"] == {"max_threads": 4} and out["queue"] == {"max_size": None}
    assert base["functions"][0]["concurrency_limit"] == 1  # the base is not modified
    assert admin_body(out) == {
        "functions": {
            "predict": {"concurrency_limit": 2, "batch": True, "max_batch_size": 8, "batch_wait_ms": 5},
            "other": {},
        },
        "queue": {"max_size": None},
        "launch": {"max_threads": 4},
    }


def test_launch_template_and_environment() -> None:
    argv = render_command(
        "python app.py --port {port} --c {concurrency_limit}", {"concurrency_limit": 4}, 8123
    )
    assert argv == ["python", "app.py", "--port", "8123", "--c", "4"]
    with pytest.raises(ScenarioError, match="max_batch_size"):
        render_command("app --b {max_batch_size}", {"concurrency_limit": 4}, 1)
    env = knob_env({"concurrency_limit": 4, "load.users": 8}, 8123)
    assert env["QBENCH_CONCURRENCY_LIMIT"] == "4" and env["QBENCH_LOAD_USERS"] == "8"
    assert env["QBENCH_PORT"] == env["GRADIO_SERVER_PORT"] == "8123"


def test_status_memory() -> None:
    status = {"peak_rss_bytes": 200 * 2**20, "torch_cuda_memory": {"peak_allocated_bytes": 2**30}}
    assert status_memory(status) == (200.0, 1024.0)
    assert status_memory({"torch_cuda_memory": None}) == (None, None)


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
    ("load", "expected"),
    [
        ({"users": 2}, DEFAULT_WARMUP_S),  # nothing set: the sweep's default warm-up
        ({"users": 2, "warmup": 0}, 0.0),  # an explicit 0 is kept
        ({"users": 2, "warmup": 1.5}, 1.5),
        ({"burst": 20}, 0.0),  # a burst's requests all have intended time 0: a default would drop them all
    ],
)
def test_point_warmup_respects_the_scenario(tmp_path: Path, load: dict[str, Any], expected: float) -> None:
    path = write_scenario(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["load"] = {"duration": 2, "timeout": 10, **load}
    raw["sweep"].pop("warmup")
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1,2"], out_root=str(tmp_path)))
    assert point_warmup(config) == expected


def test_a_crash_in_the_capacity_phase_keeps_the_measured_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qbench.tune import sweep
    from qbench.tune.recommend import PointResult

    def measured(config: Any, servers: Any, point: Any) -> PointResult:
        return PointResult(point.point_id, dict(point.knobs), goodput_rps=10.0, p95_latency_s=0.1)

    def crash(*args: Any) -> None:
        raise FileNotFoundError("capacity/server.yaml")

    monkeypatch.setattr(sweep, "evaluate_point", measured)
    monkeypatch.setattr(sweep, "_capacity", crash)
    path = write_scenario(tmp_path, {"capacity_trials": 2})
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1"], out_root=str(tmp_path)))
    result = sweep.run_sweep(config)
    assert result.recommendation.winner is not None and result.capacity is None
    assert (config.sweep_dir / "sweep.parquet").is_file()
    assert any("FileNotFoundError" in note for note in result.recommendation.notes)


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
        ({"objective": "capacity", "capacity_trials": 0}, "capacity_trials must be > 0"),
        ({"objective": "capacity", "grid": ["rate=5,10"]}, "do not sweep rate"),
        ({"objective": "fastest"}, "expected capacity or latency"),
        ({"capacity_tolerance": 3.0}, "capacity tolerance"),
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
