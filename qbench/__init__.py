"""qbench: load-test and tune queued inference servers (Gradio apps first, plain HTTP second)."""

__version__ = "0.1.0"
