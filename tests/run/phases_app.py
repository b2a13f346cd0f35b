"""Two small Gradio apps as users write them, for the server-phase tests: `python phases_app.py image`
(an Interface, image in, image out) or `python phases_app.py chat` (a streaming ChatInterface).
Started by qbench's app launcher (qbench.tune.servers.app_process), which sets GRADIO_PROFILING=1 and the
port."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr
import numpy as np


def flip(image: np.ndarray) -> np.ndarray:
    return np.asarray(image)[:, ::-1]


def echo(message: str, history: list[Any]) -> Iterator[str]:
    reply = f"Echo: {message}"
    for i in range(1, 5):
        time.sleep(0.005)
        yield reply[: len(reply) * i // 4]


if __name__ == "__main__":
    if sys.argv[1] == "image":
        demo: gr.Blocks = gr.Interface(flip, gr.Image(), gr.Image(), api_name="flip")
    else:
        demo = gr.ChatInterface(echo, api_name="chat")
    demo.launch()
