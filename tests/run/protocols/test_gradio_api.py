"""A Gradio app's API from /config and /info (qbench.run.protocols.gradio_api): endpoints of each
release's config, inputs and their labels, the app's examples by component, and the generator and
words `suggest`, `describe` and `expected_inputs` give each input. (Per-component generators that
`qbench init` writes are tabled in tests/run/target/test_draft.py; structured values in
test_gradio_values.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from qbench.run.protocols.gradio_api import (
    DEFAULT_STREAM_EVERY_S,
    AppEndpoint,
    AppInput,
    api_inputs,
    app_endpoints,
    describe,
    expected_inputs,
    flow,
    suggest,
)


@pytest.mark.parametrize(("component", "name"), [
    ("slider", "Slider"), ("checkboxgroup", "CheckboxGroup"), ("imageeditor", "ImageEditor"),
    ("dataframe", "Dataframe"), ("", ""),
])
def test_class_name_is_the_name_users_write(component: str, name: str) -> None:
    assert AppInput(component, "", {}).class_name == name


@pytest.mark.parametrize(("choices", "values"), [
    ([["Fast", "fast"], ["Slow", "slow"]], ["fast", "slow"]),  # 3.50+: [label, value]
    (["a", "b"], ["a", "b"]),  # before: bare values
    ([("L", 1), ["x", "y", "z"]], [1, ["x", "y", "z"]]),  # only pairs are unwrapped
    ("abc", None), (None, None),
])
def test_choices_are_the_values_of_label_value_pairs(choices: Any, values: list[Any] | None) -> None:
    assert AppInput("dropdown", "", {"choices": choices}).choices == values


def test_an_empty_config_has_no_endpoints() -> None:
    assert app_endpoints({}) == []
    assert app_endpoints({"components": [], "dependencies": ["not a dict", {"api_name": ""}]}) == []


CONFIG_6X: dict[str, Any] = {
    "components": [
        {"id": 10, "type": "audio", "props": {"label": "Mic"}},
        {"id": 11, "type": "textbox", "props": {"label": "Out"}, "skip_api": True},
        {"id": 12, "type": "textbox", "props": "not a dict"},
        {"id": 13, "type": "api", "props": {"label": "1st"}},
    ],
    "dependencies": [
        {"id": 7, "api_name": "transcribe", "inputs": [10, 11], "connection": "stream", "stream_every": 0.2,
         "time_limit": 30, "api_visibility": "private"},
        {"id": 8, "api_name": "echo", "inputs": [12, 99], "types": {"generator": True}},
        {"id": 9, "api_name": "stream_default", "inputs": [], "connection": "stream"},
        {"id": 5, "api_name": "server_fn", "inputs": [13]},
    ],
}


def test_endpoints_of_a_6x_config_without_info() -> None:
    endpoints = {e.api_name: e for e in app_endpoints(CONFIG_6X)}
    stream = endpoints["transcribe"]
    assert (stream.fn_index, stream.public, stream.stream_every, stream.time_limit) == (7, False, 0.2, 30)
    assert [i.component for i in stream.inputs] == ["audio"]  # skip_api left out
    echo = endpoints["echo"]
    assert echo.generator and echo.public and echo.stream_every is None and echo.time_limit is None
    assert [(i.component, i.label, i.props) for i in echo.inputs] == [("textbox", "", {}), ("", "", {})]
    assert endpoints["stream_default"].stream_every == DEFAULT_STREAM_EVERY_S
    assert list(endpoints)[-1] == "transcribe"  # private ones last


def test_info_parameters_name_the_inputs_when_they_line_up() -> None:
    info = {"named_endpoints": {
        "/server_fn": {"parameters": [
            {"parameter_name": "prompt", "label": "1st", "type": {"type": "string"}}]},
        "/transcribe": {"parameters": [{"label": "Audio"}]},
        "/echo": {"parameters": [{"label": "only one"}]},  # two inputs: not used
    }}
    endpoints = {e.api_name: e for e in app_endpoints(CONFIG_6X, info)}
    (fn_input,) = endpoints["server_fn"].inputs
    assert fn_input.label == "prompt" and fn_input.info["type"] == {"type": "string"}
    assert endpoints["transcribe"].inputs[0].label == "Mic"  # the component's own label wins
    assert [i.info for i in endpoints["echo"].inputs] == [{}, {}]
    assert endpoints["transcribe"].public and not endpoints["stream_default"].public


def test_api_inputs_label_from_info_when_the_component_has_none() -> None:
    components: dict[Any, dict[str, Any]] = {1: {"type": "number", "props": {}}, 2: {"type": "state"}}
    (inp,) = api_inputs(components, {"inputs": [1, 2]}, params=[{"parameter_name": "n"}])
    assert (inp.component, inp.label, inp.info) == ("number", "n", {"parameter_name": "n"})


def test_examples_come_from_the_first_dataset_that_covers_a_component() -> None:
    config = {
        "components": [
            {"id": 1, "type": "textbox", "props": {}},
            {"id": 2, "type": "number", "props": {}},
            {"id": 3, "type": "dataset", "props": {"component_ids": [1, 2], "samples": [["a", 1], ["b", 2]]}},
            {"id": 4, "type": "dataset", "props": {"component_ids": [1], "samples": [["z"]]}},
            {"id": 5, "type": "dataset", "props": {"component_ids": [2], "samples": "not rows"}},
        ],
        "dependencies": [{"api_name": "f", "inputs": [1, 2]}],
    }
    (endpoint,) = app_endpoints(config)
    assert [i.examples for i in endpoint.inputs] == [("a", "b"), (1, 2)]


def test_a_file_input_with_example_files_sends_them_and_keeps_the_generator_as_alternative() -> None:
    audio = AppInput("audio", "a", {}, examples=({"path": "/tmp/a.wav"}, "http://h/b.wav"))
    made = suggest(audio)
    assert made.spec == {"example": {"values": [{"file": "file=/tmp/a.wav"}, {"file": "http://h/b.wav"}]}}
    assert made.remote_files and made.alternative is not None and "audio" in made.alternative
    mixed = AppInput("audio", "a", {}, examples=({"path": "/tmp/a.wav"}, 3))  # not all files: generated
    assert "audio" in suggest(mixed).spec


def test_a_component_qbench_cannot_make_is_a_fill_in_or_its_default_file() -> None:
    model = AppInput("dicom", "m", {"value": None}, info={"example_input": {"path": "x.dcm"}})
    made = suggest(model)
    assert made.fill_in and made.spec == {"files": {"dir": "samples/"}} and "FILL IN" in made.note
    with_default = AppInput("dicom", "m", {"value": {"path": "/srv/a.dcm"}})
    made = suggest(with_default)
    assert made.spec == {"example": {"values": [{"file": "file=/srv/a.dcm"}]}} and made.remote_files
    assert not made.fill_in and made.alternative == {"files": {"dir": "samples/"}}


def test_an_unknown_component_sends_its_default_or_gradios_example() -> None:
    assert suggest(AppInput("json", "j", {"value": {"a": 1}})).spec == {"value": {"a": 1}}
    made = suggest(AppInput("html", "h", {}, info={"example_input": "<b>hi</b>"}))
    assert made.spec == {"value": "<b>hi</b>"} and "a Html value" in made.note


@pytest.mark.parametrize(("props", "spec"), [
    ({"minimum": 5, "maximum": 1}, {"min": 5, "max": 105}),  # upside down: 100 wide from the lower bound
    ({"maximum": 10}, {"min": -90, "max": 10}),  # one upper bound
    ({"value": 40, "step": 1}, {"min": 40, "max": 80, "integer": True}),  # a whole default and step
    ({"value": 40}, {"min": 40, "max": 80}),  # no step: not known to be whole
    ({"value": -4.5}, {"min": -4.5, "max": -2.25}),
    ({"value": True}, {"min": 0, "max": 100}),  # a bool is not a default number
    ({"value": 3, "step": 0.5}, {"min": 3, "max": 6}),  # a fractional step: not whole
])
def test_a_number_without_a_usable_range(props: dict[str, Any], spec: dict[str, Any]) -> None:
    assert suggest(AppInput("number", "n", props)).spec == {"number": spec}


def test_a_slider_keeps_its_step_and_info_can_say_integer() -> None:
    slider = AppInput("slider", "s", {"minimum": 0, "maximum": 10, "step": 2}, {"type": {"type": "integer"}})
    made = suggest(slider)
    assert made.spec == {"number": {"min": 0, "max": 10, "step": 2, "integer": True}}
    assert made.note == "a number from 0 to 10, step 2, whole"


def test_choices_without_values_and_many_without_a_limit() -> None:
    assert suggest(AppInput("radio", "r", {"choices": [], "value": "x"})).spec == {"value": "x"}
    many = suggest(AppInput("checkboxgroup", "c", {"choices": [str(n) for n in range(10)]}))
    assert many.spec["choice"]["pick"] == [1, 10]
    assert many.note == "a list of 0, 1, 2, 3, 4, 5, 6, 7, ... (1 to 10)"  # only the first eight named


def test_examples_outside_a_lists_choices_or_not_numbers_are_not_used() -> None:
    group = AppInput("checkboxgroup", "c", {"choices": ["a", "b"]}, examples=(["a"], ["a", "zz"]))
    assert "pick" in suggest(group).spec["choice"]
    fine = AppInput("checkboxgroup", "c", {"choices": ["a", "b"]}, examples=(["a"], ["a", "b"]))
    assert suggest(fine).spec == {"example": {"values": [["a"], ["a", "b"]]}}
    numbers = AppInput("number", "n", {"minimum": 0, "maximum": 9}, examples=(1, "2"))
    assert suggest(numbers).spec == {"number": {"min": 0, "max": 9}}
    flags = AppInput("slider", "s", {"minimum": 0, "maximum": 1}, examples=(True,))
    assert "number" in suggest(flags).spec


@pytest.mark.parametrize(("props", "spec", "note"), [
    ({"min_length": 5}, {"seconds": 5, "sample_rate": 16000}, "audio of 5 to any s (WAV, mono)"),
    ({"max_length": 0.5}, {"seconds": 0.5, "sample_rate": 16000}, "audio of 0 to 0.5 s (WAV, mono)"),
    ({}, {"seconds": 2, "sample_rate": 16000}, "audio (WAV, mono)"),
])
def test_audio_fits_its_length_bounds(props: dict[str, Any], spec: dict[str, Any], note: str) -> None:
    made = suggest(AppInput("audio", "a", props))
    assert made.spec == {"audio": spec} and made.note == note


@pytest.mark.parametrize(("types", "many", "spec"), [
    ([".nii.gz"], False, {"file": {"kb": [4, 64], "suffix": ".nii.gz"}}),
    (["video"], False, {"file": {"kb": [4, 64], "suffix": ".avi"}}),
    (["image"], True, {"file": {"kb": [4, 64], "suffix": ".png", "count": [1, 3]}}),
    (["audio"], False, {"audio": {"seconds": 2, "sample_rate": 16000}}),
    ([".webp", ".gif"], False, {"image": {"width": 224, "height": 224, "format": "webp"}}),
    (["pdf"], False, {"file": {"kb": [4, 64], "suffix": ".bin"}}),
])
def test_file_types_decide_what_is_sent(types: list[str], many: bool, spec: dict[str, Any]) -> None:
    props = {"file_types": types, "file_count": "multiple" if many else "single"}
    assert suggest(AppInput("file", "f", props)).spec == spec


def test_a_suffix_qbench_cannot_fill_is_said_so() -> None:
    made = suggest(AppInput("file", "f", {"file_types": [".pdf"]}))
    assert made.spec == {"file": {"kb": [4, 64], "suffix": ".pdf"}} and "may reject them" in made.note
    zipped = suggest(AppInput("file", "f", {"file_types": [".zip"]}))
    assert "generated .zip files" in zipped.note


@pytest.mark.parametrize(("component", "version", "fmt"), [
    ("chatbot", (6, 0), "parts"), ("chatbot", (5, 50), "tuples"), ("chatbot", (), "tuples"),
])
def test_a_chatbot_history_format_by_release(component: str, version: tuple[int, ...], fmt: str) -> None:
    made = suggest(AppInput(component, "c", {"type": "unknown"}), version)
    assert made.spec["chat"]["format"] == fmt and made.note == f"the conversation so far ({fmt})"


def test_editors_are_sent_as_png_and_the_image_type_is_named() -> None:
    made = suggest(AppInput("sketchpad", "s", {"type": "numpy"}))
    assert made.spec == {"image": {"width": 224, "height": 224, "format": "png"}}
    assert "as numpy" in made.note
    assert suggest(AppInput("imageslider", "s", {})).note.startswith("an image pair")


def test_describe_and_flow() -> None:
    assert describe(AppInput("slider", "Size", {})) == "Slider 'Size'"
    assert describe(AppInput("checkbox", "", {})) == "Checkbox"
    assert flow({"number": {"min": 1, "max": 10, "step": 1}}) == "number: {min: 1, max: 10, step: 1}"
    assert flow({"text": {"words": ["é", 2]}}) == "text: {words: [é, 2]}"


def test_expected_inputs_numbers_each_input_with_its_line() -> None:
    inputs = (AppInput("checkbox", "On", {}), AppInput("radio", "", {"choices": ["a"]}))
    endpoint = AppEndpoint("f", 0, inputs, public=True)
    assert expected_inputs(endpoint).splitlines() == [
        "  1. Checkbox 'On': true or false", "       - boolean: {true_share: 0.5}",
        "  2. Radio: one of a", "       - choice: {values: [a]}"]
    assert expected_inputs(AppEndpoint("g", 1, (), public=False)) == ""
