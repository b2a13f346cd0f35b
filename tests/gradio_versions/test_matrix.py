"""`make test-gradio` (the whole release matrix) as docs/gradio-versions.md describes it: a dry run of the
target, whose release list must be the page's, and one release of every 4.x wire family in it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .envs import RELEASES
from .test_versions import family

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_gradio_runs_the_readme_matrix() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "test-gradio"], cwd=ROOT, capture_output=True, text=True, check=True)
    command = r"QBENCH_GRADIO_VERSIONS=(\S+) \S+ -m pytest -q tests/gradio_versions tests/conformance"
    match = re.search(command, dry.stdout)
    assert match, dry.stdout
    extra = match.group(1).split(",")
    readme = " ".join(ROOT.joinpath("docs", "gradio-versions.md").read_text(encoding="utf-8").split())
    assert "`make test-gradio`, which runs the whole matrix (those plus " + ", ".join(extra[:-1]) in readme
    families = {family(v) for v in [*RELEASES, *extra]}
    assert families == {"ws", "sse", "sse_v1", "sse_v2", "sse_v2.1", "sse_v3"}
