"""A real Gradio app written by a test, run in a subprocess on a free loopback port (tests/run)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from qbench.tune.servers.server_process import free_port, spawn, stop_process_group
from tests.startup import with_startup


@contextmanager
def gradio_app(folder: Path, source: str, timeout_s: float = 90) -> Iterator[str]:
    """Write `source` as folder/app.py, run it with the port as its first argument, and yield its base
    URL once `/config` answers; the app is stopped on exit."""
    (folder / "app.py").write_text(source)
    port = free_port()
    env = with_startup({"GRADIO_ANALYTICS_ENABLED": "False"})  # tests/startup.py
    log = folder / "app.log"  # what the app printed: the reason when it exits or never answers
    # as qbench starts a user's app: forked from the preloaded interpreter where it can be
    proc = spawn([sys.executable, str(folder / "app.py"), str(port)], env=env, log_path=log, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(url):
            if proc.poll() is not None or time.monotonic() >= deadline:  # the log read once, to say why
                said = log.read_text(errors="replace")[-3000:]
                assert proc.poll() is None, f"the app in {folder} exited with code {proc.returncode}:\n{said}"
                raise AssertionError(f"{folder}: no answer in {timeout_s:g} s:\n{said}")
            time.sleep(0.3)
        yield url
    finally:
        stop_process_group(proc, grace_s=20)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/config", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
