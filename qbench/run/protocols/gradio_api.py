"""A Gradio app's API from its /config and /info -> `AppEndpoint`s (`app_endpoints`), the payload input
that fits each input (`suggest`) and what it accepts in words (`qbench init`, the input-count error)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from qbench.run.json_values import json_number
from qbench.run.protocols.gradio_schema import NUMBERS_AS_TEXT, api_suggestion
from qbench.run.protocols.gradio_values import suggest_value, wire_example
from qbench.run.scenario.payloads import FILE_CONTENT

DEFAULT_STREAM_EVERY_S = 0.5  # Gradio's own default for .stream(stream_every=...)
NOT_API = {"state"}  # component types whose inputs are not part of the API (sent as null)
FILE_COMPONENTS = {"image", "audio", "video", "file", "model3d", "gallery", "uploadbutton", "imageeditor",
                   "annotatedimage", "simpleimage", "dicom"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tiff"}
AUDIO_SUFFIXES = {".wav", ".mp3", ".flac", ".ogg", ".m4a"}
EDITORS = {"imageeditor", "sketchpad", "paint"}
DEFAULT_IMAGE = {"width": 224, "height": 224, "format": "jpeg"}
CLASS_NAMES = {"checkboxgroup": "CheckboxGroup", "multimodaltextbox": "MultimodalTextbox",
               "colorpicker": "ColorPicker", "datetime": "DateTime", "uploadbutton": "UploadButton",
               "highlightedtext": "HighlightedText", "imageeditor": "ImageEditor", "dataframe": "Dataframe"}


@dataclass(frozen=True)
class AppInput:
    """One API input: its component type, label, /config props, /info parameter and the app's examples."""

    component: str
    label: str
    props: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    examples: tuple[Any, ...] = ()

    @property
    def class_name(self) -> str:
        """The component's class name as users write it (Slider, CheckboxGroup)."""
        return CLASS_NAMES.get(self.component, self.component.capitalize())

    @property
    def choices(self) -> list[Any] | None:
        """The values a Dropdown, Radio or CheckboxGroup accepts (None: no choices)."""
        raw = self.props.get("choices")
        if not isinstance(raw, list):
            return None
        return [c[1] if isinstance(c, list | tuple) and len(c) == 2 else c for c in raw]


@dataclass(frozen=True)
class AppEndpoint:
    """A named dependency of the app: its api_name, fn_index (the dependency id) and API inputs."""

    api_name: str
    fn_index: int
    inputs: tuple[AppInput, ...]
    public: bool  # listed by /info (Gradio's "Use via API" page)
    generator: bool = False  # streams its output (types.generator)
    stream_every: float | None = None  # a .stream() event (streamed inputs): seconds between chunks
    time_limit: float | None = None  # a .stream() event's time limit (s), None when it has none


@dataclass(frozen=True)
class Suggestion:
    """The payload input for one API input and the comment that says why."""

    spec: dict[str, Any]  # one payload input, e.g. {"number": {"min": 1, "max": 10, "step": 1}}
    note: str  # what the input accepts, in words
    alternative: dict[str, Any] | None = None  # the generator an `example` input replaces
    fill_in: bool = False  # the user must edit it before it runs (e.g. a folder of videos)
    # example values are {"file": ref} on the server, to download first: an absolute URL, or a path
    # relative to the API root ("file=/tmp/gradio/.../cat.png")
    remote_files: bool = False


# ---------------------------------------------------------------- reading /config and /info


def app_endpoints(config: dict[str, Any], info: dict[str, Any] | None = None) -> list[AppEndpoint]:
    """Every dependency with an api_name, public ones (those /info lists) first, in /config order."""
    components = {c.get("id"): c for c in config.get("components", []) if isinstance(c, dict)}
    named = (info or {}).get("named_endpoints") or {}
    examples = _examples_by_component(components.values())
    found: list[AppEndpoint] = []
    for index, dep in enumerate(d for d in config.get("dependencies", []) if isinstance(d, dict)):
        name = dep.get("api_name")
        if not isinstance(name, str) or not name:
            continue
        params = (named.get("/" + name) or {}).get("parameters") or []
        inputs = api_inputs(components, dep, examples, params)
        public = ("/" + name) in named if named else _declared_public(dep)
        generator = bool((dep.get("types") or {}).get("generator"))
        stream = dep.get("connection") == "stream"
        every = float(dep.get("stream_every") or DEFAULT_STREAM_EVERY_S) if stream else None
        limit = dep.get("time_limit") if stream else None
        found.append(AppEndpoint(name, int(dep.get("id", index)), tuple(inputs), public, generator,
                                 every, limit))
    return sorted(found, key=lambda e: not e.public)


def _declared_public(dep: dict[str, Any]) -> bool:
    """Without /info: what /config says (show_api up to 5.x, api_visibility from 6.x)."""
    return dep.get("show_api", True) is not False and dep.get("api_visibility", "public") == "public"


def api_inputs(components: dict[Any, dict[str, Any]], dep: dict[str, Any],
               examples: dict[Any, tuple[Any, ...]] | None = None,
               params: list[dict[str, Any]] | None = None) -> list[AppInput]:
    """The dependency's API inputs (State and skip_api components left out), in order."""
    inputs: list[AppInput] = []
    for cid in dep.get("inputs", []):
        comp = components.get(cid, {})
        if comp.get("skip_api") or comp.get("type") in NOT_API:
            continue
        raw = comp.get("props")
        props: dict[str, Any] = raw if isinstance(raw, dict) else {}
        label = str(props.get("label") or "")
        inputs.append(AppInput(str(comp.get("type", "")), label, props, {}, (examples or {}).get(cid, ())))
    if params and len(params) == len(inputs):
        inputs = [AppInput(i.component, _label(i, p), i.props, p, i.examples)
                  for i, p in zip(inputs, params, strict=True)]
    return inputs


def _label(inp: AppInput, param: dict[str, Any]) -> str:
    """The input's name in comments: a gradio.Server parameter's name, else the label, else /info's."""
    if inp.component == "api" and param.get("parameter_name"):
        return str(param["parameter_name"])
    return inp.label or str(param.get("label") or param.get("parameter_name") or "")


def _examples_by_component(components: Any) -> dict[Any, tuple[Any, ...]]:
    """Component id -> its column of the app's examples (a column with an empty cell left out)."""
    columns: dict[Any, tuple[Any, ...]] = {}
    for comp in components:
        props = comp.get("props") or {}
        if comp.get("type") != "dataset" or not isinstance(props.get("samples"), list):
            continue
        ids = props.get("component_ids") or []
        if any(isinstance(row, list) and len(row) != len(ids) for row in props["samples"]):
            continue  # rows that do not line up with the inputs: no column is sure
        for k, cid in enumerate(ids):
            rows = [row[k] if isinstance(row, list) and k < len(row) else None for row in props["samples"]]
            if cid not in columns and rows and all(v is not None for v in rows):
                columns[cid] = tuple(rows)
    return columns


# ---------------------------------------------------------------- the generator for each input


def suggest(inp: AppInput, version: tuple[int, ...] = ()) -> Suggestion:
    """The payload input that fits `inp` in release `version` ((): unknown); the app's own examples win."""
    made = _generated(inp, version)
    files = _example_files(inp)
    if files:
        return Suggestion({"example": {"values": files}}, f"{made.note}; the app's own example files",
                          made.spec, remote_files=True)
    own = made.fill_in or inp.component == "video"
    default = _file_refs(inp, (inp.props.get("value"),)) if own else []
    if default:  # a real video, or what qbench cannot make: the component's default file, as the UI sends it
        return Suggestion({"example": {"values": default}}, f"a {inp.class_name}: the component's default "
                          "file, as the UI sends it unedited", made.spec, remote_files=True)
    examples = _usable_examples(inp)
    if examples and not made.fill_in:
        return Suggestion({"example": {"values": list(examples)}},
                          f"{made.note}; the app's own examples", made.spec)
    return made


def _example_files(inp: AppInput) -> list[dict[str, str]]:
    return _file_refs(inp, inp.examples)


def _file_refs(inp: AppInput, values: tuple[Any, ...]) -> list[dict[str, str]]:
    """`values` of a file input as {"file": ref} to download ([] when not all are files)."""
    if inp.component not in FILE_COMPONENTS or not values:
        return []
    refs = []
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("url"), str) and value["url"].startswith("http"):
            refs.append({"file": value["url"]})  # 4.x+: FileData with the URL that serves it
        elif isinstance(value, dict) and isinstance(value.get("path"), str):
            refs.append({"file": "file=" + value["path"]})
        elif isinstance(value, str) and not value.startswith("data:"):
            refs.append({"file": value if value.startswith("http") else "file=" + value})  # 3.x: a path
        else:
            return []
    return refs


def _usable_examples(inp: AppInput) -> tuple[Any, ...]:
    """The examples that can be sent as the API takes them, () when not all can."""
    if not inp.examples or inp.component in FILE_COMPONENTS | {"multimodaltextbox", "chatbot"}:
        return ()
    if inp.component in ("number", "slider") and not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in inp.examples):
        return ()
    choices = inp.choices
    if choices is not None and inp.component in ("dropdown", "radio") and not inp.props.get("multiselect"):
        if not all(v in choices for v in inp.examples):
            return ()
    elif choices is not None and inp.component in ("dropdown", "checkboxgroup"):  # lists of choices
        if not all(isinstance(v, list) and all(c in choices for c in v) for v in inp.examples):
            return ()
    values = tuple(wire_example(inp, v) for v in inp.examples)
    return values if all(v is not None for v in values) else ()


def _generated(inp: AppInput, version: tuple[int, ...]) -> Suggestion:
    structured = suggest_value(inp)
    if structured is not None:
        return Suggestion(*structured)
    kind = inp.component
    maker = _MAKERS.get(kind)
    if maker is not None:
        return maker(inp, version)
    return _fallback(inp)


#: Words in a Textbox's label, placeholder or info that ask for a number (the app likely calls int()).
NUMBER_HINT = re.compile(r"\b(numbers?|seconds?|minutes?|hours?|duration|integer|how many|count|age|year|"
                         r"amount|quantity|steps|digits?)\b", re.I)


def _textbox(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    asks = " ".join(str(inp.props.get(k) or "") for k in ("label", "placeholder", "info"))
    default = str(inp.props.get("value") or "").strip()
    if inp.component == "textbox" and (NUMBER_HINT.search(asks) or re.fullmatch(r"-?\d+(\.\d+)?", default)):
        values = list(dict.fromkeys([*([default] if default else []), *NUMBERS_AS_TEXT]))
        why = "its label asks for one" if NUMBER_HINT.search(asks) else f"its default is {default!r}"
        return Suggestion({"choice": {"values": values}}, f"a number as text ({why})")
    lines = inp.props.get("lines") or 1
    low, high = (20, 100) if isinstance(lines, int) and lines > 1 else (5, 20)
    limit = inp.props.get("max_length")
    note = "text"
    if isinstance(limit, int) and limit > 0:
        high = max(1, min(high, limit // 9))  # qbench's words are at most 8 characters, plus a space
        low = min(low, high)
        note = f"text of at most {limit} characters"
    return Suggestion({"text": {"words": [low, high]}}, note)


def _number(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    props = inp.props
    low, high, step = props.get("minimum"), props.get("maximum"), props.get("step")
    integer = props.get("precision") == 0 or (inp.info.get("type") or {}).get("type") == "integer"
    spec: dict[str, Any] = {}
    if isinstance(low, int | float) and isinstance(high, int | float) and low <= high:
        spec = {"min": low, "max": high}
        note = f"a number from {low:g} to {high:g}"
    else:  # a Number without a range: 100 wide from its one bound, else from its default to twice it
        value = props.get("value")
        start = json_number(value) or 0.0
        end = max(start * 2, start / 2) if start and low is None and high is None else start + 100
        if isinstance(low, int | float):
            start, end = float(low), float(low) + 100
        elif isinstance(high, int | float):
            start, end = float(high) - 100, float(high)
        spec = {"min": _tidy(min(start, end)), "max": _tidy(max(start, end))}
        note = f"a number (the app declares no range; qbench sends {spec['min']:g} to {spec['max']:g})"
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        step_whole = isinstance(step, int) or (isinstance(step, float) and step.is_integer())
        integer = integer or (inp.component == "number" and whole and step_whole and value is not None)
    if inp.component == "slider" and isinstance(step, int | float) and step > 0:
        spec["step"] = _tidy(step)
        note += f", step {step:g}"
    if integer:
        spec["integer"] = True
        note += ", whole"
    return Suggestion({"number": spec}, note)


def _tidy(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _choice(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    values = inp.choices or []
    if not values:
        return _fallback(inp)
    shown = ", ".join(str(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
    many = inp.component == "checkboxgroup" or bool(inp.props.get("multiselect"))
    if not many:
        return Suggestion({"choice": {"values": values}}, f"one of {shown}")
    most = inp.props.get("max_choices")
    high = min(len(values), most) if isinstance(most, int) and most > 0 else len(values)
    return Suggestion({"choice": {"values": values, "pick": [1, high]}}, f"a list of {shown} (1 to {high})")


def _checkbox(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    return Suggestion({"boolean": {"true_share": 0.5}}, "true or false")


def _image(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    kind = inp.props.get("type")
    image = dict(DEFAULT_IMAGE)
    if inp.component in EDITORS:
        image["format"] = "png"  # the editor's layers are RGBA: Gradio saves them under the upload's suffix
    what = {"gallery": "images for a gallery", "imageslider": "an image pair"}.get(inp.component, "an image")
    return Suggestion({"image": image},
                      f"{what} (the app receives it as {kind}; set the size your users upload)"
                      if kind else f"{what} (set the size your users upload)")


def _audio(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    low, high = inp.props.get("min_length"), inp.props.get("max_length")
    seconds = 2.0
    if isinstance(high, int | float) and high > 0:
        seconds = min(seconds, float(high))
    if isinstance(low, int | float) and low > seconds:
        seconds = float(low)
    note = "audio"
    if isinstance(low, int | float) or isinstance(high, int | float):
        note += f" of {low or 0:g} to {high if high is not None else 'any':} s"
    return Suggestion({"audio": {"seconds": _tidy(seconds), "sample_rate": 16000}}, note + " (WAV, mono)")


def _file(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    types = [str(t).lower() for t in inp.props.get("file_types") or []]
    many = inp.props.get("file_count") in ("multiple", "directory")
    accepted = f"files of type {', '.join(types)}" if types else "any file"
    if not types or any(t in ("text", ".txt", ".csv", ".md", ".json", "file") for t in types):
        suffix = next((t for t in types if t.startswith(".")), ".txt")
        spec: dict[str, Any] = {"kb": [4, 64], "suffix": suffix}
        if many:
            spec["count"] = [1, 3]
        return Suggestion({"file": spec}, f"{accepted}{' (several)' if many else ''}; qbench sends "
                          "generated text files: `files: {dir: samples/}` sends your own")
    if not many and ("image" in types or set(types) & IMAGE_SUFFIXES):
        image = dict(DEFAULT_IMAGE)
        formats = [f for f in (".jpg", ".jpeg", ".png", ".webp") if f in types]
        if formats and "image" not in types:  # only some suffixes: send one of them
            image["format"] = {".jpg": "jpeg", ".jpeg": "jpeg"}.get(formats[0], formats[0].lstrip("."))
        return Suggestion({"image": image}, f"{accepted}; qbench sends generated images")
    if not many and ("audio" in types or set(types) & AUDIO_SUFFIXES):
        return Suggestion({"audio": {"seconds": 2, "sample_rate": 16000}}, f"{accepted}; qbench sends WAV")
    suffix = _suffix(types, many)
    spec = {"kb": [4, 64], "suffix": suffix}
    if many:
        spec["count"] = [1, 3]
    if suffix in FILE_CONTENT:
        return Suggestion({"file": spec}, f"{accepted}: qbench sends generated {suffix} files")
    return Suggestion({"file": spec}, f"{accepted}: qbench sends text files named *{suffix}; your app may "
                      "reject them: send real ones with `files: {dir: samples/}`")


def _suffix(types: list[str], many: bool) -> str:
    """A generated file's suffix: the first declared one, a kind's own (image: .png), else .bin."""
    for kind in types:
        if re.fullmatch(r"(\.[A-Za-z0-9]{1,10}){1,3}", kind):
            return kind
    kinds = {"image": ".png", "audio": ".wav", "video": ".avi", "text": ".txt"}
    return next((kinds[t] for t in types if t in kinds), ".bin")


def _chatbot(inp: AppInput, version: tuple[int, ...]) -> Suggestion:
    kind = inp.props.get("type")
    if version and version[0] >= 6:
        kind = "parts"  # 6.x: only messages, each content a list of parts
    elif kind not in ("messages", "tuples"):
        kind = "tuples"  # the default before 6.x
    return Suggestion({"chat": {"turns": [0, 3], "words": [5, 20], "format": kind}},
                      f"the conversation so far ({kind})")


def _multimodal(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    return Suggestion({"json": {"text": "{words}", "files": []}}, "a message: text and files (none sent)")


def _video(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    return Suggestion({"file": {"kb": [16, 32], "suffix": ".avi"}},
                      "a video: qbench sends a generated 1 s motion-JPEG .avi (64x64); "
                      "`files: {dir: videos/}` sends your own")


def _api(inp: AppInput, _: tuple[int, ...]) -> Suggestion:
    made = api_suggestion(inp.info)
    return Suggestion(*made) if made is not None else _fallback(inp)


def _fallback(inp: AppInput) -> Suggestion:
    """A constant: the component's default value, else Gradio's example for its type."""
    value = inp.props.get("value")
    if value is None:
        value = inp.info.get("example_input")
    if isinstance(value, dict) and ("path" in value or "url" in value):
        return Suggestion({"files": {"dir": "samples/"}},
                          f"a {inp.class_name} file: FILL IN a folder of samples", fill_in=True)
    return Suggestion({"value": value}, f"a {inp.class_name} value: qbench sends this one; check it")


_MAKERS = {
    "textbox": _textbox, "code": _textbox, "number": _number, "slider": _number,
    "dropdown": _choice, "radio": _choice, "checkboxgroup": _choice, "checkbox": _checkbox,
    "image": _image, "imageeditor": _image, "sketchpad": _image, "paint": _image, "audio": _audio,
    "gallery": _image, "simpleimage": _image, "imageslider": _image,
    "file": _file, "uploadbutton": _file, "chatbot": _chatbot, "multimodaltextbox": _multimodal,
    "video": _video, "api": _api,
}


# ---------------------------------------------------------------- in words


def describe(inp: AppInput) -> str:
    """`Slider 'Size'`: the component and its label."""
    return f"{inp.class_name} '{inp.label}'" if inp.label else inp.class_name


def flow(spec: dict[str, Any]) -> str:
    """One payload input as a YAML flow line: `number: {min: 1, max: 10, step: 1}`."""
    text = yaml.safe_dump(spec, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True)
    return text.strip().removeprefix("{").removesuffix("}")


def expected_inputs(endpoint: AppEndpoint, version: tuple[int, ...] = ()) -> str:
    """The endpoint's inputs, one per line, each with what it accepts and the YAML line that fits."""
    lines = []
    for n, inp in enumerate(endpoint.inputs, 1):
        made = suggest(inp, version)
        lines.append(f"  {n}. {describe(inp)}: {made.note}\n       - {flow(made.spec)}")
    return "\n".join(lines)
