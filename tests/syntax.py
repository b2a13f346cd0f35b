"""Python source -> its syntax tree, for the tests that read the project's code.

With the collector paused: CPython 3.11 before 3.11.9 keeps the AST builder's depth per interpreter, so a
finalizer that runs during a parse and formats a traceback (3.11's tracebacks parse a line to place their
carets; an asyncio future never retrieved does this) fails the outer parse with "SystemError: AST
constructor recursion depth mismatch" (python/cpython#106905, pytest-dev/pytest#10763). CI met it once,
in tests/test_layout.py, from a decode worker's stream error collected mid-parse.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse(source: str | Path) -> ast.Module:
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text)
    finally:
        if collecting:
            gc.enable()
