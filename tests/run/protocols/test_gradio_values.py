"""Component values in the wire format of the app's release (qbench.run.protocols.gradio_values), the
generators `qbench init` picks from hints (gradio_api.suggest), generated files whose content fits
their suffix (payloads.gen_files)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np
import pytest

from qbench.run.protocols.gradio_api import AppInput, app_endpoints, suggest
from qbench.run.protocols.gradio_values import event_data, event_files, prop_inputs, wire_example, wrap_file
from qbench.run.scenario.input_specs import FileSpec
from qbench.run.scenario.payloads import FileValue, gen_files

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
    ("video", "video/x-msvideo", FD),  # 6.x: the FileData
])
def test_an_uploaded_file_goes_inside_its_components_structure(kind: str, mime: str, expected: Any) -> None:
    assert wrap_file(kind, FD, mime, (6, 31, 0)) == expected


def test_a_video_before_6_goes_as_video_data() -> None:
    assert wrap_file("video", FD, "video/mp4", (5, 50, 0)) == {"video": FD, "subtitles": None}
    assert wrap_file("video", FD, "video/mp4", (4, 44, 1)) == {"video": FD, "subtitles": None}


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
    assert select(5)["value"]["image"]["path"] == "image.png"


@pytest.mark.parametrize(("event", "kind", "where"), [("delete", "file", ()), ("download", "file", ()),
                                                       ("select", "gallery", ("value", "image"))])
def test_the_files_of_event_data_are_found_and_each_run_gets_its_own(event: str, kind: str,
                                                                    where: tuple[str, ...]) -> None:
    """Gradio 5+ reads an event's file only from its cache: the protocol uploads one and names it in
    the event data of its own run (the constant table stays as it is)."""
    config = {"components": [{"id": 3, "type": kind}]}
    dep = {"collects_event_data": True, "targets": [[3, event]]}
    first = event_data(dep, config)
    assert first is not None
    (file,) = event_files(first)
    inner: Any = first
    for key in where:
        inner = inner[key]
    assert inner is file and file["meta"] == {"_type": "gradio.FileData"}  # FileData(**data) reads it
    file["path"] = "/tmp/gradio/abc/file.txt"
    again = event_data(dep, config)
    assert again is not None and event_files(again)[0]["path"] != "/tmp/gradio/abc/file.txt"
    assert event_files({"index": 0, "value": "hello"}) == []


def test_a_video_without_examples_sends_its_default_file() -> None:
    default = {"path": "/x/a.mp4", "url": "http://h/gradio_api/file=/x/a.mp4",
               "meta": {"_type": "gradio.FileData"}}
    made = suggest(AppInput("video", "v", {"value": default}))
    assert made.spec == {"example": {"values": [{"file": "http://h/gradio_api/file=/x/a.mp4"}]}}
    assert made.remote_files and not made.fill_in
    generated = suggest(AppInput("video", "v", {"value": None}))
    assert generated.spec == {"file": {"kb": [16, 32], "suffix": ".avi"}} and not generated.fill_in
    assert suggest(AppInput("file", "f", {"file_types": ["video"]})).spec["file"]["suffix"] == ".avi"


def test_a_generated_video_is_a_motion_jpeg_avi_a_decoder_can_walk() -> None:
    """RIFF 'AVI ' with its header list, one key-framed JPEG chunk a frame, and an index whose offsets
    point at them (what ffmpeg and OpenCV read); written without either."""
    file = gen_files(FileSpec(kb=(16, 32), suffix=".avi"), np.random.default_rng(0), "t")
    assert isinstance(file, FileValue) and file.mime == "video/x-msvideo"
    data = file.data
    assert data[:4] == b"RIFF" and data[8:12] == b"AVI "
    assert int.from_bytes(data[4:8], "little") == len(data) - 8
    movi = data.index(b"movi")
    frames = [m for m in range(movi, len(data) - 4) if data[m:m + 4] == b"00dc"]
    idx1 = data.index(b"idx1")
    entries = [data[idx1 + 8 + 16 * n: idx1 + 24 + 16 * n] for n in range(10)]
    assert len([f for f in frames if f < idx1]) == 10
    for entry in entries:
        offset, size = int.from_bytes(entry[8:12], "little"), int.from_bytes(entry[12:16], "little")
        start = movi + offset
        assert data[start:start + 4] == b"00dc" and data[start + 8:start + 10] == b"\xff\xd8"  # a JPEG
        assert int.from_bytes(data[start + 4:start + 8], "little") == size
    assert b"MJPG" in data[:movi] and b"strh" in data[:movi] and b"avih" in data[:movi]


@pytest.mark.parametrize(("props", "expected"), [
    ({"value": 1, "step": 1}, {"min": 1, "max": 2, "integer": True}),  # whole default and step: whole
    ({"value": 10, "step": 1}, {"min": 10, "max": 20, "integer": True}),
    ({"value": 0.5, "step": 0.1}, {"min": 0.5, "max": 1}),
    ({"value": None}, {"min": 0, "max": 100}),
])
def test_a_number_without_a_range_stays_near_its_default_and_whole_when_it_is(props: dict[str, Any],
                                                                               expected: Any) -> None:
    assert suggest(AppInput("number", "n", props)).spec == {"number": expected}


def test_examples_whose_rows_do_not_line_up_with_the_inputs_are_not_used() -> None:
    """fraud_detector's rows have three values for two inputs: no column can be trusted."""
    config = {"components": [
        {"id": 1, "type": "checkboxgroup", "props": {"choices": [["a", "a"], ["b", "b"]]}},
        {"id": 2, "type": "slider", "props": {"minimum": 1, "maximum": 3}},
        {"id": 9, "type": "dataset", "props": {"component_ids": [1, 2], "samples": [["x.csv", ["a"], 1.0]]}}],
        "dependencies": [{"id": 0, "api_name": "predict", "inputs": [1, 2], "outputs": []}]}
    (endpoint,) = app_endpoints(config)
    assert [i.examples for i in endpoint.inputs] == [(), ()]
    shifted = AppInput("slider", "s", {"minimum": 1, "maximum": 3}, examples=(["a", "b"],))  # Gradio cut it
    assert "number" in suggest(shifted).spec
