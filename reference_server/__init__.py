"""A reference inference server with Gradio's queue, batching and concurrency semantics and wire protocol."""

__version__ = "0.1.0"
