"""The qbench command line: a thin shell over the library.

Each command parses its options, builds a config object, calls ONE library function, renders the result
with rich and maps `QbenchError` (qbench.errors) to a non-zero exit code. No logic lives here.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="qbench",
    help="Load-test and tune queued inference servers (Gradio apps first, plain HTTP second).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Commands are added below, one small function each: run, sweep, report, compare, serve, demo.
