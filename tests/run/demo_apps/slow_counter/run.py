"""A generator that takes longer than a short run: one output every half second for a minute."""

import time
from collections.abc import Iterator

import gradio as gr


def count(start: float) -> Iterator[str]:
    for n in range(120):
        time.sleep(0.5)
        yield str(start + n)


demo = gr.Interface(count, gr.Number(), "text", api_name="count")

if __name__ == "__main__":
    demo.launch()
