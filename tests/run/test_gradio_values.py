"""Component values in the wire format of the app's release (qbench.run.protocols.gradio_values), the
generators `qbench init` picks from hints (gradio_api.suggest), generated files whose content fits
their suffix (payloads.gen_files), and the sentences about an app's errors (qbench.run.app_errors)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np
import pytest

from qbench.run.app_errors import explain, short
from qbench.run.payload_specs import FileSpec
from qbench.run.payloads import FileValue, gen_files
from qbench.run.protocols.gradio_api import AppInput, suggest
from qbench.run.protocols.gradio_values import event_data, prop_inputs, wire_example, wrap_file
from qbench.run.records import RequestRecord
from tests.run.conftest import scenario

FD = {"path": "/tmp/gradio/x/a.png", "orig_name": "a.png", "meta": {"_type": "gradio.FileData"}}


@pytest.mark.parametrize(("props", "value", "expected"), [
    ({}, [[1, 2, 3], [4, 5, 6]],
     {"headers": ["1", "2", "3"], "data": [[1, 2, 3], [4, 5, 6]], "metadata": None}),
    ({"value": {"headers": ["a", "b"], "data": [["", ""]]}}, [[1, 2]],
     {"headers": ["a", "b"], "data": [[1, 2]], "metadata": None}),
    ({"value": {"headers": ["a", "b"], "data": []}}, [[1, 2, 3]],  # the headers do not fit: numbered
     {"headers": ["1", "2", "3"], "data": [[1, 2, 3]], "metadata": None}),
    ({}, {"headers": ["x"], "data": [[1]]}, {"headers": ["x"], "data": [[1]], "metadata": None}),
    ({}, "examples/table.csv", None),  # a file: not the API's value
])
def test_a_dataframe_example_goes_as_headers_data_metadata(props: dict[str, Any], value: Any,
                                                           expected: Any) -> None:
    assert wire_example(AppInput("dataframe", "", props), value) == expected


def test_a_dataframe_with_examples_sends_them_wrapped_and_without_generates_a_table() -> None:
    table = AppInput("dataframe", "matrix", {"datatype": "number", "row_count": 2, "column_count": 3},
                     examples=([[1, 2], [3, 4]],))
    made = suggest(table, (6, 31, 0))
    assert made.spec == {"example": {"values": [{"headers": ["1", "2"], "data": [[1, 2], [3, 4]],
                                                 "metadata": None}]}}
    generated = made.alternative
    assert generated == {"json": {"headers": ["1", "2", "3"], "data": [["{int}"] * 3] * 2, "metadata": None}}


@pytest.mark.parametrize(("kind", "mime", "expected"), [
    ("gallery", "image/png", {"image": FD, "caption": None}),
    ("gallery", "video/mp4", {"video": FD, "caption": None}),
    ("imageeditor", "image/png", {"background": FD, "layers": [FD], "composite": FD}),
    ("multimodaltextbox", "image/png", {"text": "", "files": [FD]}),
    ("image", "image/png", FD),
    ("file", "application/zip", FD),
])
def test_an_uploaded_file_goes_inside_its_components_structure(kind: str, mime: str, expected: Any) -> None:
    assert wrap_file(kind, FD, mime) == expected


@pytest.mark.parametrize(("props", "numbers"), [
    ({"label": "Duration in seconds", "value": "1"}, True),
    ({"label": "x", "placeholder": "How many steps?"}, True),
    ({"label": "Count", "value": ""}, True),
    ({"label": "Anything", "value": "42"}, True),  # a numeric default
    ({"label": "Your name", "value": "Ada"}, False),
    ({"label": "Message"}, False),
])
def test_a_textbox_that_asks_for_a_number_gets_numbers(props: dict[str, Any], numbers: bool) -> None:
    spec = suggest(AppInput("textbox", str(props.get("label")), props)).spec
    if numbers:
        assert all(int(v) >= 0 for v in spec["choice"]["values"]), spec
    else:
        assert "text" in spec


@pytest.mark.parametrize(("component", "props", "key"), [
    ("colorpicker", {}, "choice"), ("datetime", {}, "choice"), ("highlightedtext", {}, "json"),
    ("model3d", {}, "file"), ("json", {"value": {"a": 1}}, "value"), ("gallery", {}, "image"),
    ("imageeditor", {}, "image"),
])
def test_structured_components_get_a_generator_not_a_fill_in(component: str, props: dict[str, Any],
                                                              key: str) -> None:
    made = suggest(AppInput(component, "", props), (6, 31, 0))
    assert key in made.spec and not made.fill_in
    if component == "imageeditor":
        assert made.spec["image"]["format"] == "png"  # the editor saves RGBA layers under the upload's suffix


def test_file_types_decide_the_file_kind() -> None:
    made = suggest(AppInput("file", "archive", {"file_types": [".zip"]}))
    assert made.spec["file"]["suffix"] == ".zip"


@pytest.mark.parametrize("suffix", [".zip", ".csv", ".json", ".obj", ".txt"])
def test_generated_files_have_the_content_their_suffix_says(suffix: str) -> None:
    file = gen_files(FileSpec(kb=(2, 4), suffix=suffix), np.random.default_rng(0), "t")
    assert isinstance(file, FileValue) and file.name.endswith(suffix)
    if suffix == ".zip":
        assert len(zipfile.ZipFile(io.BytesIO(file.data)).namelist()) == 3
    elif suffix == ".json":
        assert isinstance(json.loads(file.data), list)
    elif suffix == ".csv":
        assert file.data.decode().splitlines()[0] == "name,value,count"
    elif suffix == ".obj":
        assert file.data.startswith(b"v ") and b"\nf 1 2 3" in file.data
    assert 1024 <= len(file.data) <= 6 * 1024


# ---------------------------------------------------------------- the app's errors, explained


def _record(n: int, kind: str | None, message: str = "", age: float = 0.0, outputs: int = 0) -> RequestRecord:
    record = RequestRecord(request_id=n, user_id=0, session_id="s", endpoint="predict", warmup=False,
                           intended_at_s=float(n))
    record.sent_at_s = float(n)
    record.completed_at_s = float(n) + age
    record.outcome = "ok" if kind is None else "error"
    record.error_kind, record.error_message, record.outputs = kind, message or None, outputs
    return record


def _scenario() -> Any:
    return scenario(endpoint={"api_name": "predict"}, payload={"inputs": [{"text": {"words": [2, 2]}}]},
                    load={"burst": 1})


def test_an_app_that_raises_without_show_error_is_explained() -> None:
    records = [_record(n, "server_error", "Error") for n in range(14)]
    (note,) = explain(records, _scenario())
    assert note.startswith("/predict: the app raised on 14/14 requests; Gradio hides the reason unless the "
                           "app sets show_error=True")
    assert 'the first input sent was ["' in note and "--show-inputs" in note


def test_an_app_that_raises_with_show_error_names_its_message_and_state_inputs() -> None:
    records = [_record(n, "server_error", "invalid literal for int()") for n in range(3)] + [_record(3, None)]
    config = {"components": [{"id": 1, "type": "state"}, {"id": 2, "type": "textbox"}],
              "dependencies": [{"api_name": "predict", "inputs": [1, 2]}]}
    (note,) = explain(records, _scenario(), {"config": config})
    assert note.startswith("/predict: the app raised on 3/4 requests: invalid literal for int()")
    assert "1 gr.State input(s), which a new session sends empty" in note


def test_a_few_errors_are_not_the_app_raising() -> None:
    assert explain([_record(0, "server_error", "Error")] + [_record(n, None) for n in range(1, 5)]) == []


def test_events_still_running_at_the_end_say_their_age_not_timeout() -> None:
    records = [_record(0, "deadline", "still running", age=4.0, outputs=3),
               _record(1, "deadline", "still running", age=2.5)]
    (note,) = explain(records, _scenario())
    assert note == ("/predict: 2 event(s) still running at the end of the run, 2.5 to 4.0 s old, within the "
                    "60 s timeout; 1 had streamed outputs: they take longer than the run, they did not time "
                    "out (a longer load.duration or load.drain lets them finish)")


def test_inputs_are_shown_short() -> None:
    shown = short([FileValue(b"x" * 2048, "a.zip", "application/zip"), "hi"])
    assert shown == '["<file a.zip, 2.0 KiB>","hi"]'
    long = short(["w" * 500])
    assert len(long) == 160 and long.endswith("...")


@pytest.mark.parametrize(("targets", "expected"), [
    ([[3, "like"]], {"index": 0, "value": "hello", "liked": True}),
    ([[3, "example_select"]], {"index": 0, "value": {"text": "hello", "files": []}}),
    ([[3, "edit"]], {"index": 0, "value": "hello", "previous_value": "hi"}),
    ([[3, "key_up"]], {"key": "a", "input_value": "hello"}),
])
def test_an_event_whose_function_reads_event_data_gets_what_a_browser_sends(targets: Any,
                                                                           expected: Any) -> None:
    assert event_data({"collects_event_data": True, "targets": targets}) == expected
    assert event_data({"collects_event_data": False, "targets": targets}) is None


def test_a_function_that_takes_the_component_gets_its_props_and_the_value() -> None:
    config = {"components": [{"id": 1, "props": {"value": 5, "maximum": 10, "label": "A"}}, {"id": 2}]}
    assert prop_inputs(config, {"inputs": [2, 1], "component_prop_inputs": [1]}) == {1: {"maximum": 10,
                                                                                        "label": "A"}}


def test_a_select_carries_what_its_component_selects() -> None:
    config = {"components": [{"id": 3, "type": "lineplot"}, {"id": 4, "type": "dataframe"},
                             {"id": 5, "type": "gallery"}, {"id": 6, "type": "radio"}]}
    def select(target: int) -> Any:
        return event_data({"collects_event_data": True, "targets": [[target, "select"]]}, config)
    assert select(3)["index"] == [0, 10] and select(4)["index"] == [0, 0] and select(6)["index"] == 0
    assert select(5)["value"]["image"]["url"] == "image.png"


def test_a_cut_download_is_explained() -> None:
    message = ("download http://h/gradio_api/file=/tmp/a.wav: ClientPayloadError: Not enough data to satisfy "
               "content length header")
    (note,) = explain([_record(0, "stream_broken", message)] + [_record(n, None) for n in range(1, 9)])
    assert note.startswith("/predict: 1 output file download(s) ended short of their length: Gradio writes")


def test_a_video_without_examples_sends_its_default_file() -> None:
    default = {"path": "/x/a.mp4", "url": "http://h/gradio_api/file=/x/a.mp4",
               "meta": {"_type": "gradio.FileData"}}
    made = suggest(AppInput("video", "v", {"value": default}))
    assert made.spec == {"example": {"values": [{"file": "http://h/gradio_api/file=/x/a.mp4"}]}}
    assert made.remote_files and not made.fill_in
    assert suggest(AppInput("video", "v", {"value": None})).fill_in
