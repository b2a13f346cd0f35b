"""A Gradio app with every common input component, written as users write them, on every release 3.x-6.x.

    <env>/bin/python components_app.py    # prints "READY http://127.0.0.1:<port>", serves until stdin closes
    <env>/bin/python components_app.py '[{}, {"app": "app.py", "auth": [["u", "p"]]}]'  # and app.py's

Endpoints (api_name):
    analyze   gr.Interface: Image, Slider(1..10, step 1), Dropdown(fast, slow)
    form      Textbox, Number(0..100, whole), Slider(0..1, step 0.05), Checkbox, CheckboxGroup, Radio,
              Dropdown(multiselect), Audio, File, File(file_count="multiple"); gr.Examples for the
              textbox and the radio
    respond   a Blocks chat: Textbox + Chatbot (the history) in, both out
    chat      gr.ChatInterface
    caption   gr.Interface with examples=: two example images (320x200 and 100x150) and their texts;
              it accepts only those images (so a run shows the example files were sent)
    clip      gr.Interface with a Video input: qbench's generated video, sent as the release takes it
    ask       gr.ChatInterface(multimodal=True): a MultimodalTextbox (5.x and later; `api_name=`)

Each function checks what it receives (types, ranges, steps, choices, files that exist) and raises on
anything a user of the UI could not have sent, so a request with an invalid input is an error in
qbench's records: `qbench init` then `qbench run` with 0 errors means the generators fit the components.
Imports only gradio and the standard library (qbench is not installed in the per-release envs).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

MODES, GROUP, RADIO, MANY = ["fast", "slow"], ["g1", "g2", "g3"], ["r1", "r2"], ["x", "y", "z"]
TUPLES = True  # the Chatbot's history format: tuples before 6.x (their default), messages from 6.x


def check(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"invalid input: {what}")


def on_step(value: float, low: float, step: float) -> bool:
    k = (value - low) / step
    return abs(k - round(k)) < 1e-6


def analyze(img: Any, size: float, mode: str) -> str:
    check(img is not None and img.size[0] > 0, f"image {img!r}")
    check(1 <= size <= 10 and on_step(size, 1, 1), f"size {size!r}")
    check(mode in MODES, f"mode {mode!r}")
    return f"{img.size[0]}x{img.size[1]} {size} {mode}"


def _path(value: Any) -> str:
    """A file input's path: a str (4.x+ filepath), a tempfile wrapper (3.x), or a dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("path") or value.get("name"))
    return str(getattr(value, "name", value))


def form(text: str, n: float, temp: float, flag: bool, group: list[str], radio: str, many: list[str],
         audio: Any, doc: Any, docs: Any) -> str:
    check(isinstance(text, str) and bool(text.strip()), f"text {text!r}")
    check(n is not None and 0 <= n <= 100 and float(n).is_integer(), f"number {n!r}")
    check(temp is not None and 0 <= temp <= 1 and on_step(temp, 0, 0.05), f"slider {temp!r}")
    check(isinstance(flag, bool), f"checkbox {flag!r}")
    check(isinstance(group, list) and set(group) <= set(GROUP), f"checkbox group {group!r}")
    check(radio in RADIO, f"radio {radio!r}")
    check(isinstance(many, list) and 1 <= len(many) and set(many) <= set(MANY), f"multiselect {many!r}")
    check(audio is not None and os.path.exists(_path(audio)), f"audio {audio!r}")
    check(doc is not None and os.path.getsize(_path(doc)) > 0, f"file {doc!r}")
    check(isinstance(docs, list) and len(docs) >= 1 and all(os.path.exists(_path(d)) for d in docs),
          f"files {docs!r}")
    return f"{len(text.split())} words, {n}, {temp}, {flag}, {group}, {radio}, {many}, {len(docs)} files"


def respond(message: str, history: list[Any]) -> tuple[str, list[Any]]:
    check(isinstance(message, str) and bool(message), f"message {message!r}")
    check(isinstance(history, list), f"history {history!r}")
    for turn in history:
        check(isinstance(turn, list | tuple | dict) or hasattr(turn, "content"), f"turn {turn!r}")
    if TUPLES:
        return "", [*history, [message, "ok"]]
    return "", [*history, {"role": "user", "content": message}, {"role": "assistant", "content": "ok"}]


EXAMPLE_SIZES = {(320, 200): "a red square", (100, 150): "a blue square"}


def caption(img: Any, hint: str) -> str:
    check(img is not None and tuple(img.size) in EXAMPLE_SIZES, f"image {getattr(img, 'size', img)!r}")
    check(hint in EXAMPLE_SIZES.values(), f"hint {hint!r}")
    return f"{img.size[0]}x{img.size[1]}: {hint}"


def example_images() -> list[list[str]]:
    """The example rows of `caption`: two images written to a temporary folder."""
    import tempfile

    from PIL import Image

    folder = tempfile.mkdtemp(prefix="qbench-examples-")
    rows = []
    for (w, h), hint in EXAMPLE_SIZES.items():
        path = os.path.join(folder, f"{w}x{h}.png")
        Image.new("RGB", (w, h), (200, 40, 40)).save(path)
        rows.append([path, hint])
    return rows


def ask(message: dict[str, Any], history: list[Any]) -> str:
    check(isinstance(message, dict) and isinstance(message.get("text"), str), f"message {message!r}")
    check(bool(message["text"]) and "{" not in message["text"], f"text {message['text']!r}")
    check(isinstance(message.get("files"), list), f"files {message.get('files')!r}")
    return f"you said {len(message['text'].split())} words"


def clip(video: Any) -> str:
    """A Video input: the file qbench generated (a motion-JPEG .avi), as each release hands it over."""
    path = _path(video)
    check(os.path.isfile(path) and path.endswith(".avi"), f"video {video!r}")
    with open(path, "rb") as f:
        check(f.read(12)[8:12] == b"AVI ", f"video {path!r} is no AVI")
    return f"{os.path.getsize(path)} bytes"


def chat(message: str, history: list[Any]) -> str:
    check(isinstance(message, str) and bool(message), f"message {message!r}")
    return f"you said {len(message.split())} words"


def build() -> Any:
    import gradio as gr

    global TUPLES
    major = int(gr.__version__.split(".")[0])
    TUPLES = major < 6
    number = {"minimum": 0, "maximum": 100} if major >= 4 else {}  # 3.x's Number has no range
    with gr.Blocks() as demo:
        with gr.Tab("analyze"):
            controls = [gr.Image(type="pil"), gr.Slider(1, 10, step=1, value=5, label="Size"),
                        gr.Dropdown(MODES, value="fast", label="Mode")]
            gr.Interface(analyze, controls, "text", api_name="analyze")
        with gr.Tab("form"):
            text = gr.Textbox(label="Prompt", lines=2)
            radio = gr.Radio(RADIO, label="Voice style")
            inputs = [text, gr.Number(label="Steps", precision=0, **number),
                      gr.Slider(0, 1, step=0.05, label="Temperature"), gr.Checkbox(label="Upscale"),
                      gr.CheckboxGroup(GROUP, label="Filters"), radio,
                      gr.Dropdown(MANY, multiselect=True, label="Tags"),
                      gr.Audio(type="filepath", label="Voice"),
                      gr.File(label="Document"), gr.File(file_count="multiple", label="Attachments")]
            out = gr.Textbox()
            gr.Button("go").click(form, inputs, out, api_name="form")
            gr.Examples([["a red bicycle by the sea", "r1"], ["two cats on a sofa", "r2"]], [text, radio])
        with gr.Tab("respond"):
            chatbot, message = gr.Chatbot(label="Conversation"), gr.Textbox(label="Message")
            message.submit(respond, [message, chatbot], [message, chatbot], api_name="respond")
        with gr.Tab("chat"):
            gr.ChatInterface(chat)
        with gr.Tab("caption"):
            gr.Interface(caption, [gr.Image(type="pil"), gr.Textbox(label="Hint")], "text",
                         examples=example_images(), api_name="caption")
        with gr.Tab("clip"):
            gr.Interface(clip, gr.Video(), "text", api_name="clip")
        if major >= 5:
            with gr.Tab("ask"):
                gr.ChatInterface(ask, multimodal=True, api_name="ask")
    return demo.queue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(payload: str) -> None:
    """'{}' or '[{}, {"app": "app.py", ...app.py options}, ...]': this app, then tests/gradio_versions/
    app.py's apps in this same process (each its own Blocks, queue and server; Gradio imported once),
    one READY line each, in that order."""
    others = json.loads(payload)[1:] if payload.startswith("[") else []
    demo = build()
    for attempt in range(5):
        port = free_port()
        try:
            demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
            break
        except OSError:  # the port was taken between probe and bind
            if attempt == 4:
                raise
    print(f"READY http://127.0.0.1:{port}", flush=True)
    stops = []
    for options in others:
        assert options.pop("app") == "app.py", options
        import app as test_app  # this script's folder is on sys.path

        url, stop = test_app.start(options)
        print(f"READY {url}", flush=True)
        stops.append(stop)
    sys.stdin.read()
    for stop in stops:
        stop()
    demo.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "{}")
