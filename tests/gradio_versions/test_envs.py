"""The per-release envs (tests/gradio_versions/envs.py): what makes an app's second start cheaper than
its first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .envs import BYTECODE_PTH, _write_bytecode_on_import


def test_an_envs_imports_write_their_bytecode_whatever_the_environment_says(tmp_path: Path) -> None:
    """PYTHONDONTWRITEBYTECODE (set on CI and here) would have every app start compile its modules again:
    the env's .pth file turns bytecode writing back on when its python starts (site.py runs it)."""
    env = tmp_path / "env"
    site_packages = env / "lib" / "python3.11" / "site-packages"
    site_packages.mkdir(parents=True)
    _write_bytecode_on_import(env)
    assert (site_packages / BYTECODE_PTH[0]).read_text() == BYTECODE_PTH[1]
    code = tmp_path / "code"
    code.mkdir()
    (code / "some_module.py").write_text("X = 1\n")
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(code)}
    for add_site, written in ((False, False), (True, True)):  # the env's site folder as site.py adds it
        prelude = f"import site; site.addsitedir({str(site_packages)!r}); " if add_site else ""
        subprocess.run([sys.executable, "-c", prelude + "import some_module"], env=environment, check=True)
        assert any((code / "__pycache__").glob("some_module.*.pyc")) is written
