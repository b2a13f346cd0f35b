"""Scenario validation: clear errors naming file, key, value and expectation; overrides; shipped examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.errors import ScenarioError
from qbench.run.pipeline import parse_set_options
from qbench.run.scenario.schema import Scenario, load_scenario, parse_scenario, with_overrides

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
BASE = {"endpoint": {"api_name": "f"}, "load": {"rate": 5, "duration": 10}}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("yaml_text", "key", "value", "expect"),
    [
        ("endpoint: {api_name: f}\nload: {rate: -3, duration: 5}\n", "load.rate", "-3", "greater than 0"),
        (
            "endpoint: {api_name: f}\nload: {rate: 5, users: 2, duration: 5}\n",
            "load",
            "",
            "exactly one load shape",
        ),
        ("endpoint: {api_name: f}\nload: {rate: 5}\n", "load", "", "stop condition"),
        (
            "endpoint: {api_name: f}\nload: {burst: 5, sessions: many}\n",
            "load.sessions",
            "'many'",
            "per_request",
        ),
        (
            "endpoint: {api_name: f}\nload: {burst: 5}\nprotocl: http\n",
            "protocl",
            "'http'",
            "unknown key; expected one of name, description, target, protocol, endpoint",
        ),
        (
            "endpoint: {api_name: f}\nload: {stages: [{duration: 3, rate: 1, too: 2}]}\n",
            "load.stages.0.too",
            "2",
            "unknown key; expected one of duration, rate, to",
        ),
        ("load: {burst: 5}\n", "<top>", "", "needs api_name"),
        (
            "endpoint: {api_name: f}\nload: {burst: 5}\npayload: {inputs: [{pictures: 1}]}\n",
            "payload.inputs.0",
            "",
            "exactly one of text, image",
        ),
        (
            "endpoint: {api_name: f}\nload: {burst: 5}\npayload: {inputs: [{text: {words: [9, 2]}}]}\n",
            "payload.inputs.0.text.words",
            "",
            "min <= max",
        ),
        (
            "endpoint: {api_name: f}\nload: {burst: 5}\nslo: {p95_latency_s: fast}\n",
            "slo.p95_latency_s",
            "'fast'",
            "valid number",
        ),
    ],
)
def test_errors_name_file_key_value_and_expectation(
    tmp_path: Path, yaml_text: str, key: str, value: str, expect: str
) -> None:
    path = write(tmp_path, yaml_text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    message = str(err.value)
    assert str(path) in message and f"key '{key}'" in message and expect in message
    assert value in message


def test_unreadable_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(write(tmp_path, "load: [unclosed\n"))
    with pytest.raises(ScenarioError, match="expected a mapping"):
        load_scenario(write(tmp_path, "- 1\n- 2\n"))


def test_name_defaults_to_file_stem_and_paths_resolve_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "prompts.txt").write_text("a\nb\n")
    path = tmp_path / "mine.yaml"
    path.write_text(
        "endpoint: {api_name: f}\nload: {burst: 2}\npayload: {inputs: [{text: {file: prompts.txt}}]}\n"
    )
    scenario = load_scenario(path)
    assert scenario.name == "mine"
    spec = scenario.payload.inputs[0].text
    assert spec is not None and spec.file == tmp_path / "prompts.txt"


def test_overrides_replace_the_load_shape() -> None:
    scenario = parse_scenario(BASE)
    users = with_overrides(scenario, {"load.users": 8, "load.duration": 20})
    assert users.load.shape == "users" and users.load.rate is None and users.load.duration == 20
    rate = with_overrides(users, {"load.rate": 12})
    assert rate.load.shape == "rate" and rate.load.rate == 12
    with pytest.raises(ScenarioError, match="load.rate"):
        with_overrides(scenario, {"load.rate": 0})
    # stages with none in it (the fuzz's `--set load.stages=[]` once reached the schedule: IndexError)
    with pytest.raises(ScenarioError, match="load.stages.*at least 1 item"):
        with_overrides(scenario, {"load.stages": []})


def test_set_options_parse_yaml_values() -> None:
    assert parse_set_options(["load.rate=12.5", "load.sessions=4", "slo=null"]) == {
        "load.rate": 12.5,
        "load.sessions": 4,
        "slo": None,
    }
    with pytest.raises(ScenarioError, match="key=value"):
        parse_set_options(["load.rate"])


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid_and_say_which_preset(path: Path) -> None:
    scenario = load_scenario(path)
    assert isinstance(scenario, Scenario) and scenario.slo is not None
    assert path.read_text().startswith("# Expects: qbench serve --preset ")


def test_all_six_examples_ship() -> None:
    names = {p.stem for p in SCENARIOS.glob("*.yaml")}
    assert {"image", "text", "audio", "burst", "stream", "http"} <= names


def test_a_sweep_section_is_left_to_qbench_sweep(tmp_path: Path) -> None:
    text = "endpoint: {api_name: f}\nload: {users: 2, duration: 1}\nsweep: {grid: {users: [1, 2]}}\n"
    path = write(tmp_path, text)
    assert load_scenario(path).load.users == 2


def test_gradio_protocol_forces_a_family_and_names_the_choices() -> None:
    base = {"endpoint": {"api_name": "f"}, "load": {"burst": 1}}
    assert parse_scenario({**base, "gradio_protocol": "sse_v2.1"}).gradio_protocol == "sse_v2.1"
    assert parse_scenario(base).gradio_protocol is None  # default: what /config says
    with pytest.raises(ScenarioError, match=r"key 'gradio_protocol': value 'sse_v4':.*'ws', 'sse'"):
        parse_scenario({**base, "gradio_protocol": "sse_v4"}, source="s.yaml")
    http = {"protocol": "http", "endpoint": {"path": "/p"}, "load": {"burst": 1}, "gradio_protocol": "ws"}
    with pytest.raises(ScenarioError, match="gradio_protocol applies to protocol: gradio only"):
        parse_scenario(http)


def test_a_token_slo_on_a_response_not_streamed_is_refused_naming_file_key_and_value(tmp_path: Path) -> None:
    """endpoint.stream: false has no first token or gaps: a TTFT/TPOT/ITL SLO key is refused before any
    request (it could only end 'violated, actual none'); without one the scenario loads and warns."""
    from qbench.run.scenario.schema import load_scenario

    path = tmp_path / "whole.yaml"
    base = ("protocol: openai\nendpoint: {stream: false}\nload: {rate: 1, duration: 1}\n"
            "payload: {inputs: [{text: {words: [3, 5]}}]}\n")
    path.write_text(base + "slo: {p95_ttft_s: 1.5, p99_itl_s: 0.05, p95_latency_s: 2}\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    text = str(err.value)
    assert str(path) in text and "key 'slo.p95_ttft_s'" in text and "value 1.5" in text
    assert "endpoint.stream is false" in text and "slo.p99_itl_s" in text
    prompt = {"inputs": [{"text": {"words": [3, 5]}}]}
    mix = {"protocol": "openai", "load": {"rate": 1, "duration": 1},
           "mix": [{"endpoint": {"stream": True}, "payload": prompt},
                   {"endpoint": {"stream": False}, "payload": prompt, "slo": {"p99_tpot_s": 1}}]}
    with pytest.raises(ScenarioError, match=r"key 'mix\.1\.slo\.p99_tpot_s'.*mix\.1\.endpoint\.stream"):
        parse_scenario(mix)
    path.write_text(base + "slo: {p95_latency_s: 2}\n", encoding="utf-8")
    ok = load_scenario(path)
    assert ok.token_warnings() == ["endpoint.stream is false: the responses are not streamed, so this run "
                                   "measures no TTFT, TPOT or ITL (only latency and tokens from usage)"]
    streamed = {"protocol": "openai", "load": {"rate": 1, "duration": 1}, "payload": prompt}
    assert parse_scenario(streamed).token_warnings() == []
