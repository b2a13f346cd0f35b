"""A Gradio app as people write it (4.x and later): its settings are hard-coded and it knows nothing of
qbench. `qbench sweep --app examples/my_app.py` tunes it as it is (docs/tuning-your-app.md).

    python examples/my_app.py [--delay 0.2]     # serves on http://127.0.0.1:7860

`respond` stands for a model call: it sleeps `--delay` seconds (default 0.2) and echoes its input.
"""

from __future__ import annotations

import argparse
import time

import gradio as gr

parser = argparse.ArgumentParser(description="An echo 'model' behind Gradio's queue.")
parser.add_argument("--delay", type=float, default=0.2, help="seconds per call")
args = parser.parse_args()


def respond(message: str) -> str:
    time.sleep(args.delay)
    return message


with gr.Blocks() as demo:
    box = gr.Textbox(label="message")
    answer = gr.Textbox(label="answer")
    gr.Button("send").click(respond, box, answer, api_name="respond")

demo.queue(default_concurrency_limit=4, max_size=100)
demo.launch(server_port=7860)
