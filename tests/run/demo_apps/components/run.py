"""Components whose values are structured, each checked the way its own function would use it: the
function raises unless every input is what the component's UI would send."""

import datetime

import gradio as gr
import pandas as pd


def check(table, gallery, editor, model, colour, when, marked, data, message):
    assert isinstance(table, pd.DataFrame) and table.shape[0] >= 1, table
    assert isinstance(gallery, list) and gallery and all(isinstance(p, str) for p, _ in gallery), gallery
    assert isinstance(editor, dict) and editor["background"] is not None, editor
    assert isinstance(model, str) and model.endswith(".obj"), model
    assert isinstance(colour, str) and colour.startswith("#") and len(colour) == 7, colour
    assert isinstance(when, float), when  # a timestamp (type="timestamp")
    datetime.datetime.fromtimestamp(when)
    assert isinstance(marked, list) and all("token" in t for t in marked), marked
    assert isinstance(data, dict | list), data
    assert isinstance(message, dict) and isinstance(message["text"], str), message
    return f"{table.shape} {len(gallery)} {colour}"


demo = gr.Interface(
    check,
    [
        gr.Dataframe(headers=["name", "count"], datatype=["str", "number"]),
        gr.Gallery(),
        gr.ImageEditor(type="filepath"),
        gr.Model3D(),
        gr.ColorPicker(),
        gr.DateTime(type="timestamp"),
        gr.HighlightedText(interactive=True),
        gr.JSON(),
        gr.MultimodalTextbox(),
    ],
    "text",
    api_name="check",
)

if __name__ == "__main__":
    demo.launch()
