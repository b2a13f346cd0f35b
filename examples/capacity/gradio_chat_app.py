"""A Gradio chat app as people write it: gr.ChatInterface, a streamed reply of ~130 ms, four at a time.

    python examples/capacity/gradio_chat_app.py --port 7860 &
    qbench capacity examples/capacity/gradio_chat.yaml --target http://127.0.0.1:7860

`--max-size N` caps Gradio's queue (`demo.queue(max_size=N)`), as `qbench capacity` may advise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import gradio as gr

WORDS = "Thanks for asking. Here is my answer to that".split()


def reply(message: str, history: list[dict[str, str]]) -> Iterator[str]:
    text = ""
    for word in WORDS:  # 10 words, 13 ms each: ~130 ms of "model" per reply
        time.sleep(0.013)
        text += word + " "
        yield text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--max-size", type=int, default=None)
    args = parser.parse_args()
    demo = gr.ChatInterface(reply)
    demo.queue(default_concurrency_limit=4, max_size=args.max_size)
    demo.launch(server_name="127.0.0.1", server_port=args.port)


if __name__ == "__main__":
    main()
