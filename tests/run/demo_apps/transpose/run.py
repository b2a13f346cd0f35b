"""A Dataframe with examples (the rows of each example are a bare list of lists, as users write them)."""

import gradio as gr
import numpy as np


def transpose(matrix: np.ndarray) -> np.ndarray:
    return matrix.T


demo = gr.Interface(
    transpose,
    gr.Dataframe(type="numpy", datatype="number", row_count=3, column_count=3),
    "numpy",
    examples=[[[[1, 2, 3], [4, 5, 6]]], [[[1, 0], [0, 1]]]],
    api_name="transpose",
)

if __name__ == "__main__":
    demo.launch()
