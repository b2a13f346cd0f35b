"""A server in a child process: spawn it in its own process group, wait until it is ready, keep its log,
stop the whole group.

    with start_reference_server("image") as url: ...      the reference server, ready, stopped on exit
    with reference_server_process(settings) as handle:    the same, with its process, log and admin token

`reference_server_process` runs exactly what a user runs: `python -m reference_server --config <yaml>
--port 0` (reference_server/launch.py: options -> settings -> uvicorn), in a new process group; the
server binds a free port and prints "reference server ready on URL", and it is ready when `GET /config`
then answers 200. Binding port 0 in the server (rather than probing a port here and passing it) leaves
no window in which another process can take the port. This is the one subprocess way to start the
reference server (tests, benches, `qbench sweep` relaunch and live modes, the demo); the in-process
way is reference_server/testing.py's `serve_in_thread`.

Every server started here (the user's own app too: qbench/tune/servers/app_process.py) is torn down with
SIGTERM, then SIGKILL, to its whole process group, so no worker or child outlives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from qbench.errors import ScenarioError, ServerLaunchError
from qbench.run import control
from qbench.tune.servers import preloaded
from qbench.tune.servers.preloaded import Process

READY_TIMEOUT_S = 60.0


@dataclass
class ServerHandle:
    """A running server qbench started: where it listens and how to stop it."""

    base_url: str
    process: Process | None
    log_path: Path | None = None
    admin_token: str | None = None
    restart: Callable[[], str] | None = None  # an app qbench launched: stop it, start it again (its URL)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    """A port free right now on 127.0.0.1, for a server that cannot bind port 0: drawn in BLOCK_PORTS,
    where no outgoing connection takes it before the server binds it (one the OS picked by bind(0) is an
    ephemeral port, and a busy box's next client connection took one in the second before a Gradio app
    bound it: "Cannot find empty port"); the OS's pick when none there is free."""
    return free_port_block(1)


def _os_port() -> int:
    """A port the OS picks (bind(0)): free now, but in the ephemeral range."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Where free_port_block draws: below the ephemeral ranges of Linux (32768-60999), macOS and Windows
# (49152-65535), so no bind(0) and no outgoing connection lands on a port of the block meanwhile.
BLOCK_PORTS = (20_000, 32_000)


def free_port_block(span: int, candidates: Iterable[int] | None = None) -> int:
    """The first of `span` consecutive ports all free right now on 127.0.0.1, for an app that puts helper
    processes on the ports after its own without checking them (Gradio with SSR: Python on the first
    free port above the app's, its static-file workers on the next ones). Drawn at random in
    BLOCK_PORTS (`candidates`: the starts to try, for tests); the OS's pick when no block is free."""
    draw = random.SystemRandom()  # not the random module's state: forked workers would draw alike
    starts = candidates if candidates is not None else (
        draw.randrange(BLOCK_PORTS[0], BLOCK_PORTS[1] - span) for _ in range(200))
    for start in starts:
        if all(_bindable(port) for port in range(start, start + span)):
            return start
    return _os_port()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def spawn(
    argv: Sequence[str], *, env: Mapping[str, str] | None, log_path: Path | None, cwd: Path | None = None
) -> Process:
    """Start `argv` in a new process group, stdout and stderr appended to `log_path` (or dropped);
    `env` adds to this process's environment. A Python command is forked from the preloaded interpreter
    QBENCH_PRELOADED names, where there is one that can run it (qbench/tune/servers/preloaded.py).
    ServerLaunchError when it cannot start at all."""
    environment = {**os.environ, **(env or {})}
    with open(log_path or os.devnull, "ab") as log:
        forked = preloaded.launch(argv, env=environment, cwd=cwd, stdout=log.fileno())
        if forked is not None:
            return forked
        try:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=cwd,
                start_new_session=True,  # own process group: teardown reaches every child
            )
        except OSError as exc:
            raise ServerLaunchError(f"cannot start {shlex.join(argv)}: {exc}") from None


def stop_process_group(process: Process, grace_s: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after `grace_s`."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)


def wait_ready(
    handle: ServerHandle,
    timeout_s: float = READY_TIMEOUT_S,
    path: str = "/config",
    *,
    any_status: bool = False,
    ready: Callable[[], bool] | None = None,
) -> None:
    """Poll `GET path` until the server answers (qbench.run.control.answers), or `ready()` says it is
    (a framework's own word: Ray Serve's app may fail a GET it was never meant for); fail fast, with the
    tail of its log, if the process died."""
    deadline = time.monotonic() + timeout_s
    with control.client(timeout_s=2.0) as http:
        while time.monotonic() < deadline:
            if handle.process is not None and handle.process.poll() is not None:
                code = handle.process.returncode
                raise ServerLaunchError(f"server exited with code {code} before ready\n{handle.log_tail()}")
            if ready is not None and ready() or control.answers(http, handle.base_url + path, any_status):
                return
            time.sleep(0.2)
    raise ServerLaunchError(
        f"server at {handle.base_url} not ready after {timeout_s:.0f} s\n{handle.log_tail()}"
    )


def reconfigure(handle: ServerHandle, settings: Mapping[str, Any]) -> Any:
    """Live reconfiguration of a server started with an admin token (qbench.run.control.set_admin_config)."""
    if not handle.admin_token:
        raise ServerLaunchError("live reconfiguration needs a server started with --admin-token")
    return control.set_admin_config(handle.base_url, settings, handle.admin_token)


# ---------------------------------------------------------------- the reference server


def settings_to_yaml(settings: Any, directory: Path) -> tuple[Path, dict[str, str]]:
    """Write settings (a ServerSettings, a mapping, or an existing file path) to `directory/server.yaml`;
    returns the file and the environment for the server: an `auth` block travels as QBENCH_SERVER_AUTH
    (JSON), never in the file (which may sit in a sweep folder)."""
    if isinstance(settings, str | Path) and Path(settings).is_file():
        return Path(settings), {}
    if hasattr(settings, "model_dump"):
        settings = settings.model_dump(mode="json", exclude={"admin_token"}, context={"reveal_secrets": True})
    if not isinstance(settings, Mapping):
        raise ScenarioError(f"server settings: expected a mapping, a preset name or a file, got {settings!r}")
    body = dict(settings)
    auth = body.pop("auth", None)
    secret = auth and (auth.get("users") or auth.get("tokens"))
    env = {"QBENCH_SERVER_AUTH": json.dumps(auth)} if secret else {}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "server.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path, env


def resolve_settings_source(source: Any) -> Any:
    """A preset name (no '/', no '.yaml') becomes that preset's file; everything else passes through."""
    if isinstance(source, str) and "/" not in source and not source.endswith((".yaml", ".yml")):
        from reference_server.settings import SettingsError, preset_path

        try:
            return preset_path(source)
        except SettingsError as exc:
            raise ScenarioError(str(exc)) from None
    return source


_READY_LINE = re.compile(r"reference server ready on (http://\S+)")


def _announced_url(handle: ServerHandle, deadline: float, offset: int = 0) -> str:
    """The base URL from the server's "reference server ready on URL" log line (it binds port 0), read
    past `offset` (what an appended-to log held before this server started)."""
    assert handle.process is not None and handle.log_path is not None
    while time.monotonic() < deadline:
        with handle.log_path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        if match := _READY_LINE.search(text):
            return match.group(1)
        if handle.process.poll() is not None:
            code = handle.process.returncode
            raise ServerLaunchError(f"server exited with code {code} before ready\n{handle.log_tail()}")
        time.sleep(0.05)
    raise ServerLaunchError(f"server not ready within the time limit\n{handle.log_tail()}")


@contextlib.contextmanager
def reference_server_process(
    settings: Any,
    *,
    admin_token: str | None = None,
    work_dir: Path | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log_path: Path | None = None,
) -> Iterator[ServerHandle]:
    """Run the reference server in a subprocess; yields a handle whose `base_url` is ready to load.

    `settings`: a preset name ("image"), a YAML path, a mapping or a `ServerSettings`. `work_dir` keeps
    server.yaml and server.log (default: a temporary folder, removed after); `log_path`: append the
    server's output there instead. `args`: more command-line flags (`--device cuda`, `--log-level info`);
    `env`: more environment; `cwd`: its working directory. Raises ServerLaunchError, with
    the tail of the server's log, when it exits or is not ready within `ready_timeout_s`.
    """
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qbench-server-")))
        config, server_env = settings_to_yaml(resolve_settings_source(settings), work_dir)
        argv = [sys.executable, "-m", "reference_server", "--config", str(config), "--port", "0", *args]
        if admin_token:
            argv.append(f"--admin-token={admin_token}")  # a token may begin with "-"
        log_path = log_path or work_dir / "server.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        process = spawn(argv, env={**server_env, **(env or {})} or None, log_path=log_path, cwd=cwd)
        handle = ServerHandle("", process, log_path, admin_token)
        try:
            deadline = time.monotonic() + ready_timeout_s
            handle.base_url = _announced_url(handle, deadline, offset)
            wait_ready(handle, max(deadline - time.monotonic(), 1.0))
            yield handle
        finally:
            stop_process_group(process)


@contextlib.contextmanager
def start_reference_server(
    settings: Any, *, admin_token: str | None = None, ready_timeout_s: float = READY_TIMEOUT_S
) -> Iterator[str]:
    """`with start_reference_server("image") as url:` - a ready reference server, stopped on exit.

    `settings`: a preset name, a YAML path, a mapping or a `ServerSettings`; raises ServerLaunchError
    (with the tail of the server's log) when it does not come up.
    """
    with reference_server_process(
        settings, admin_token=admin_token, ready_timeout_s=ready_timeout_s
    ) as handle:
        yield handle.base_url
