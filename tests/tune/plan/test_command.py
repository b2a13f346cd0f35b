"""qbench.tune.plan.command: a `qbench capacity` folder -> one replica's figures (Replica) -> plan.json. The
arithmetic of the plan and the `qbench plan` command are tested in test_plan.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qbench.errors import ScenarioError
from qbench.run.results.run_info import RunInfo
from qbench.tune.plan.command import (
    capacity_path,
    is_scenario,
    parse_fraction,
    read_measured,
    run_plan,
    settings_of,
)
from qbench.tune.plan.replicas import traffic
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.values.ceiling import Capacity, Probe


def capacity_folder(root: Path, capacity: float | None = 40.0) -> Path:
    """A capacity folder as `qbench capacity` writes it: capacity.json and the confirmation's run.json."""
    folder = root / "capacity-sleep-rate-1"
    run_dir = folder / "probes" / "02-confirm-40"
    run_dir.mkdir(parents=True)
    probes = [Probe(40.0, True), Probe(44.0, False, violations=["p95"]),
              Probe(40.0, True, kind="confirm", mean_latency_s=0.25, p95_latency_s=0.45,
                    run_dir="probes/02-confirm-40", duration_s=60.0)]
    file = CapacityFile(result=Capacity(capacity, 44.0, 0.1, True, capacity is not None, probes),
                        target="http://127.0.0.1:1", slo={"p95_latency_s": 0.5}, max_error_rate=0.01,
                        scenario={"path": "s.yaml", "content": {"load": {"arrival": "constant"}}})
    (folder / "capacity.json").write_text(json.dumps(file.to_dict()))
    settings = {"functions": [{"api_name": "predict", "concurrency_limit": 4, "batch": False}],
                "queue": {"default_concurrency_limit": 1, "max_size": None}, "launch": {"max_threads": 40}}
    run = {"scenario": {"endpoint": {"api_name": "predict"}}, "records": 2400,
           "generator": {"cpu_s": 3.6, "processes": 1},
           "server": {"gradio": {"version": "6.31.0"}, "status": {"settings": settings}}}
    (run_dir / "run.json").write_text(json.dumps(run))
    return folder


def test_the_capacity_folder_is_read_with_its_settings_and_generator(tmp_path: Path) -> None:
    measured = read_measured(capacity_folder(tmp_path))
    assert (measured.capacity_rps, measured.mean_latency_s, measured.p95_latency_s) == (40.0, 0.25, 0.45)
    assert measured.confirmed and measured.slo == "p95_latency_s <= 0.5, error_rate <= 1.0%"
    assert measured.generator_cpu_per_request_s == pytest.approx(3.6 / 2400)
    assert measured.settings["knobs"]["concurrency_limit"] == 4
    assert "concurrency_limit=4" in measured.settings["code"] and measured.settings["gradio"] == "6.31.0"



def test_a_folder_without_its_run_json_is_read_without_settings_or_generator(tmp_path: Path) -> None:
    folder = capacity_folder(tmp_path)
    (folder / "probes" / "02-confirm-40" / "run.json").unlink()
    measured = read_measured(folder / "capacity.json")  # the file itself is read too
    assert measured.capacity_rps == 40.0 and measured.settings == {}
    assert measured.generator_cpu_per_request_s is None and measured.generator_processes == 1
    assert measured.arrival == "constant" and measured.source == str(folder / "capacity.json")


@pytest.mark.parametrize(("name", "expected"), [("s.yaml", True), ("s.yml", True), ("capacity.json", False),
                                                ("capacity-sleep-rate-1", False)])
def test_is_scenario(name: str, expected: bool) -> None:
    assert is_scenario(Path(name)) is expected


def test_capacity_path_is_the_folders_file_or_the_file_itself(tmp_path: Path) -> None:
    folder = capacity_folder(tmp_path)
    assert capacity_path(folder) == capacity_path(folder / "capacity.json") == folder / "capacity.json"
    with pytest.raises(ScenarioError, match="no capacity.json: pass a `qbench capacity` folder"):
        capacity_path(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not readable as JSON"),
        (json.dumps({"kind": "sweep"}), "not a capacity.json \\(kind 'sweep', expected 'capacity'\\)"),
        (json.dumps([1, 2]), "kind None"),
    ],
)
def test_a_file_that_is_not_a_capacity_json_is_named(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "capacity.json").write_text(content)
    with pytest.raises(ScenarioError, match=message):
        read_measured(tmp_path)


def gradio_app_run(deps: list[Any], fn_index: object) -> RunInfo:
    return RunInfo.from_dict({"scenario": {"endpoint": {"api_name": "respond"}},
                              "server": {"config": {"version": "4.44.1", "dependencies": deps},
                                         "fn_index": fn_index}})


def test_settings_of_a_gradio_app_come_from_its_config() -> None:
    deps = [{"concurrency_limit": None}, {"concurrency_limit": 3, "batch": True, "max_batch_size": 8}]
    settings = settings_of(gradio_app_run(deps, 1), "probes/02-confirm-40")
    assert settings["knobs"] == {"concurrency_limit": 3, "max_batch_size": 8}
    assert settings["gradio"] == "4.44.1" and settings["max_size"] is None
    assert "default_concurrency_limit=3" in settings["code"] and "max_batch_size=8" in settings["code"]
    assert settings["from"].startswith("the app's /config") and settings["from"].endswith(
        "probes/02-confirm-40/run.json")
    # an unset limit reads as Gradio's default 1; a batch size counts only when batching is on
    assert settings_of(gradio_app_run(deps, 0), "r")["knobs"] == {"concurrency_limit": 1, "max_batch_size": 1}
    unbatched = [{"concurrency_limit": 2, "batch": False, "max_batch_size": 8}]
    assert settings_of(gradio_app_run(unbatched, 0), "r")["knobs"]["max_batch_size"] == 1


@pytest.mark.parametrize("fn_index", [None, 2, -1, "0"])
def test_settings_of_an_unknown_endpoint_are_empty(fn_index: object) -> None:
    assert settings_of(gradio_app_run([{"concurrency_limit": 2}, "not a dependency"], fn_index), "r") == {}
    assert settings_of(RunInfo(), "r") == {}


def test_run_plan_writes_plan_json_beside_the_capacity_or_where_asked(tmp_path: Path) -> None:
    folder = capacity_folder(tmp_path)
    run = run_plan(folder, traffic(None, None, None, 100.0), 0.3, price_per_hour=None)
    assert run.path == folder / "plan.json" and run.plan.replicas == 4  # 100 x 1.3 / 40 = 3.25 -> 4
    assert json.loads(run.path.read_text()) == json.loads(json.dumps(run.plan.to_dict()))
    out = tmp_path / "plans" / "peak.json"
    assert run_plan(folder / "capacity.json", traffic(None, None, None, 10.0), 0.0, 1.0, out).path == out
    assert json.loads(out.read_text())["replicas"] == 1


@pytest.mark.parametrize(("text", "value"), [("30%", 0.3), ("0.3", 0.3), (" 0 ", 0.0), ("150%", 1.5)])
def test_parse_fraction(text: str, value: float) -> None:
    assert parse_fraction(text, "--headroom") == pytest.approx(value)


@pytest.mark.parametrize("text", ["-10%", "-0.1", "abc", "%", ""])
def test_a_bad_fraction_names_the_option(text: str) -> None:
    with pytest.raises(ScenarioError, match=f"--headroom '{text}': expected a fraction such as 30% or 0.3"):
        parse_fraction(text, "--headroom")
