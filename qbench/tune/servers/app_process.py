"""The user's own app, one process per sweep point (`qbench sweep --launch CMD`).

    launch_command(template, knobs)   start CMD with the point's knobs, wait until it answers, stop it after

The knobs reach the app three ways, whichever it reads: placeholders in the command (`{concurrency_limit}`,
`{port}`), QBENCH_<KNOB> environment variables (`concurrency_limit@a` -> QBENCH_CONCURRENCY_LIMIT__A;
QBENCH_PORT and GRADIO_SERVER_PORT for the port; GRADIO_PROFILING=1, so that Gradio >= 6.10 times each
request's phases), and, with `hook`, qbench's startup hook
(qbench/tune/servers/apphook/), which sets them on an unmodified Gradio app's events and launch(). Ready when
`GET /config` answers (any answer below 500 for a plain HTTP app); the process group is stopped after
(qbench/tune/servers/server_process.py).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from qbench.errors import ScenarioError, ServerLaunchError
from qbench.run import json_int, listening_pid
from qbench.tune.knobs.grid import is_server_knob
from qbench.tune.servers.apphook import hook_env
from qbench.tune.servers.server_process import (
    READY_TIMEOUT_S,
    ServerHandle,
    free_port_block,
    spawn,
    stop_process_group,
    wait_ready,
)


def knob_env(knobs: Mapping[str, Any], port: int) -> dict[str, str]:
    """QBENCH_<KNOB> variables for a launched app, plus the port for qbench's and Gradio's conventions."""
    env = {f"QBENCH_{name.upper().replace('.', '_').replace('@', '__')}": str(value)  # knob@event: __EVENT
           for name, value in knobs.items()}
    env.update(QBENCH_PORT=str(port), GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1")
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if "GRADIO_PROFILING" not in os.environ:  # Gradio >= 6.10 times each event (run.results.server_phases)
        env["GRADIO_PROFILING"] = "1"
    return env


class PortTaken(ServerLaunchError):
    """Another program answers on the port the app was given."""


APP_PORTS = 8  # the app's port and those after it kept free for what it starts there (+ num_workers)
PORT_TRIES = 3  # the port is free when qbench picks it; another program can take it before the app binds
_IN_USE = ("address already in use", "errno 98", "cannot find empty port", "port is in use",
           "only one usage of each socket address")


def _port_in_use(log: str) -> bool:
    """The app's log says it could not bind its port."""
    text = log.lower()
    return any(words in text for words in _IN_USE)


def render_command(template: str, knobs: Mapping[str, Any], port: int) -> list[str]:
    """Fill `{knob}` and `{port}` placeholders; an unknown placeholder is a clear error."""
    try:
        return shlex.split(template.format_map({**knobs, "port": port}))
    except KeyError as exc:
        raise ScenarioError(
            f"--launch {template!r}: placeholder {{{exc.args[0]}}} is not a knob of this point "
            f"(knobs: {', '.join(knobs)}, port)"
        ) from None


@contextlib.contextmanager
def launch_command(
    template: str,
    knobs: Mapping[str, Any],
    *,
    work_dir: Path,
    ready_timeout_s: float = READY_TIMEOUT_S,
    ready_path: str = "/config",
    any_status: bool = False,
    hook: bool = False,
    hook_events: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> Iterator[ServerHandle]:
    """Launch the user's app for one point; yields once `GET ready_path` answers, kills the group after.

    `hook`: start it with qbench's startup hook (qbench.tune.servers.apphook), which sets the point's server
    knobs on `hook_events` (None: every queued event), its port and host on Blocks.launch(), and writes
    what it did to `work_dir/hook-record.json`. `cwd`: the folder it runs in (default: this one)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, PORT_TRIES + 1):
        handle = _start(template, knobs, work_dir, cwd, hook, hook_events)
        assert handle.process is not None
        try:
            wait_ready(handle, ready_timeout_s, ready_path, any_status=any_status)
            _check_owner(handle)
            break
        except ServerLaunchError as exc:
            stop_process_group(handle.process)
            if attempt == PORT_TRIES or not (isinstance(exc, PortTaken) or _port_in_use(str(exc))):
                raise
    try:
        yield handle
    finally:
        if handle.process is not None:
            stop_process_group(handle.process)


def _start(template: str, knobs: Mapping[str, Any], work_dir: Path, cwd: Path | None, hook: bool,
           hook_events: Sequence[str] | None) -> ServerHandle:
    """Spawn the app on a port free right now, with the ports after it free too (Gradio puts its SSR
    proxy's Python side and its static-file workers there unchecked), its output appended to
    work_dir/server.log."""
    port = free_port_block(APP_PORTS + (json_int(knobs.get("num_workers")) or 0))
    argv = render_command(template, knobs, port)
    env = knob_env(knobs, port)
    if hook:
        server = {k: v for k, v in knobs.items() if is_server_knob(k)}
        env.update(hook_env(server, port, hook_events, work_dir))
    log_path = work_dir / "server.log"
    process = spawn(argv, env=env, log_path=log_path, cwd=cwd)
    return ServerHandle(f"http://127.0.0.1:{port}", process, log_path)


def _check_owner(handle: ServerHandle) -> None:
    """ServerLaunchError when the program answering on the app's port is not the app (another one took
    the port between qbench picking it and the app binding it)."""
    assert handle.process is not None
    port = int(handle.base_url.rsplit(":", 1)[1])
    owner = listening_pid(port)
    if owner is None:
        return
    try:
        children = psutil.Process(handle.process.pid).children(recursive=True)
        ours = {handle.process.pid, *(child.pid for child in children)}
    except psutil.Error:
        return
    if owner not in ours:
        raise PortTaken(f"port {port} is in use: another program (pid {owner}) answered on the port "
                                "qbench gave the app")
