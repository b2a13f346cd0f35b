"""A microphone app of `.stream()` events, as users write them, on every release with streamed inputs
(5.0 onwards).

    <env>/bin/python stream_app.py '{}'   # prints "READY http://127.0.0.1:<port>"

Events (api_name): level, the loudness of each 0.2 s chunk (20 ms of work, 2 streams at a time,
time_limit 30 s); short, the same with time_limit 1 s. Imports only gradio, numpy and the standard
library (qbench is not installed in the per-release envs).
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Any

import gradio as gr
import numpy as np


def level(chunk: Any, count: int | None) -> tuple[str, int]:
    sample_rate, frames = chunk
    time.sleep(0.02)
    count = (count or 0) + 1
    return f"{np.abs(frames).mean():.1f} after {count} chunks", count


def heard(chunk: Any) -> str:
    return "heard"


def build() -> gr.Blocks:
    with gr.Blocks() as demo:
        mic = gr.Audio(sources=["microphone"], streaming=True, type="numpy")
        loudness = gr.Textbox()
        count = gr.State()
        mic.stream(level, [mic, count], [loudness, count], stream_every=0.2, time_limit=30,
                   concurrency_limit=2, api_name="level")
        short = gr.Audio(sources=["microphone"], streaming=True)
        said = gr.Textbox()
        short.stream(heard, short, said, stream_every=0.2, time_limit=1, api_name="short")
    return demo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
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
    main()
