"""An app whose function raises on every request."""

import gradio as gr


def predict(text: str) -> str:
    raise ValueError("the model is not loaded")


demo = gr.Interface(predict, "text", "text", api_name="predict")

if __name__ == "__main__":
    demo.launch()
