"""A Textbox whose label asks for a number: the function calls int() on it."""

import gradio as gr
import numpy as np


def tone(note: int, duration: str) -> tuple[int, np.ndarray]:
    seconds = int(duration)
    t = np.linspace(0, seconds, seconds * 8000)
    return 8000, (10000 * np.sin(2 * np.pi * (220 + 20 * note) * t)).astype(np.int16)


demo = gr.Interface(
    tone,
    [gr.Dropdown(["C", "D", "E"], type="index"), gr.Textbox(value="1", label="Duration in seconds")],
    "audio",
    api_name="tone",
)

if __name__ == "__main__":
    demo.launch()
