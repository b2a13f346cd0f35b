"""tests/conftest.py: what the suite sets up so that its workers' server starts stay forks of the preloaded
interpreter (qbench/tune/servers/preloaded.py), which refuses a child whose environment read at import
differs from its own."""

from __future__ import annotations

import os

from qbench.tune.servers.preloaded import read_at_import


def test_a_blocks_built_in_a_test_leaves_the_environment_read_at_import_as_it_was() -> None:
    """Gradio's Blocks() sets HF_HUB_DISABLE_TELEMETRY when analytics are off: the suite sets it first, to
    the same value, so the worker still matches the preloaded interpreter after."""
    import gradio as gr

    before = read_at_import(os.environ)
    with gr.Blocks(analytics_enabled=False):
        gr.Textbox()
    assert read_at_import(os.environ) == before
