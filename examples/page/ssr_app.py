"""A Gradio 6 chat app served with server-side rendering (SSR), as people deploy it to Spaces: Node
renders the page and proxies everything to Python; `num_workers` (6.15+) adds static-file worker
processes behind that proxy. Sweep them with page visits beside the chat:

    qbench sweep examples/page/page_visits.yaml --app examples/page/ssr_app.py --grid num_workers=0,2

Needs Node on PATH (Gradio asks for 24+; 20 serves it here) or GRADIO_NODE_PATH.
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
demo.launch(ssr_mode=True)
