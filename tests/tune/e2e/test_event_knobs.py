"""Sweep knobs scoped to one event of a mix (`concurrency_limit@a=1,2`, `concurrency_id@c=gpu_queue,own`):
parsing, the reference server's settings per point, launched apps' variables, and the advice per event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.tune.knobs.grid import build_grid, is_server_knob, parse_axis, point_id
from qbench.tune.knobs.reference import apply_server_knobs
from qbench.tune.knobs.versions import KnobVersionError, check_knobs
from qbench.tune.ranking.recommend import gradio_code
from qbench.tune.servers.app_process import knob_env, render_command
from reference_server.settings import preset_path, read_settings_file

ROOT = Path(__file__).resolve().parents[3]


def test_scoped_knobs_parse_and_name_points() -> None:
    assert parse_axis("concurrency_limit@a=1,2,4") == ("concurrency_limit@a", [1, 2, 4])
    assert is_server_knob("concurrency_id@c") and not is_server_knob("max_threads@a")
    assert point_id({"concurrency_limit@a": 2, "concurrency_id@c": "own"}) == "c@a2-g@cown"
    with pytest.raises(ScenarioError, match=r"unknown knob 'max_threads@a'.*KNOB@EVENT"):
        parse_axis("max_threads@a=8,40")
    with pytest.raises(ScenarioError, match=r"'concurrency_limit@a': value 'lots' is not valid"):
        build_grid(["concurrency_limit@a=1,lots"])
    assert build_grid(["concurrency_id@c=gpu_queue,own"]).edge_notes({"concurrency_id@c": "own"}) == []


def test_the_reference_server_gets_each_events_settings() -> None:
    base = read_settings_file(preset_path("abc"))
    raw = apply_server_knobs(base, {"concurrency_limit@a": 4, "concurrency_id@c": "gpu_queue",
                                    "concurrency_id@b": "own", "max_batch_size@c": 8}, None)
    fns = {f["api_name"]: f for f in raw["functions"]}
    assert fns["a"]["concurrency_limit"] == 4 and fns["b"]["concurrency_limit"] == 2  # b untouched
    assert fns["b"]["concurrency_id"] is None and fns["c"]["concurrency_id"] == "gpu_queue"
    assert fns["c"]["batch"] is True and fns["c"]["max_batch_size"] == 8
    with pytest.raises(ScenarioError, match=r"knob 'concurrency_limit@zz': the server has no event 'zz'"):
        apply_server_knobs(base, {"concurrency_limit@zz": 1}, None)


def test_launched_apps_see_each_events_knob() -> None:
    env = knob_env({"concurrency_limit@a": 2}, 7861)
    assert env["QBENCH_CONCURRENCY_LIMIT__A"] == "2"
    assert render_command("python app.py --limit-a {concurrency_limit@a}", {"concurrency_limit@a": 2},
                          7861) == ["python", "app.py", "--limit-a", "2"]


def test_the_advice_has_one_line_per_event_and_3x_refuses() -> None:
    code = gradio_code({"concurrency_limit@a": 2, "concurrency_id@c": "own", "max_batch_size@b": 4}, 30, 6)
    assert "btn_a.click(fn_a, inputs, outputs, api_name='a', concurrency_limit=2)" in code
    assert "api_name='c', concurrency_id=None)" in code and "batch=True, max_batch_size=4" in code
    assert "btn.click(" not in code
    compile(code.replace("demo.", "x."), "advice", "exec")  # valid Python as written
    with pytest.raises(KnobVersionError, match="Gradio 3.x, which has no 'concurrency_limit@a' knob"):
        check_knobs(["concurrency_limit@a"], 3, "the app")


def test_the_docs_sweep_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/traffic-mixes-and-journeys.md: qbench sweep scenarios/mix.yaml --preset abc with event knobs
    (one axis of two values, short probes: 0.75 s with 0.25 s of warm-up): the winner's advice names the
    event."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    args = ["sweep", "scenarios/mix.yaml", "--preset", "abc", "--grid", "concurrency_id@c=gpu_queue,own",
            "--slo", "p95_latency_s=2", "--duration", "0.75", "--capacity-duration", "0.75",
            "--capacity-trials", "3", "--capacity-tolerance", "25%", "--set", "load.warmup=0.25"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    (sweep,) = (tmp_path / "reports").glob("sweep-mix-*")
    rec = json.loads((sweep / "recommendation.json").read_text())
    assert "concurrency_id@c" in rec["winner"]["knobs"]
    assert "btn_c.click(fn_c, inputs, outputs, api_name='c'" in rec["gradio_code"]


def test_an_app_gets_a_mixs_events_and_event_knobs_only_through_placeholders() -> None:
    from qbench.run.scenario.schema import load_scenario
    from qbench.tune.sweep.config import driven_events

    mix = load_scenario(ROOT / "scenarios" / "mix.yaml")
    assert driven_events(mix, "driven") == ["a", "b", "c"] and driven_events(mix, "all") is None
    app_path = str(ROOT / "tests" / "gradio_versions" / "mix_app.py")
    out = CliRunner().invoke(app, ["sweep", str(ROOT / "scenarios" / "mix.yaml"), "--app", app_path,
                                   "--grid", "concurrency_limit@a=1,2", "--slo", "p95_latency_s=2"])
    assert out.exit_code == 2 and "{concurrency_limit@a} placeholder in --launch" in out.output, out.output


def test_a_points_batch_size_is_not_overridden_by_the_presets_cuda_batch() -> None:
    base = {"functions": [{"api_name": "classify", "workload": "echo", "batch": True, "max_batch_size": 8,
                           "on_cuda": {"max_batch_size": 32}}]}
    raw = apply_server_knobs(base, {"max_batch_size": 4}, "classify")
    assert raw["functions"][0]["max_batch_size"] == 4 and "on_cuda" not in raw["functions"][0]
    scoped = apply_server_knobs(base, {"max_batch_size@classify": 16}, None)
    assert "on_cuda" not in scoped["functions"][0]
    untouched = apply_server_knobs(base, {"max_threads": 8}, "classify")
    assert untouched["functions"][0]["on_cuda"] == {"max_batch_size": 32}
