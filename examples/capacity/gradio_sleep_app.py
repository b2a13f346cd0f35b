"""A Gradio app as a user writes it: a 100 ms function behind Gradio's queue, 4 at a time.

    python examples/capacity/gradio_sleep_app.py --port 7860

`--max-size N` caps Gradio's queue (`demo.queue(max_size=N)`), as `qbench capacity` may advise.
"""

from __future__ import annotations

import argparse
import time

import gradio as gr


def reply(message: str) -> str:
    time.sleep(0.1)  # the model
    return message[::-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--max-size", type=int, default=None)
    args = parser.parse_args()
    demo = gr.Interface(reply, "text", "text")
    demo.queue(default_concurrency_limit=4, max_size=args.max_size)
    demo.launch(server_name="127.0.0.1", server_port=args.port)


if __name__ == "__main__":
    main()
