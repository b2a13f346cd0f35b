"""A tiny Gradio app that runs on every release from 3.x to 6.x, started from a per-release env.

    <env>/bin/python app.py '{"max_size": null}'    # prints "READY http://127.0.0.1:<port>"
    <env>/bin/python app.py '{"auth": [["u", "p"]]}'  # launched with auth= (Gradio's login)
    <env>/bin/python app.py '{"mount": "/demo"}'      # gr.mount_gradio_app under /demo (uvicorn; 4.x+)
    <env>/bin/python app.py '[{}, {"max_size": 1}]'   # one app per options, one READY line each
    QBENCH_PORT=7861 QBENCH_CONCURRENCY_COUNT=2 <env>/bin/python app.py   # as `qbench sweep --launch`
    QBENCH_APP_AUTH=u:p QBENCH_PORT=7861 <env>/bin/python app.py          # the same, with auth=

Endpoints (api_name): echo (plain), sleep (0.3 s), long (a generator of 100 values 0.1 s apart,
for timeouts and cancels), stream (a generator of 4 values), batch (batch=True, max_batch_size=4),
fail (raises), image (an Image input, answers "<width>x<height>"), work (0.2 s, the queue's default
concurrency), slow_work (0.6 s, the same: long enough that jobs started together overlap for most of
it, however late a busy machine's dispatcher starts them). sleep, long and batch run one at a time:
concurrency_limit=1 from 4.x; 3.x has only the queue-wide concurrency_count, which is then 1.

Options (the JSON argument): max_size; concurrency (3.x concurrency_count, default 1; 4.x and later
default_concurrency_limit, default 4); max_batch_size (of `batch`, default 4); batch_sleep (seconds
per `batch` call, default 0.3). Started by
`qbench sweep --launch` (QBENCH_PORT set), the knobs come from QBENCH_CONCURRENCY_COUNT,
QBENCH_DEFAULT_CONCURRENCY_LIMIT, QBENCH_MAX_BATCH_SIZE and QBENCH_MAX_SIZE, it listens on
QBENCH_PORT and serves until it is killed; otherwise it serves until its stdin closes. Imports only
gradio and the standard library: qbench is not installed in the per-release envs.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

SLEEP_S, CHUNKS, LONG_CHUNKS = 0.3, 4, 100
BATCH_SLEEP_S = [0.3]  # set from the options before the app is built


def echo(text: str) -> str:
    return text


def sleep(text: str) -> str:
    time.sleep(SLEEP_S)
    return text


def long(text: str) -> Any:
    for i in range(LONG_CHUNKS):
        time.sleep(0.1)
        yield f"{text} {i}"


def stream(text: str) -> Any:
    for i in range(CHUNKS):
        if i:
            time.sleep(0.05)
        yield text + "".join(f" {k}" for k in range(1, i + 1))


def batch(texts: list[str]) -> list[list[str]]:
    time.sleep(BATCH_SLEEP_S[0])
    return [[t.upper() for t in texts]]


def fail(text: str) -> str:
    raise ValueError(f"synthetic failure for {text!r}")


def image(img: Any) -> str:
    return f"{img.width}x{img.height}"


def work(text: str) -> str:
    time.sleep(0.2)
    return text


def slow_work(text: str) -> str:
    time.sleep(0.6)
    return text


def build(max_size: int | None, concurrency: int | None = None, max_batch_size: int = 4) -> Any:
    import gradio as gr

    major = int(gr.__version__.split(".")[0])
    with gr.Blocks() as demo:
        text_in, text_out, img_in = gr.Textbox(), gr.Textbox(), gr.Image(type="pil")
        for fn in (echo, sleep, long, stream, fail):
            limit = {"concurrency_limit": 1} if major >= 4 and fn in (sleep, long) else {}
            gr.Button(fn.__name__).click(fn, text_in, text_out, api_name=fn.__name__, **limit)
        one = {"concurrency_limit": 1} if major >= 4 else {}
        gr.Button("batch").click(batch, text_in, text_out, api_name="batch", batch=True,
                                 max_batch_size=max_batch_size, **one)
        gr.Button("image").click(image, img_in, text_out, api_name="image")
        gr.Button("work").click(work, text_in, text_out, api_name="work")
        gr.Button("slow_work").click(slow_work, text_in, text_out, api_name="slow_work")
    if major >= 4:
        demo.queue(max_size=max_size, default_concurrency_limit=concurrency or 4)
    else:
        demo.queue(max_size=max_size, concurrency_count=concurrency or 1)
    return demo


def launched_options() -> dict[str, Any]:
    """The knobs `qbench sweep --launch` passes as QBENCH_<KNOB> variables."""
    def number(name: str) -> int | None:
        value = os.environ.get(f"QBENCH_{name}")
        return None if value is None or value.lower() in ("none", "null") else int(value)

    return {"max_size": number("MAX_SIZE"),
            "concurrency": number("CONCURRENCY_COUNT") or number("DEFAULT_CONCURRENCY_LIMIT"),
            "max_batch_size": number("MAX_BATCH_SIZE") or 4}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(payload: str) -> None:
    if "QBENCH_PORT" in os.environ:  # started by `qbench sweep --launch`
        demo = build(**launched_options())
        port = int(os.environ["QBENCH_PORT"])
        user, _, password = os.environ.get("QBENCH_APP_AUTH", "").partition(":")  # "user:password"
        auth = [(user, password)] if user else None
        demo.launch(
            server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, auth=auth
        )
        threading.Event().wait()  # until the sweep kills the process group
        return
    options = json.loads(payload or "{}")
    # a list: several apps in this one process (each its own Blocks, queue and server; one import)
    started = []
    for one in options if isinstance(options, list) else [options]:
        BATCH_SLEEP_S[0] = float(one.get("batch_sleep", BATCH_SLEEP_S[0]))
        url, stop = start(one)
        print(f"READY {url}", flush=True)
        started.append(stop)
    sys.stdin.read()
    for stop in started:
        stop()


def launch(demo: Any, auth: Any) -> int:
    """demo.launch() on a free port, in the background: the port."""
    for attempt in range(5):
        port = free_port()
        try:
            demo.launch(
                server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, auth=auth
            )
            return port
        except OSError:  # the port was taken between probe and bind
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def start_mounted(demo: Any, path: str, auth: Any) -> tuple[str, Callable[[], None]]:
    """Start uvicorn serving `demo` under `path` (gr.mount_gradio_app) in a thread: its URL, its stop."""
    import gradio as gr
    import uvicorn
    from fastapi import FastAPI

    app = gr.mount_gradio_app(FastAPI(), demo, path=path, **({"auth": auth} if auth else {}))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)

    return f"http://127.0.0.1:{port}{path}", stop


def start(options: dict[str, Any]) -> tuple[str, Callable[[], None]]:
    """The app for `options` (max_size, concurrency, max_batch_size, auth, mount) started in the
    background of this process (beside others: components_app.py): its URL, and how to stop it."""
    demo = build(options.get("max_size"), options.get("concurrency"), options.get("max_batch_size", 4))
    auth = [tuple(pair) for pair in options["auth"]] if options.get("auth") else None
    if options.get("mount"):
        return start_mounted(demo, options["mount"], auth)
    return f"http://127.0.0.1:{launch(demo, auth)}", demo.close


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "{}")
