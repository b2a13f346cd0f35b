"""Serve tests/gradio_versions/app.py from a release's env in a subprocess (the parent side)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .envs import ensure_env

APP = Path(__file__).with_name("app.py")


@contextmanager
def serve_release(version: str, startup_s: float = 120.0, **options: Any) -> Iterator[str]:
    """Yield the base URL of the test app served by Gradio `version` (options: max_size)."""
    python = ensure_env(version)
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", GRADIO_SHARE="False")
    env.pop("PYTHONPATH", None)  # the release's own packages only
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [str(python), str(APP), json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        try:
            yield _wait_ready(proc, log, startup_s)
        finally:
            _stop(proc)


def _wait_ready(proc: subprocess.Popen[str], log: IO[bytes], startup_s: float) -> str:
    """Read stdout until "READY <url>" (3.x prints its own banner first)."""
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY "):
                found.append(line.split()[1])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + startup_s
    while not found and reader.is_alive() and time.monotonic() < deadline:
        reader.join(0.1)
    if not found:
        log.seek(0)
        raise RuntimeError(f"gradio app did not start in {startup_s:g} s:\n{log.read().decode()[-3000:]}")
    return found[0]


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
