"""The suite's own Gradio processes start as an app under qbench's hook does, without a point: no type
stubs written, the collector paused while gradio imports (the hook's QUIET and PAUSED). `with_startup(env)`
puts the hook's folder first on PYTHONPATH, for the apps the tests start themselves; the workers install
the same finder (tests/conftest.py). `start_app` starts such an app with piped stdin and stdout, forked
from the preloaded interpreter where it can be, as qbench starts a user's app (its imports paid once)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol

from qbench.tune.servers import preloaded
from qbench.tune.servers.apphook import HOOK_FILE, first_on_path

FOLDER = HOOK_FILE.parent


def with_startup(env: dict[str, str]) -> dict[str, str]:
    """`env` with the hook's folder first on PYTHONPATH (its sitecustomize.py runs first in that process)."""
    return {**env, "PYTHONPATH": first_on_path(FOLDER, env.get("PYTHONPATH", ""))}


class AppProcess(preloaded.Process, Protocol):
    """What the suite's app starters use of a process: subprocess.Popen(text=True), or a forked app."""

    stdin: IO[str] | None
    stdout: IO[str] | None

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class ForkedApp:
    """A child of the preloaded interpreter with Popen's pipes: text stdin and stdout."""

    def __init__(self, child: preloaded.Forked, stdin: IO[str], stdout: IO[str]) -> None:
        self.child = child
        self.stdin: IO[str] | None = stdin
        self.stdout: IO[str] | None = stdout

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    def poll(self) -> int | None:
        return self.child.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.child.wait(timeout)

    def terminate(self) -> None:
        self.child.terminate()

    def kill(self) -> None:
        self.child.kill()


def start_app(argv: Sequence[str], *, env: dict[str, str], stderr: int,
              cwd: str | Path | None = None) -> AppProcess:
    """`argv` with its stdin and stdout piped (text) and its stderr to descriptor `stderr`: a fork of the
    preloaded interpreter where it takes it (this interpreter's python, the environment read at import
    unchanged: ~1.5 core-s of imports less an app), a new process otherwise (another release's python)."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        child = preloaded.launch(argv, env=env, cwd=cwd, stdin=stdin_read, stdout=stdout_write, stderr=stderr)
    finally:  # the child holds its own ends now (or there is no child)
        os.close(stdin_read)
        os.close(stdout_write)
    if child is not None:
        return ForkedApp(child, open(stdin_write, "w"), open(stdout_read))  # noqa: SIM115 - the app's pipes
    os.close(stdin_write)
    os.close(stdout_read)
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env=env, cwd=cwd, text=True)
