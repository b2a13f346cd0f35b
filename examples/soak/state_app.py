"""A Gradio app that keeps something per visitor, as people write them: a gr.State of 256 KiB per session
(a chat history, an embedding), four at a time. Gradio keeps the State of the last
`state_session_capacity` sessions, so its memory should grow, then stop: a bound, not a leak.

    python examples/soak/state_app.py 7860 150      # port, state_session_capacity
    qbench soak examples/soak/state.yaml --target http://127.0.0.1:7860 --pid PID --warmup 5

Measured on Gradio 6.10 and 6.31 in bench/RESULTS.md ("Gradio's memory per request").
"""

import os
import sys

import gradio as gr


def remember(text: str, notes: bytes | None) -> tuple[str, bytes]:
    notes = notes or os.urandom(256 * 1024)  # each visitor's session keeps 256 KiB (a history, an embedding)
    return text[::-1], notes


with gr.Blocks() as demo:
    box = gr.Textbox()
    out = gr.Textbox()
    notes = gr.State()
    box.submit(remember, [box, notes], [out, notes], api_name="remember")

demo.queue(default_concurrency_limit=4)
port = int(sys.argv[1]) if len(sys.argv) > 1 else 7860
capacity = int(sys.argv[2]) if len(sys.argv) > 2 else 150  # state_session_capacity (Gradio's default: 10,000)
demo.launch(server_name="127.0.0.1", server_port=port, state_session_capacity=capacity)
