"""A Gradio app the startup hook cannot reach: served by uvicorn through gr.mount_gradio_app (4.x and
later), never through Blocks.launch(). Its event hard-codes concurrency_limit=2; it listens on
GRADIO_SERVER_PORT (as a deployment script would). A sweep of concurrency_limit must mark every point
`knobs_not_applied`, never recommend one.
"""

from __future__ import annotations

import os
import time

import gradio as gr
import uvicorn
from fastapi import FastAPI


def respond(text: str) -> str:
    time.sleep(0.2)
    return text


with gr.Blocks() as demo:
    box, out = gr.Textbox(), gr.Textbox()
    gr.Button("go").click(respond, box, out, api_name="respond", concurrency_limit=2)

app = gr.mount_gradio_app(FastAPI(), demo, path="/")
port = int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
