"""The user's own app, one process per sweep point (`--launch CMD`, `--app FILE`): started with the point's
knobs (placeholders, QBENCH_<KNOB> variables, the startup hook), ready once it and its framework say so,
its process group stopped after (qbench/tune/servers/server_process.py)."""

from __future__ import annotations

import ast
import contextlib
import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from qbench.errors import ScenarioError, ServerLaunchError
from qbench.run import control, json_int, listening_pid
from qbench.tune.knobs.frameworks import app_framework
from qbench.tune.knobs.grid import is_server_knob
from qbench.tune.servers.apphook import hook_env, read_hook_record
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
    env.setdefault("PYTHONUNBUFFERED", "1")  # the log shows each line as printed (launch checks, errors)
    if "GRADIO_PROFILING" not in os.environ:  # Gradio >= 6.10 times each event (run.results.server_phases)
        env["GRADIO_PROFILING"] = "1"
    return env


def app_launch_line(app: Path, python: str | None = None, args: Sequence[str] = ()) -> str:
    """The command that starts the user's app file as its framework runs it (`python app.py`, `bentoml
    serve`, `serve run`, qbench's TorchServe launcher for config.properties); ScenarioError if none fits."""
    python = python or sys.executable
    try:
        source = app.read_text(errors="replace")
    except OSError as exc:
        raise ScenarioError(f"--app {app}: cannot read it ({exc.strerror or exc})") from exc
    framework = app_framework(source)
    if framework == "torchserve":  # its knobs go into its configuration: qbench's launcher writes the point's
        return shlex.join([python, "-m", "qbench_torchserve_hook", str(app.resolve()), *args])
    if framework == "rayserve" and not _calls_serve_run(source):
        application = rayserve_application(source)
        if application is None:
            raise ScenarioError(f"--app {app}: it imports ray.serve but neither calls serve.run nor binds an "
                                "application at module level (app = MyDeployment.bind()): start it with "
                                "--launch 'serve run module:app'")
        return shlex.join([python, "-m", "ray.serve.scripts", "run", f"{app.stem}:{application}",
                           "--app-dir", str(app.resolve().parent), *args])
    if framework != "bentoml":
        return shlex.join([python, str(app), *args])
    service = bentoml_service(source)
    if service is None:
        raise ScenarioError(f"--app {app}: it imports bentoml but no class is decorated @bentoml.service: "
                            "start it with --launch 'bentoml serve module:Service --port {port}'")
    return shlex.join([python, "-m", "bentoml", "serve", f"{app.stem}:{service}", "--working-dir",
                       str(app.resolve().parent), "--host", "127.0.0.1", *args]) + " --port {port}"


def _calls_serve_run(source: str) -> bool:
    """The file runs its Ray Serve application itself (`serve.run(...)`, `run(...)` from ray.serve)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name)
                    and func.value.id == "serve"):
                return True
    return False


def rayserve_application(source: str) -> str | None:
    """The last module-level name bound to `X.bind(...)`: what `serve run module:NAME` runs."""
    found = None
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "bind"):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found = names[0] if names else found
    return found


def bentoml_service(source: str) -> str | None:
    """The last class decorated @bentoml.service (or @service): the one `bentoml serve` runs."""
    found = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and any(_is_service(d) for d in node.decorator_list):
            if found is None or node.lineno > found.lineno:
                found = node
    return found.name if found is not None else None


def _is_service(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Attribute) and target.attr == "service"
            or isinstance(target, ast.Name) and target.id == "service")


class PortTaken(ServerLaunchError):
    """Another program answers on the port the app was given."""


APP_PORTS = 8  # the app's port and those after it kept free for what it starts there (+ num_workers)
PORT_TRIES = 3  # the port is free when qbench picks it; another program can take it before the app binds
_IN_USE = ("address already in use", "errno 98", "cannot find empty port", "port is in use",
           "only one usage of each socket address")


def _port_in_use(log: str) -> bool:
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
    env: Mapping[str, str] | None = None,
) -> Iterator[ServerHandle]:
    """Launch the user's app for one point (`hook`: with the startup hook); yields its handle once ready,
    whose `restart()` starts it again and returns its URL; stops its process group after."""
    work_dir.mkdir(parents=True, exist_ok=True)
    launch = _Launch(template, knobs, work_dir, ready_timeout_s, ready_path, any_status, hook, hook_events,
                     cwd, env or {})
    for attempt in range(1, PORT_TRIES + 1):
        try:
            handle = launch.start(None)
            break
        except ServerLaunchError as exc:
            if attempt == PORT_TRIES or not _taken(exc):
                raise
    handle.restart = lambda: launch.restart(handle)
    try:
        yield handle
    finally:
        if handle.process is not None:
            stop_process_group(handle.process)


def _taken(exc: ServerLaunchError) -> bool:
    """The app could not bind its port: another program has it (or a closing one still holds it)."""
    return isinstance(exc, PortTaken) or _port_in_use(str(exc))


@dataclass
class _Launch:
    """How one point's app is started (launch_command's arguments), to start it again the same way."""

    template: str
    knobs: Mapping[str, Any]
    work_dir: Path
    ready_timeout_s: float
    ready_path: str
    any_status: bool
    hook: bool
    hook_events: Sequence[str] | None
    cwd: Path | None
    env: Mapping[str, str]

    def start(self, port: int | None) -> ServerHandle:
        """Spawn it (on `port`, else a free one) and wait until it is ready; stopped again if it never is."""
        log_start = _log_size(self.work_dir / "server.log")  # this start's lines begin there
        started = _start(self.template, self.knobs, self.work_dir, self.cwd, self.hook, self.hook_events,
                         self.env, port)
        assert started.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        hook_dir = self.work_dir if self.hook else None
        try:
            wait_ready(started, self.ready_timeout_s, self.ready_path, any_status=self.any_status,
                       ready=(lambda: _framework_launched(self.work_dir)) if self.hook else None)
            _check_owner(started)
            _wait_launch_checks(started, deadline, log_start, hook_dir)
            if hook_dir is not None:
                _wait_framework_health(started, deadline, hook_dir)
        except ServerLaunchError:
            stop_process_group(started.process)
            raise
        return started

    def restart(self, handle: ServerHandle) -> str:
        """Stop `handle`'s app and start it again on its port (another if still held); its URL."""
        if handle.process is not None:
            stop_process_group(handle.process)
        try:
            again = self.start(int(handle.base_url.rsplit(":", 1)[1]))
        except ServerLaunchError as exc:
            if not _taken(exc):
                raise
            again = self.start(None)
        handle.process, handle.base_url = again.process, again.base_url
        return handle.base_url


def _start(template: str, knobs: Mapping[str, Any], work_dir: Path, cwd: Path | None, hook: bool,
           hook_events: Sequence[str] | None, extra: Mapping[str, str], port: int | None = None
           ) -> ServerHandle:
    """Spawn the app on `port`, else on a block of free ports; its output appended to work_dir/server.log."""
    port = port or free_port_block(APP_PORTS + (json_int(knobs.get("num_workers")) or 0))
    argv = render_command(template, knobs, port)
    env = {**knob_env(knobs, port), **extra}
    if hook:
        server = {k: v for k, v in knobs.items() if is_server_knob(k)}
        observe = [k for k in server if "{" + k + "}" in template]  # the command passes these itself
        env.update(hook_env(server, port, hook_events, work_dir, observe))
    log_path = work_dir / "server.log"
    process = spawn(argv, env=env, log_path=log_path, cwd=cwd)
    return ServerHandle(f"http://127.0.0.1:{port}", process, log_path)


#: What Gradio's launch() prints once the server answers (3.x to 6.x), then what it prints after its own
#: checks: GET /startup-events, then HEAD / must answer within 3 s or the app raises "When localhost is
#: not accessible, a shareable link must be created" and exits. Load sent before those checks end can make
#: a busy host's HEAD / miss its 3 s and kill the app in the middle of a run.
GRADIO_SERVING = "Running on local URL"
GRADIO_CHECKED = ("create a public link", "Running on public URL", "Could not create share link",
                  "Colab notebook detected")
LAUNCH_CHECKS_S = 30.0  # the most to wait for them past the server's first answer


def _wait_launch_checks(handle: ServerHandle, deadline: float, log_start: int = 0,
                        hook_dir: Path | None = None) -> None:
    """Once a Gradio app answers, wait until its launch() has passed its own start-up checks (the hook's
    record, else its log), at most LAUNCH_CHECKS_S; ServerLaunchError, with the log's tail, if it exits."""
    assert handle.process is not None
    deadline = min(deadline, time.monotonic() + LAUNCH_CHECKS_S)
    while not _launch_checked(handle, log_start, hook_dir):
        if handle.process.poll() is not None:
            raise ServerLaunchError(
                f"the app answered, then exited with code {handle.process.returncode} in Gradio's own "
                f"start-up checks (launch() asks GET /startup-events, then HEAD / within 3 s: a host too "
                f"busy to answer in time fails it)\n{handle.log_tail()}")
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _launch_checked(handle: ServerHandle, log_start: int, hook_dir: Path | None) -> bool:
    """Whether the app's launch() is past its checks, or says nothing that would tell."""
    hooked = read_hook_record(hook_dir) if hook_dir is not None else None
    if hooked is not None and hooked.launched:  # launch()'s checks are Gradio's (LitServe has none)
        return hooked.framework != "gradio" or hooked.launch_checked is not None
    log = _log_text(handle, log_start)
    if GRADIO_SERVING not in log:
        return True
    return any(line in log.split(GRADIO_SERVING, 1)[1] for line in GRADIO_CHECKED)


#: A framework's own readiness, past its first answer: LitServe's GET /health is 503 until its inference
#: workers have run setup() (a model loading), 200 "ok" after; requests sent before wait in its queue.
#: Ray Serve's proxy answers /-/healthz before the application is deployed: the app is ready once serve.run
#: has returned (its own wait for the deployments to run), which the hook records as `launched`.
#: TorchServe's /ping says Healthy while its workers still load: qbench's launcher records it `launched`
#: once its management API lists every model's workers READY.
FRAMEWORK_HEALTH = {"litserve": "/health", "bentoml": "/readyz", "rayserve": "/-/healthz",
                    "torchserve": "/ping"}
LAUNCHED_WHEN_READY = ("rayserve", "torchserve")


def _wait_framework_health(handle: ServerHandle, deadline: float, hook_dir: Path) -> None:
    """Wait until the app's framework says it is ready (FRAMEWORK_HEALTH); else ServerLaunchError."""
    hooked = read_hook_record(hook_dir)
    path = FRAMEWORK_HEALTH.get(hooked.framework) if hooked is not None else None
    if path is None:
        return
    assert handle.process is not None and hooked is not None
    late = hooked.framework in LAUNCHED_WHEN_READY  # ready only once the record says it runs
    with control.client(timeout_s=2.0) as http:
        while not (control.answers(http, handle.base_url + path)
                   and (not late or _framework_launched(hook_dir))):
            if handle.process.poll() is not None:
                raise ServerLaunchError(f"the app exited with code {handle.process.returncode} before its "
                                        f"{path} said it was ready\n{handle.log_tail()}")
            if time.monotonic() >= deadline:
                raise ServerLaunchError(f"{handle.base_url}{path} did not answer 200 before the ready "
                                        f"timeout (its workers still setting up?)\n{handle.log_tail()}")
            time.sleep(0.2)


def _framework_launched(hook_dir: Path) -> bool:
    hooked = read_hook_record(hook_dir)
    return hooked is not None and hooked.framework in LAUNCHED_WHEN_READY and hooked.launched


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_text(handle: ServerHandle, start: int) -> str:
    if handle.log_path is None:
        return ""
    try:
        with handle.log_path.open("rb") as log:
            log.seek(start)
            return log.read().decode(errors="replace")
    except OSError:
        return ""


def _check_owner(handle: ServerHandle) -> None:
    """PortTaken when the program answering on the app's port is not the app (nor one of its own)."""
    assert handle.process is not None
    port = int(handle.base_url.rsplit(":", 1)[1])
    owner = listening_pid(port)
    if owner is not None and not _ours(handle.process.pid, owner):
        raise PortTaken(f"port {port} is in use: another program (pid {owner}) answered on the port "
                        "qbench gave the app")


def _ours(app: int, owner: int) -> bool:
    """Whether process `owner` is the app `app` or one of its own: in its session (the app starts in a new
    one: spawn), or its child. An app that has ended already (it could not bind the port, a stranger
    answered in its place) owns nothing."""
    if owner == app:
        return True
    with contextlib.suppress(OSError):
        if os.getsid(owner) == app:
            return True
    try:
        return owner in {child.pid for child in psutil.Process(app).children(recursive=True)}
    except psutil.Error:
        return False
