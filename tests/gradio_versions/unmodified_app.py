"""A Gradio app as people write it, for every release from 3.x to 6.x: settings hard-coded, no QBENCH_*.

    <env>/bin/python unmodified_app.py        # serves on 7860, like the app it stands for

`respond` sleeps 0.2 s (a model call) and carries its own concurrency_limit=2 (4.x and later; 3.x has
only the queue-wide concurrency_count, hard-coded to 3 here); the queue's default is 3 (4.x and later);
`shout` is a batch=True function (max_batch_size=2); launch() hard-codes port 7860. `qbench sweep
--app` must reach every one of these settings without the file being changed.
"""

from __future__ import annotations

import time

import gradio as gr

MAJOR = int(gr.__version__.split(".")[0])


def respond(text: str) -> str:
    time.sleep(0.2)
    return text


def shout(texts: list[str]) -> list[list[str]]:
    time.sleep(0.2)
    return [[t.upper() for t in texts]]


with gr.Blocks() as demo:
    box, out = gr.Textbox(), gr.Textbox()
    limit = {"concurrency_limit": 2} if MAJOR >= 4 else {}
    gr.Button("go").click(respond, box, out, api_name="respond", **limit)
    gr.Button("shout").click(shout, box, out, api_name="shout", batch=True, max_batch_size=2)

if MAJOR >= 4:
    demo.queue(default_concurrency_limit=3, max_size=50)
else:
    demo.queue(concurrency_count=3, max_size=50)
demo.launch(server_port=7860)
