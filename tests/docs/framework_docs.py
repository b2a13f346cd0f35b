"""A framework docs page's qbench command run as the page shows it (docs/rayserve.md, docs/torchserve.md):
its documented URL replaced by the test's server, the framework's virtualenv by the suite's cached one."""

from __future__ import annotations

import shlex
from pathlib import Path

from typer.testing import CliRunner

from qbench.cli import app


def run_doc_line(line: str, doc_url: str, url: str, extra: list[str], env_python: str, python: Path,
                 code: int = 0) -> str:
    """`line` (a `qbench ...` command of the page) with `extra` arguments; its output on one line.
    `env_python`: the page's interpreter path (rayserve-env/bin/python), run as `python`."""
    words = shlex.split(line.replace(env_python, shlex.quote(str(python))))
    args = [url if a == doc_url else a for a in words]
    assert args[0] == "qbench", line
    out = CliRunner().invoke(app, [*args[1:], *extra])
    assert out.exit_code == code, f"{line}\n{out.output}"
    return " ".join(out.output.split())
