"""Recorded schedules: trace files (JSONL, CSV) and replayed runs -> plans, errors, and real runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.load.mix import routing, with_trace_mix
from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord, read_parquet, write_parquet
from qbench.run.scenario.payloads import FileValue, PayloadGenerator
from qbench.run.scenario.schedule import OpenPlan, plan
from qbench.run.scenario.schema import load_scenario
from qbench.run.scenario.trace import recorded_inputs
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def trace_scenario(trace: Any, **load: Any) -> Any:
    return scenario(endpoint={"api_name": "echo"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"trace": trace, "timeout": 10, **load})


def offsets(spec: Any) -> list[float]:
    built = plan(spec.load)
    assert isinstance(built, OpenPlan)
    return [round(float(t), 6) for t in built.offsets]


def test_t_s_times_are_the_intended_offsets_sorted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"t_s": 0.5}, {"t_s": 0.0}, {"t_s": 1.25}, {"t_s": 0.5}])
    assert offsets(trace_scenario(str(path))) == [0.0, 0.5, 0.5, 1.25]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"speedup": 2}, [0.0, 0.5, 1.0, 1.5]),
        ({"window": [1, 3]}, [0.0, 1.0]),
        ({"window": [1, 3], "speedup": 2}, [0.0, 0.5]),
    ],
)
def test_speedup_and_window(tmp_path: Path, options: dict[str, Any], expected: list[float]) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"t_s": t} for t in (0, 1, 2, 3)])
    assert offsets(trace_scenario({"file": str(path), **options})) == expected


def test_a_looped_trace_repeats_every_period_until_the_stop_condition(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"t_s": t} for t in (0, 1, 2)])  # period 2 + mean gap 1 = 3
    looped = trace_scenario({"file": str(path), "loop": True}, duration=7)
    assert offsets(looped) == [0, 1, 2, 3, 4, 5, 6]
    capped = trace_scenario({"file": str(path), "loop": True}, requests=4)
    assert offsets(capped) == [0, 1, 2, 3]
    windowed = trace_scenario({"file": str(path), "loop": True, "window": [0, 2]}, duration=4)
    assert offsets(windowed) == [0, 1, 2, 3]  # the window's length is the period
    with pytest.raises(ScenarioError, match="a looped trace needs a stop condition"):
        trace_scenario({"file": str(path), "loop": True})


@pytest.mark.parametrize(
    "lines",
    [
        [{"timestamp": 1795428900.0}, {"timestamp": 1795428900.25}],
        [{"timestamp_ms": 1795428900000}, {"timestamp_ms": 1795428900250}],
        [{"timestamp": "2026-11-23T10:15:00Z"}, {"timestamp": "2026-11-23T10:15:00.250+00:00"}],
    ],
)
def test_absolute_times_start_at_zero(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    assert offsets(trace_scenario(str(write_jsonl(tmp_path / "t.jsonl", lines)))) == [0.0, 0.25]


def test_csv_with_endpoint_tokens_and_json_inputs(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('t_s,api_name,input_tokens,inputs\n0.0,echo,12,"[""hello""]"\n0.5,/echo,7,\n')
    spec = trace_scenario(str(path))
    assert offsets(spec) == [0.0, 0.5]
    assert with_trace_mix(spec) is spec  # every line names the scenario's own endpoint
    fixed = recorded_inputs(spec.load)
    assert fixed is not None and fixed(0) == ["hello"] and fixed(1) is None
    payloads = PayloadGenerator(spec.payload, fixed=fixed)
    assert payloads.inputs(0) == ["hello"] and isinstance(payloads.inputs(1)[0], str)


def test_file_inputs_are_read_next_to_the_trace(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(b"\x89PNG fake")
    path = write_jsonl(tmp_path / "t.jsonl", [{"t_s": 0, "inputs": [{"file": "cat.png"}, 3]}])
    fixed = recorded_inputs(trace_scenario(str(path)).load)
    assert fixed is not None
    value = fixed(0)
    assert value is not None and value[1] == 3
    assert value[0] == FileValue(b"\x89PNG fake", "cat.png", "image/png")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"t_s": 0}\n{"t_s": "soon"}\n', r"t.jsonl:2: field 't_s': value 'soon': expected seconds >= 0"),
        ('{"t_s": 0}\n{"t_s": -1}\n', r"t.jsonl:2: field 't_s': value -1"),
        ('{"t_s": 0}\n{"api_name": "echo"}\n', r"t.jsonl:2: expected one time field of t_s, timestamp"),
        ('{"t_s": 0}\n{"t_s": 1, "timestamp": 5}\n', r"t.jsonl:2: expected one time .*found t_s, timestamp"),
        ('{"t_s": 0}\n{"timestamp": 5}\n', r"lines mix time fields"),
        ('{"t_s": 0}\n{"t_s": 1\n', r"t.jsonl:2: not JSON"),
        ('[1, 2]\n', r"t.jsonl:1: expected a JSON object, got list"),
        ('{"t_s": 0, "inputs": "hi"}\n', r"t.jsonl:1: field 'inputs': value 'hi': expected a list"),
        ('{"t_s": 0, "inputs": [{"file": "nope.png"}]}\n', r"t.jsonl:1: field 'inputs': value '.*nope.png'"),
        ('{"t_s": 0, "output_tokens": -3}\n', r"t.jsonl:1: field 'output_tokens': value -3: expected a"),
        ('{"timestamp": "yesterday"}\n', r"t.jsonl:1: field 'timestamp': value 'yesterday'"),
        ('{"t_s": 0, "api_name": "a", "fn_index": 1}\n', r"t.jsonl:1: name the function once"),
        ('\n# nothing\n', r"no requests in it"),
    ],
)
def test_a_malformed_line_names_the_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    spec = trace_scenario(str(path))
    with pytest.raises(ScenarioError, match=message):
        plan(spec.load)
        recorded_inputs(spec.load)


def test_errors_for_a_missing_file_an_empty_window_and_another_endpoint(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="load.trace: file '.*missing.jsonl': cannot read"):
        plan(trace_scenario(str(tmp_path / "missing.jsonl")).load)
    path = write_jsonl(tmp_path / "t.jsonl", [{"t_s": 0}, {"t_s": 1, "api_name": "other"}])
    with pytest.raises(ScenarioError, match=r"load.trace.window: value \[5.0, 6.0\]: no line .* 0 to 1 s"):
        plan(trace_scenario({"file": str(path), "window": [5, 6]}).load)
    spec = with_trace_mix(trace_scenario(str(path)))  # another endpoint: the trace runs as a mix
    assert spec.mix is not None and [(e.endpoint.api_name, e.weight) for e in spec.mix] == [("echo", 1),
                                                                                           ("other", 1)]
    assert [routing(spec, [0, 1]).label_for(i) for i in (0, 1)] == ["echo", "other"]


def test_scenario_paths_resolve_against_the_scenario_folder(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    write_jsonl(folder / "traffic.jsonl", [{"t_s": 0}, {"t_s": 0.1}])
    raw = {"endpoint": {"api_name": "echo"}, "load": {"trace": "traffic.jsonl"}}
    (folder / "s.yaml").write_text(yaml.safe_dump(raw))
    spec = load_scenario(folder / "s.yaml")
    assert spec.load.trace is not None and spec.load.trace.file == folder / "traffic.jsonl"
    assert spec.load.shape == "trace" and offsets(spec) == [0.0, 0.1]
    raw["load"] = {"replay": "../runs/a"}
    (folder / "s.yaml").write_text(yaml.safe_dump(raw))
    assert load_scenario(folder / "s.yaml").load.replay == folder / "../runs/a"


def test_a_replayed_run_keeps_intended_times_and_ids(tmp_path: Path) -> None:
    records = [RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="echo", warmup=False,
                             intended_at_s=t) for i, t in [(2, 0.4), (0, 0.0), (1, 0.1), (3, 0.4)]]
    write_parquet(records, tmp_path / "run" / "records.parquet")
    built = plan(scenario(endpoint={"api_name": "echo"}, load={"replay": str(tmp_path / "run")}).load)
    assert isinstance(built, OpenPlan)
    assert built.offsets.tolist() == [0.0, 0.1, 0.4, 0.4] and built.request_ids() == [0, 1, 2, 3]
    part = built.part(1, 2)
    assert part.request_ids() == [1, 3]
    with pytest.raises(ScenarioError, match="load.replay: value .*: no records.parquet"):
        plan(scenario(endpoint={"api_name": "echo"}, load={"replay": str(tmp_path)}).load)


def test_a_trace_drives_a_real_run_on_time(echo_server: RunningServer, tmp_path: Path) -> None:
    times = np.round(np.cumsum(np.random.default_rng(4).exponential(0.02, 40)), 4)
    lines = [{"t_s": float(t), "api_name": "echo", **({"inputs": ["given"]} if i % 2 else {})}
             for i, t in enumerate(times)]
    spec = trace_scenario(str(write_jsonl(tmp_path / "t.jsonl", lines)))
    result = run_scenario(spec, target=echo_server.url, out_dir=tmp_path / "run", live=False)
    records = sorted(result.records, key=lambda r: r.request_id)
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    assert [r.intended_at_s for r in records] == pytest.approx(times.tolist())
    lags = sorted(r.send_lag_s for r in records if r.send_lag_s is not None)
    assert lags[len(lags) // 2] < 0.05  # sent on schedule (a loose bound: the host is shared)


def test_cli_replay_reproduces_a_past_runs_schedule(echo_server: RunningServer, tmp_path: Path) -> None:
    raw = {"name": "replay-me", "endpoint": {"api_name": "echo"},
           "payload": {"variants": 4, "inputs": [{"text": {"words": [1, 3]}}]},
           "load": {"rate": 30, "arrival": "poisson", "duration": 1, "timeout": 10}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(path), "--target", echo_server.url, "--out", str(tmp_path / "a"),
                                "--no-live"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["run", str(path), "--target", echo_server.url, "--out", str(tmp_path / "b"),
                                 "--no-live", "--replay", str(tmp_path / "a"), "--set", "payload.seed=0"])
    assert second.exit_code == 0, second.output
    a = {r.request_id: r for r in read_parquet(tmp_path / "a" / "records.parquet")}
    b = {r.request_id: r for r in read_parquet(tmp_path / "b" / "records.parquet")}
    assert a.keys() == b.keys() and len(a) > 10
    assert all(a[i].intended_at_s == b[i].intended_at_s for i in a)
    run_json = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run_json["scenario"]["load"]["replay"] == str((tmp_path / "a").resolve())
    assert PayloadGenerator(load_scenario(path).payload).inputs(3) == PayloadGenerator(
        load_scenario(path).payload).inputs(7)  # variant = request_id % variants: same ids, same bodies


SHIPPED = Path(__file__).resolve().parents[3] / "scenarios" / "trace.yaml"


def test_the_readme_trace_commands_run(server_factory: Factory, tmp_path: Path) -> None:
    """`qbench run scenarios/trace.yaml` and `--replay` of that run, 10x faster and on its first 8 s."""
    predict = {"api_name": "predict", "workload": "sleep", "params": {"base_ms": 20, "per_item_ms": 5},
               "batch": True, "max_batch_size": 8, "concurrency_limit": 1}
    small = ["--set", "load.trace.speedup=10", "--set", "load.duration=2.1", "--no-live"]
    runner = CliRunner()
    with server_factory(functions=[predict]) as server:
        first = runner.invoke(app, ["run", str(SHIPPED), "--target", server.url, "--out", str(tmp_path / "a"),
                                    *small])
        assert first.exit_code == 0, first.output
        again = runner.invoke(app, ["run", str(SHIPPED), "--target", server.url, "--out", str(tmp_path / "b"),
                                    "--replay", str(tmp_path / "a"), "--no-live"])
        assert again.exit_code == 0, again.output
    a = sorted(read_parquet(tmp_path / "a" / "records.parquet"), key=lambda r: r.request_id)
    b = sorted(read_parquet(tmp_path / "b" / "records.parquet"), key=lambda r: r.request_id)
    assert len(a) == len(b) > 20 and all(r.ok for r in a + b)
    assert [r.intended_at_s for r in a] == [r.intended_at_s for r in b]
