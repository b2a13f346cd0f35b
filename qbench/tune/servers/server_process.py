"""A server in a child process: spawned in its own process group, waited for until ready, its log kept, the
whole group stopped (SIGTERM, then SIGKILL); the reference server's one subprocess starter."""

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
    """A port free now on 127.0.0.1, for a server that cannot bind port 0 (see free_port_block)."""
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
    """The first of `span` consecutive ports all free now on 127.0.0.1, drawn at random in BLOCK_PORTS
    (`candidates`: the starts to try, for tests); the OS's pick when no block is free."""
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
    """Start `argv` in a new process group (forked from the preloaded interpreter where possible), its
    output appended to `log_path` (None: dropped), `env` added; ServerLaunchError when it cannot start."""
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
    """Poll `GET path` until the server answers, or `ready()` says it is ready (a framework's own word);
    ServerLaunchError, with the log's tail, when the process dies or `timeout_s` passes."""
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
    """Write settings (a ServerSettings, a mapping, or an existing file, used as is) to
    `directory/server.yaml`; returns it and the server's environment (an `auth` block: QBENCH_SERVER_AUTH)."""
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
    """The base URL of the server's "reference server ready on URL" log line, read past `offset`."""
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
    """Run the reference server (`settings`: a preset name, a YAML path, a mapping or a ServerSettings)
    in a subprocess; yields a handle ready to load; ServerLaunchError, with the log's tail, if it is not."""
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
    """`with start_reference_server("image") as url:` a ready reference server, stopped on exit."""
    with reference_server_process(
        settings, admin_token=admin_token, ready_timeout_s=ready_timeout_s
    ) as handle:
        yield handle.base_url
