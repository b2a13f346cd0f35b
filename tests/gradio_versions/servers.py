"""Serve tests/gradio_versions/app.py from a release's env in a subprocess (the parent side)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

from tests.startup import AppProcess, start_app, with_startup

from .envs import ensure_env

APP = Path(__file__).with_name("app.py")
MAIN = "main"  # as a version: the Gradio installed beside qbench (this interpreter), no cached env


@contextmanager
def serve_release(version: str, startup_s: float = 120.0, **options: Any) -> Iterator[str]:
    """Yield the base URL of the test app served by Gradio `version` (options: max_size)."""
    with serve_releases([(version, options)], startup_s) as urls:
        yield urls[0]


@contextmanager
def serve_releases(apps: list[tuple[str, dict[str, Any]]], startup_s: float = 120.0,
                   app: Path = APP) -> Iterator[list[str]]:
    """Start every (version, options) app at once (each start costs seconds); yield their URLs.
    `app`: the script to serve (it prints "READY <url>" and serves until its stdin closes)."""
    with serve_together([(version, [options]) for version, options in apps], startup_s, app) as urls:
        yield [url for (url,) in urls]


@contextmanager
def serve_together(apps: list[tuple[str, list[dict[str, Any]]]], startup_s: float = 120.0,
                   app: Path = APP) -> Iterator[list[list[str]]]:
    """Like serve_releases, but each (version, [options, ...]) is ONE process serving an app per
    options, each its own Blocks, queue and port (app.py '[{...}, {...}]'): Gradio is imported once
    for them (seconds of CPU). Yields each process's URLs, in the order of its options."""
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", GRADIO_SHARE="False")
    env.pop("PYTHONPATH", None)  # the release's own packages only
    env = with_startup(env)  # as an app under the hook starts (tests/startup.py)
    with ExitStack() as stack:
        started: list[tuple[AppProcess, IO[bytes]]] = []
        stack.callback(_stop_all, started)  # after the loop too: an env that fails stops the others
        for version, options in apps:
            log = stack.enter_context(tempfile.TemporaryFile())
            argv = [str(app), json.dumps(options[0] if len(options) == 1 else options)]
            if version == MAIN:  # this interpreter: forked from the preloaded one where it can be
                python, own = sys.executable, env
            else:  # another release's python (never forked), its hub client told it is offline (this box is)
                python, own = str(ensure_env(version)), {**env, "HF_HUB_OFFLINE": "1"}
            proc = start_app([python, *argv], env=own, stderr=log.fileno(), cwd=tempfile.gettempdir())
            started.append((proc, log))
        yield [_wait_ready(proc, log, startup_s, len(options))
               for (proc, log), (_, options) in zip(started, apps, strict=True)]


def _wait_ready(proc: AppProcess, log: IO[bytes], startup_s: float, count: int = 1) -> list[str]:
    """Read stdout until `count` lines "READY <url>" (3.x prints its own banner first)."""
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY "):
                found.append(line.split()[1])
                if len(found) == count:
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + startup_s
    while len(found) < count and reader.is_alive() and time.monotonic() < deadline:
        reader.join(0.1)
    if len(found) < count:
        log.seek(0)
        raise RuntimeError(f"gradio app did not start in {startup_s:g} s:\n{log.read().decode()[-3000:]}")
    return found


def _stop_all(started: list[tuple[AppProcess, IO[bytes]]]) -> None:
    """Close every app's stdin first, then wait for each: they shut down side by side (~1 s each)."""
    for proc, _ in started:
        if proc.stdin:
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for proc, _ in started:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
