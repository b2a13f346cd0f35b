"""Component values in the wire format each Gradio release takes, as `gradio_client` sends them: examples,
structured generated values, uploads in their component's structure, event data, component-prop inputs."""

from __future__ import annotations

import copy
from typing import Any, Protocol


class AppInput(Protocol):
    """What this module reads of an input (qbench.run.protocols.gradio_api.AppInput)."""

    @property
    def component(self) -> str: ...

    @property
    def props(self) -> dict[str, Any]: ...


Suggestion = tuple[dict[str, Any], str]  # one payload input and what it sends, in words

MAX_ROWS = 10  # rows of a generated Dataframe
MAX_COLUMNS = 20
DATAFRAME_CELL = {"number": "{int}", "str": "{word}", "markdown": "{word}", "html": "{word}", "bool": True,
                  "date": "2024-01-01", "image": "{word}"}


# ---------------------------------------------------------------- the app's examples


def wire_example(inp: AppInput, value: Any) -> Any | None:
    """`value` (one example of the app's dataset for `inp`) as the API takes it; None: not sendable."""
    if inp.component == "dataframe":
        return _dataframe_example(inp, value)
    return value


def _dataframe_example(inp: AppInput, value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        rows = value["data"]
        headers = value.get("headers")
        return {"headers": headers if _fits(headers, rows) else _headers(inp, rows),
                "data": rows, "metadata": value.get("metadata")}
    if isinstance(value, list) and all(isinstance(row, list) for row in value):
        return {"headers": _headers(inp, value), "data": value, "metadata": None}
    return None  # a file path (a CSV), a string: the dataset's preview, not the value


def _fits(headers: Any, rows: list[Any]) -> bool:
    width = len(rows[0]) if rows and isinstance(rows[0], list) else None
    return isinstance(headers, list) and (width is None or len(headers) == width)


def _headers(inp: AppInput, rows: list[Any]) -> list[Any]:
    """The component's own headers when they fit the rows, else 1, 2, 3... (as Gradio numbers them)."""
    width = len(rows[0]) if rows and isinstance(rows[0], list) else 0
    own = _own_headers(inp)
    if own and len(own) == width:
        return own
    return [str(n + 1) for n in range(width)]


def _own_headers(inp: AppInput) -> list[Any]:
    default = inp.props.get("value")
    headers = default.get("headers") if isinstance(default, dict) else None
    if not isinstance(headers, list):
        headers = inp.props.get("headers")
    return list(headers) if isinstance(headers, list) else []


# ---------------------------------------------------------------- generated structured values


def suggest_value(inp: AppInput) -> Suggestion | None:
    """A generator for a structured component (None: not one of them)."""
    maker = _MAKERS.get(inp.component)
    return maker(inp) if maker is not None else None


def _dataframe(inp: AppInput) -> Suggestion:
    value = inp.props.get("value")
    default: dict[str, Any] = value if isinstance(value, dict) else {}
    data = default.get("data")
    rows: list[Any] = data if isinstance(data, list) else []
    headers = _own_headers(inp)
    width = len(headers) or _count(inp.props.get("col_count") or inp.props.get("column_count"), 3)
    width = min(max(width, 1), MAX_COLUMNS)
    height = min(max(len(rows), _count(inp.props.get("row_count"), 3), 1), MAX_ROWS)
    types = _column_types(inp, rows, width)
    template = {"headers": headers or [str(n + 1) for n in range(width)],
                "data": [[DATAFRAME_CELL.get(t, "{word}") for t in types] for _ in range(height)],
                "metadata": None}
    return ({"json": template}, f"a table of {height} row(s) x {width} column(s) "
                      f"({', '.join(dict.fromkeys(types))}): {{headers, data, metadata}}")


def _count(value: Any, default: int) -> int:
    """A row_count / column_count: 3, (3, "dynamic") or [3, "fixed"]."""
    if isinstance(value, list | tuple) and value:
        value = value[0]
    return value if isinstance(value, int) and value > 0 else default


def _column_types(inp: AppInput, rows: list[Any], width: int) -> list[str]:
    """Each column's type: the default value's first row, else the declared datatype, else "str"."""
    first = rows[0] if rows and isinstance(rows[0], list) and len(rows[0]) == width else None
    if first is not None:
        return ["bool" if isinstance(c, bool) else "number" if isinstance(c, int | float) else "str"
                for c in first]
    declared = inp.props.get("datatype")
    if isinstance(declared, list) and len(declared) == width:
        return [str(t) for t in declared]
    if isinstance(declared, str) and declared:
        return [declared] * width
    return ["str"] * width


COLOURS = ["#ff0000", "#00ff00", "#0000ff", "#f5a623", "#000000", "#ffffff"]


def _colorpicker(inp: AppInput) -> Suggestion:
    default = inp.props.get("value")
    own = [default] if isinstance(default, str) and default.startswith("#") else []
    return {"choice": {"values": list(dict.fromkeys([*own, *COLOURS]))}}, "a colour, #rrggbb"


def _datetime(inp: AppInput) -> Suggestion:
    values = ["2024-01-01 00:00:00", "2024-06-15 12:30:00", "2025-03-10 08:05:00"]
    if inp.props.get("include_time") is False:
        values = [v.split()[0] for v in values]
    return ({"choice": {"values": values}}, "a date and time, YYYY-MM-DD HH:MM:SS")


def _highlightedtext(inp: AppInput) -> Suggestion:
    token = {"token": "{word}", "class_or_confidence": None}
    return ({"json": [token, {"token": "{word}", "class_or_confidence": "{word}"}, token]},
                      "text as [{token, class_or_confidence}]")


def _model3d(inp: AppInput) -> Suggestion:
    return ({"file": {"kb": [1, 4], "suffix": ".obj"}}, "a 3D model: qbench sends a generated .obj")


def _json(inp: AppInput) -> Suggestion:
    default = inp.props.get("value")
    if default is not None:
        return ({"value": default}, "JSON: qbench sends the component's default value")
    return ({"json": {"text": "{words}", "number": "{int}"}}, "JSON: qbench sends a small object")


_MAKERS = {"dataframe": _dataframe, "colorpicker": _colorpicker, "datetime": _datetime,
           "highlightedtext": _highlightedtext, "model3d": _model3d, "json": _json}


# ---------------------------------------------------------------- uploaded files in their structure


def wrap_file(kind: str | None, file: dict[str, Any], mime: str, version: tuple[int, ...] = ()) -> Any:
    """An uploaded FileData as component `kind` of release `version` takes it (4.x and later)."""
    if kind == "gallery":
        return {"video" if mime.startswith("video/") else "image": file, "caption": None}
    if kind in ("imageeditor", "sketchpad", "paint"):
        return {"background": file, "layers": [file], "composite": file}  # the editor's one drawn layer
    if kind == "multimodaltextbox":
        return {"text": "", "files": [file]}
    if kind == "imageslider":
        return [file, file]
    if kind == "video" and version and version[0] < 6:
        return {"video": file, "subtitles": None}  # 4.x-5.x VideoData; 6.x takes the FileData
    return file


# ---------------------------------------------------------------- event data


def _file_data(name: str, url: bool = False) -> dict[str, Any]:
    """A FileData naming `name` (with `url` where the browser sends one)."""
    file: dict[str, Any] = {"path": name, "orig_name": name, "meta": {"_type": "gradio.FileData"}}
    return {**file, "url": name} if url else file


#: What a browser sends with each kind of event, for a function that reads gr.LikeData, gr.SelectData...
#: (the first message, row or option; the fields each class of gradio/events.py reads).
EVENT_DATA: dict[str, dict[str, Any]] = {
    "like": {"index": 0, "value": "hello", "liked": True},
    "select": {"index": 0, "value": "hello", "selected": True, "row_value": ["hello"],
               "col_value": ["hello"]},
    "example_select": {"index": 0, "value": {"text": "hello", "files": []}},
    "option_select": {"index": 0, "value": "hello"},
    "edit": {"index": 0, "value": "hello", "previous_value": "hi"},
    "retry": {"index": 0, "value": "hello"},
    "undo": {"index": 0, "value": "hello"},
    "key_up": {"key": "a", "input_value": "hello"},
    "copy": {"value": "hello"},
    "delete": _file_data("file.txt"),  # gr.DeletedFileData and gr.DownloadData read the FileData itself
    "download": _file_data("file.txt"),
}
GENERIC_EVENT_DATA = {"index": 0, "value": "hello", "selected": True, "liked": True, "previous_value": "hi",
                      "key": "a", "input_value": "hello"}


PLOTS = {"nativeplot", "lineplot", "barplot", "scatterplot", "plot"}  # 6.x: all three are nativeplot
#: A select's data where the component decides its shape: a plot's range, a gallery's image, a table's cell.
SELECT_BY_KIND: dict[str, dict[str, Any]] = {
    **dict.fromkeys(PLOTS, {"index": [0, 10], "value": [0, 10], "selected": True}),
    "gallery": {"index": 0, "selected": True,
                "value": {"image": _file_data("image.png", url=True), "caption": None}},
    "dataframe": {"index": [0, 0], "value": "hello", "selected": True, "row_value": ["hello"],
                  "col_value": ["hello"]},
    "image": {"index": [10, 10], "value": None, "selected": True},  # the pixel clicked
}


def event_data(dep: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The event data a browser sends for dependency `dep` (None: its function reads none)."""
    if not dep.get("collects_event_data"):
        return None
    kinds = {c.get("id"): c.get("type") for c in (config or {}).get("components", []) if isinstance(c, dict)}
    targets = [t for t in dep.get("targets") or [] if isinstance(t, list | tuple) and len(t) == 2]
    known = [(kinds.get(t[0]), t[1]) for t in targets if t[1] in EVENT_DATA]
    if not known:
        return copy.deepcopy(GENERIC_EVENT_DATA)
    kind, event = known[0]
    if event == "select" and kind in SELECT_BY_KIND:
        return copy.deepcopy(SELECT_BY_KIND[kind])
    return copy.deepcopy(EVENT_DATA[event])


def event_files(data: Any) -> list[dict[str, Any]]:
    """The FileData inside event data, which the caller must upload and name (Gradio reads only its cache)."""
    if isinstance(data, dict):
        if isinstance(data.get("meta"), dict) and data["meta"].get("_type") == "gradio.FileData":
            return [data]
        return [found for value in data.values() for found in event_files(value)]
    if isinstance(data, list):
        return [found for value in data for found in event_files(value)]
    return []


def prop_inputs(config: dict[str, Any], dep: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Input position -> the props of its component, for the dependency's `component_prop_inputs`."""
    positions = dep.get("component_prop_inputs") or []
    components = {c.get("id"): c for c in config.get("components", []) if isinstance(c, dict)}
    inputs = dep.get("inputs") or []
    found: dict[int, dict[str, Any]] = {}
    for position in positions:
        if isinstance(position, int) and 0 <= position < len(inputs):
            props = components.get(inputs[position], {}).get("props")
            found[position] = {k: v for k, v in (props or {}).items() if k != "value"}
    return found
