"""A Blocks app of three events and a chat, as users write them, on every release from 3.x to 6.x.

    <env>/bin/python mix_app.py '{"seen": "/tmp/seen.json"}'   # prints "READY http://127.0.0.1:<port>"

Events (api_name): a (0.05 s), b (0.2 s), c (0.1 s): Gradio's performance guide's three functions,
a and b sharing concurrency_id "gpu" with concurrency_limit 1 from 4.x (3.x has one queue-wide
pool: concurrency_count 3). chat: a gr.ChatInterface whose history lives in the session (a State);
each call adds the number of earlier exchanges it saw to the JSON file `seen` ({"0": n, "1": n...}),
so a test can tell whether a journey's turns reached the app in one session. picture: an image
output (a file clients fetch from 4.x; inline base64 in 3.x). Imports only gradio and
the standard library (qbench is not installed in the per-release envs).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import Counter
from typing import Any

SEEN: Counter[int] = Counter()
LOCK = threading.Lock()
OUT: list[str] = []


def a(text: str) -> str:
    time.sleep(0.05)
    return text


def b(text: str) -> str:
    time.sleep(0.2)
    return text


def c(text: str) -> str:
    time.sleep(0.1)
    return text


def picture(text: str) -> Any:
    """A 256x256 RGB image (an output file: fetched by clients from 4.x, inline base64 in 3.x)."""
    import numpy as np

    rng = np.random.default_rng(len(text))
    return rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)


def chat(message: str, history: list[Any]) -> str:
    exchanges = len(history) // 2 if history and isinstance(history[0], dict) else len(history)
    with LOCK:
        SEEN[exchanges] += 1
        if OUT:
            with open(OUT[0], "w") as fh:
                json.dump({str(k): v for k, v in SEEN.items()}, fh)
    return f"reply to {message!r} after {exchanges} exchange(s)"


def build() -> Any:
    import gradio as gr

    major = int(gr.__version__.split(".")[0])
    gpu = {"concurrency_limit": 1, "concurrency_id": "gpu"} if major >= 4 else {}
    with gr.Blocks() as demo:
        text_in, text_out = gr.Textbox(), gr.Textbox()
        gr.Button("a").click(a, text_in, text_out, api_name="a", **gpu)
        gr.Button("b").click(b, text_in, text_out, api_name="b", **gpu)
        gr.Button("c").click(c, text_in, text_out, api_name="c",
                             **({"concurrency_limit": 1} if major >= 4 else {}))
        gr.Button("picture").click(picture, text_in, gr.Image(), api_name="picture")
        gr.ChatInterface(chat)
    demo.queue(**({"concurrency_count": 3} if major < 4 else {}))
    return demo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(payload: str) -> None:
    options = json.loads(payload or "{}")
    if options.get("seen"):
        OUT.append(options["seen"])
    demo = build()
    for attempt in range(5):
        port = free_port()
        try:
            demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
            break
        except OSError:
            if attempt == 4:
                raise
    print(f"READY http://127.0.0.1:{port}", flush=True)
    sys.stdin.read()
    demo.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "{}")
