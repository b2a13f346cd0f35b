"""A Gradio chat app as people write it (gr.ChatInterface, a streamed reply of ~150 ms, four at a time),
for soak runs (bench/RESULTS.md, "Gradio's memory per request"):

    qbench soak examples/soak/chat.yaml --app examples/soak/chat_app.py --duration 180

Every request qbench sends is a new session, as a new visitor's would be.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import gradio as gr


def reply(message: str, history: list[dict[str, str]]) -> Iterator[str]:
    text = ""
    for word in f"You said: {message}. That is noted.".split():
        time.sleep(0.025)
        text += word + " "
        yield text


demo = gr.ChatInterface(reply)
demo.queue(default_concurrency_limit=4)
demo.launch()
