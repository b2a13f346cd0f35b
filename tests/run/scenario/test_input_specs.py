"""The generators of run.scenario.input_specs (choice, boolean, chat, file, example) and number steps:
seeded, within their bounds, in the shapes Gradio components take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qbench.errors import ScenarioError
from qbench.run.scenario.payloads import FileValue, PayloadGenerator
from qbench.run.scenario.schema import Payload, load_scenario, parse_scenario


def values(spec: dict[str, Any], n: int = 200) -> list[Any]:
    gen = PayloadGenerator(Payload.model_validate({"variants": n, "inputs": [spec]}))
    return [gen.inputs(i)[0] for i in range(n)]


def test_numbers_on_a_step_stay_on_it_and_reach_both_ends() -> None:
    drawn = values({"number": {"min": 0, "max": 1, "step": 0.05}})
    assert all(abs(v / 0.05 - round(v / 0.05)) < 1e-9 and 0 <= v <= 1 for v in drawn)
    assert {0, 1} <= set(drawn) and all(len(repr(v)) <= 5 for v in drawn)  # 0.15, not 0.15000000000000002
    whole = values({"number": {"min": 1, "max": 10, "step": 3}})
    assert set(whole) == {1, 4, 7, 10} and all(isinstance(v, int) for v in whole)


def test_choices_one_or_a_list_of_distinct_values_in_order() -> None:
    assert set(values({"choice": {"values": ["a", "b", "c"]}})) == {"a", "b", "c"}
    lists = values({"choice": {"values": ["x", "y", "z"], "pick": [1, 2]}})
    assert all(1 <= len(v) <= 2 and len(set(v)) == len(v) and v == sorted(v) for v in lists)
    assert {len(v) for v in lists} == {1, 2}


def test_booleans_follow_their_share() -> None:
    drawn = values({"boolean": {"true_share": 0.2}}, 1000)
    assert all(isinstance(v, bool) for v in drawn) and 150 < sum(drawn) < 250
    assert not any(values({"boolean": {"true_share": 0}}))


@pytest.mark.parametrize(("fmt", "check"), [
    ("tuples", lambda turn: isinstance(turn, list) and len(turn) == 2),
    ("messages", lambda turn: turn["role"] in ("user", "assistant") and isinstance(turn["content"], str)),
    ("parts", lambda turn: turn["content"][0]["type"] == "text" and turn["content"][0]["text"]),
])
def test_chat_history_formats(fmt: str, check: Any) -> None:
    histories = values({"chat": {"turns": [0, 2], "words": [1, 3], "format": fmt}})
    assert {len(h) for h in histories} == ({0, 1, 2} if fmt == "tuples" else {0, 2, 4})
    assert all(check(turn) for h in histories for turn in h)


def test_generated_files_have_their_size_suffix_and_count() -> None:
    one = values({"file": {"kb": [1, 2], "suffix": ".csv"}}, 20)
    assert all(isinstance(f, FileValue) and 1024 <= len(f.data) <= 2048 for f in one)
    assert all(f.name.endswith(".csv") and f.mime == "text/csv" for f in one)
    many = values({"file": {"kb": [1, 1], "count": [2, 3]}}, 20)
    assert {len(files) for files in many} == {2, 3}


def test_example_rows_stay_together() -> None:
    gen = PayloadGenerator(Payload.model_validate({"variants": 6, "inputs": [
        {"example": {"values": ["cat", "dog", "owl"]}}, {"example": {"values": [1, 2, 3]}}]}))
    assert [gen.inputs(i) for i in range(4)] == [["cat", 1], ["dog", 2], ["owl", 3], ["cat", 1]]


@pytest.mark.parametrize(("spec", "message"), [
    ({"choice": {"values": []}}, "payload.inputs.0.choice.values"),
    ({"choice": {"values": ["a"], "pick": [2, 2]}}, "0 <= min <= max <= 1"),
    ({"boolean": {"true_share": 1.5}}, "payload.inputs.0.boolean.true_share': value 1.5"),
    ({"chat": {"turns": [3, 1]}}, "payload.inputs.0.chat.turns"),
    ({"file": {"suffix": "csv"}}, "payload.inputs.0.file.suffix': value 'csv'"),
    ({"number": {"min": 0, "max": 1, "step": 0}}, "payload.inputs.0.number.step': value 0"),
    ({"example": {"values": []}}, "payload.inputs.0.example.values"),
])
def test_bad_values_name_the_key_and_the_value(spec: dict[str, Any], message: str) -> None:
    raw = {"target": "http://x", "endpoint": {"api_name": "a"}, "load": {"burst": 1},
           "payload": {"inputs": [spec]}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(raw, source="s.yaml")
    assert str(err.value).startswith("s.yaml: invalid scenario") and message in str(err.value)


def test_example_files_are_sent_as_uploads_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "cat.png").write_bytes(b"\x89PNG fake")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("target: http://x\nendpoint: {api_name: a}\nload: {burst: 1}\n"
                        "payload: {inputs: [{example: {values: [{file: ex/cat.png}, 7]}}]}\n")
    gen = PayloadGenerator(load_scenario(scenario).payload)
    first, second = gen.inputs(0)[0], gen.inputs(1)[0]
    assert isinstance(first, FileValue) and first.data == b"\x89PNG fake" and first.mime == "image/png"
    assert second == 7
    (tmp_path / "ex" / "cat.png").unlink()
    with pytest.raises(ScenarioError, match=r"payload.inputs.0.example.values: value \{file: '.*cat.png'\}"):
        PayloadGenerator(load_scenario(scenario).payload)
