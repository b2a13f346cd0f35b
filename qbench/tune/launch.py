"""Servers for a sweep point: launch, probe readiness, reconfigure, measure resources, tear down.

Three ways qbench gets a server it controls (a fourth, a fixed `--target`, needs nothing from here):

    reference_server_process(settings) `python -m reference_server --config <yaml> --port 0` in a new
                                       process group; it binds a free port and prints it; ready when
                                       `GET /config` then answers 200
                                       (`start_reference_server` is the same, yielding just the base URL)
    reconfigure(handle, settings)      `POST /admin/config` with `Authorization: Bearer <token>` on a
                                       reference server started with `--admin-token`
    launch_command(template, knobs)    the user's own app: placeholders (`{concurrency_limit}`, `{port}`) in
                                       the command and QBENCH_<KNOB> environment variables (QBENCH_PORT,
                                       GRADIO_SERVER_PORT too); with `hook`, qbench's startup hook sets
                                       the knobs in an unmodified Gradio app; ready on `GET /config`

Every launched server runs in its own process group and is torn down with SIGTERM, then SIGKILL, to the
whole group. `ResourceSampler` follows the launched process tree with psutil (peak RSS);
`read_status` reads the reference server's `GET /status` (RSS, CUDA memory).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from qbench.errors import ScenarioError, ServerLaunchError
from qbench.tune.apphook import hook_env
from qbench.tune.grid import is_server_knob

READY_TIMEOUT_S = 60.0


@dataclass
class ServerHandle:
    """A running server qbench started: where it listens and how to stop it."""

    base_url: str
    process: subprocess.Popen[bytes] | None
    log_path: Path | None = None
    admin_token: str | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    """A port free right now on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout_s: float = 60.0) -> None:
    """Poll `GET url` until it answers at all (any status); RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    with _control_client(timeout_s=2.0) as client:
        while time.monotonic() < deadline:
            try:
                client.get(url)
                return
            except httpx.TransportError:
                time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up within {timeout_s:g} s")


# ---------------------------------------------------------------- control plane (localhost, httpx)


def _control_client(timeout_s: float = 5.0) -> httpx.Client:
    """The synchronous client for control calls (readiness, /status, /admin/config): explicit
    timeouts, and no proxy from the environment (these calls go to a server qbench launched).
    The request hot path stays on aiohttp (see the README's dependency notes)."""
    return httpx.Client(timeout=httpx.Timeout(timeout_s), trust_env=False)


def _http_json(url: str, *, body: Any = None, token: str | None = None, timeout: float = 5.0) -> Any:
    """GET (or POST `body` as JSON) and parse the JSON answer; httpx.HTTPError for any failure to
    reach the server or a non-2xx status, ValueError for a body that is not JSON."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with _control_client(timeout) as client:
        if body is None:
            response = client.get(url, headers=headers)
        else:
            response = client.post(url, json=body, headers=headers)
    response.raise_for_status()
    return response.json() if response.content else None


def wait_ready(
    handle: ServerHandle,
    timeout_s: float = READY_TIMEOUT_S,
    path: str = "/config",
    *,
    any_status: bool = False,
) -> None:
    """Poll `GET path` until it answers 200 or 401/403 (an app behind a login is up), or any answer below
    500 with `any_status` (a plain HTTP server without that route is listening, hence ready); fail fast
    if the process died."""
    deadline = time.monotonic() + timeout_s
    with _control_client(timeout_s=2.0) as client:
        while time.monotonic() < deadline:
            if handle.process is not None and handle.process.poll() is not None:
                code = handle.process.returncode
                raise ServerLaunchError(f"server exited with code {code} before ready\n{handle.log_tail()}")
            if _answers(client, handle.base_url + path, any_status):
                return
            time.sleep(0.2)
    raise ServerLaunchError(
        f"server at {handle.base_url} not ready after {timeout_s:.0f} s\n{handle.log_tail()}"
    )


def _answers(client: httpx.Client, url: str, any_status: bool) -> bool:
    try:
        status = client.get(url).status_code
    except httpx.TransportError:
        return False
    return status in (200, 401, 403) or (any_status and status < 500)


def read_status(base_url: str) -> dict[str, Any]:
    """The reference server's `GET /status` JSON ({} when unavailable)."""
    try:
        status = _http_json(base_url + "/status")
    except (httpx.HTTPError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def read_gradio_version(base_url: str) -> str | None:
    """The `version` a Gradio app's `GET /config` announces (None when there is no such answer)."""
    try:
        config = _http_json(base_url + "/config")
    except (httpx.HTTPError, ValueError):
        return None
    return str(config["version"]) if isinstance(config, dict) and config.get("version") else None


def reconfigure(handle: ServerHandle, settings: Mapping[str, Any]) -> Any:
    """Live reconfiguration through `POST /admin/config` (needs the server's admin token)."""
    if not handle.admin_token:
        raise ServerLaunchError("live reconfiguration needs a server started with --admin-token")
    try:
        return _http_json(handle.base_url + "/admin/config", body=dict(settings), token=handle.admin_token)
    except httpx.HTTPStatusError as exc:
        code, detail = exc.response.status_code, exc.response.text[:500]
        raise ServerLaunchError(f"POST /admin/config refused ({code}): {detail}") from None
    except (httpx.HTTPError, ValueError) as exc:
        raise ServerLaunchError(f"POST /admin/config failed: {exc}") from None


# ---------------------------------------------------------------- process lifecycle


def _spawn(
    argv: list[str], *, env: Mapping[str, str] | None, log_path: Path | None
) -> subprocess.Popen[bytes]:
    log = log_path.open("ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # own process group: teardown reaches every child
        )
    except OSError as exc:
        raise ServerLaunchError(f"cannot start {shlex.join(argv)}: {exc}") from None
    finally:
        if log_path:
            log.close()  # type: ignore[union-attr]


def stop_process_group(process: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
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


def _announced_url(handle: ServerHandle, deadline: float) -> str:
    """The base URL from the server's "reference server ready on URL" log line (it binds port 0)."""
    assert handle.process is not None and handle.log_path is not None
    while time.monotonic() < deadline:
        text = handle.log_path.read_text(errors="replace") if handle.log_path.exists() else ""
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
) -> Iterator[ServerHandle]:
    """Run the reference server in a subprocess; yields a handle whose `base_url` is ready to load.

    `settings`: a preset name ("image"), a YAML path, a mapping or a `ServerSettings`.
    """
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qbench-server-")))
        config, server_env = settings_to_yaml(resolve_settings_source(settings), work_dir)
        # Port 0: the server binds any free port and prints it, so no other process can take the port
        # between our choosing it and the server binding it (as with a free_port() probe).
        argv = [sys.executable, "-m", "reference_server", "--config", str(config), "--port", "0"]
        if admin_token:
            argv += ["--admin-token", admin_token]
        log_path = work_dir / "server.log"
        handle = ServerHandle("", _spawn(argv, env=server_env or None, log_path=log_path), log_path)
        handle.admin_token = admin_token
        try:
            deadline = time.monotonic() + ready_timeout_s
            handle.base_url = _announced_url(handle, deadline)
            wait_ready(handle, max(deadline - time.monotonic(), 1.0))
            yield handle
        finally:
            assert handle.process is not None
            stop_process_group(handle.process)


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


def knob_env(knobs: Mapping[str, Any], port: int) -> dict[str, str]:
    """QBENCH_<KNOB> variables for a launched app, plus the port for qbench's and Gradio's conventions."""
    env = {f"QBENCH_{name.upper().replace('.', '_').replace('@', '__')}": str(value)  # knob@event: __EVENT
           for name, value in knobs.items()}
    env.update(QBENCH_PORT=str(port), GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1")
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    return env


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
) -> Iterator[ServerHandle]:
    """Launch the user's app for one point; yields once `GET ready_path` answers, kills the group after.

    `hook`: start it with qbench's startup hook (qbench.tune.apphook), which sets the point's server
    knobs on `hook_events` (None: every queued event), its port and host on Blocks.launch(), and writes
    what it did to `work_dir/hook-record.json`."""
    port = free_port()
    argv = render_command(template, knobs, port)
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path = work_dir / "server.log"
    env = knob_env(knobs, port)
    if hook:
        server = {k: v for k, v in knobs.items() if is_server_knob(k)}
        env.update(hook_env(server, port, hook_events, work_dir))
    process = _spawn(argv, env=env, log_path=log_path)
    handle = ServerHandle(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_ready(handle, ready_timeout_s, ready_path, any_status=any_status)
        yield handle
    finally:
        assert handle.process is not None
        stop_process_group(handle.process)


# ---------------------------------------------------------------- resources


@dataclass
class ResourceSampler:
    """Samples the RSS of a process tree in a background thread; `peak_rss_mb` after `stop()`."""

    pid: int
    interval_s: float = 0.25
    peak_rss_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def sample(self) -> float:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_rss_mb = max(self.peak_rss_mb, self.sample())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> ResourceSampler:
        self._thread = threading.Thread(target=self._run, name="qbench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)


def status_memory(status: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(peak RSS MB, peak CUDA memory MB) from the reference server's `/status` JSON (None if absent)."""
    rss = status.get("peak_rss_bytes")
    cuda = status.get("torch_cuda_memory") or {}
    gpu = cuda.get("peak_allocated_bytes") if isinstance(cuda, Mapping) else None
    return (
        rss / 2**20 if isinstance(rss, int | float) else None,
        gpu / 2**20 if isinstance(gpu, int | float) else None,
    )


# ---------------------------------------------------------------- knobs -> reference server settings

_QUEUE_KNOBS = ("default_concurrency_limit", "concurrency_count", "max_size")
_FUNCTION_KNOBS = ("concurrency_limit", "max_batch_size", "batch_wait_ms", "concurrency_id")


def _knob_value(name: str, value: Any) -> Any:
    if name == "max_size" and isinstance(value, str) and value.lower() in ("none", "null", "unlimited"):
        return None
    if name == "concurrency_limit" and isinstance(value, str) and value.lower() in ("none", "null"):
        return None
    return value


def _function_knobs(knobs: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: _knob_value(k, knobs[k]) for k in _FUNCTION_KNOBS if k in knobs}
    if isinstance(out.get("max_batch_size"), int) and out["max_batch_size"] > 1:
        out["batch"] = True
    return out


def apply_server_knobs(
    base: Mapping[str, Any], knobs: Mapping[str, Any], api_name: str | None
) -> dict[str, Any]:
    """Reference-server settings (a mapping) with a point's server knobs applied.

    Function knobs go to the function named `api_name` (to every function if it is not one of them);
    a max_batch_size above 1 turns batching on. queue/launch knobs go to their sections.
    """
    raw: dict[str, Any] = json.loads(json.dumps(dict(base)))  # deep copy of plain data
    names = [f.get("api_name") for f in raw.get("functions", [])]
    targets = (
        [f for f in raw.get("functions", []) if f.get("api_name") == api_name]
        if api_name in names
        else raw.get("functions", [])
    )
    for fn in targets:
        fn.update(_function_knobs(knobs))
    _apply_event_knobs(raw, knobs)
    for name in _QUEUE_KNOBS:
        if name in knobs:
            raw.setdefault("queue", {})[name] = _knob_value(name, knobs[name])
    if "max_threads" in knobs:
        raw.setdefault("launch", {})["max_threads"] = knobs["max_threads"]
    return raw


def _apply_event_knobs(raw: dict[str, Any], knobs: Mapping[str, Any]) -> None:
    """Knobs scoped to one event (`concurrency_limit@a`, `concurrency_id@c=own`: its own group)."""
    functions = {f.get("api_name"): f for f in raw.get("functions", [])}
    for name, value in knobs.items():
        base, _, event = name.partition("@")
        if not event or base not in _FUNCTION_KNOBS:
            continue
        if event not in functions:
            raise ScenarioError(f"knob {name!r}: the server has no event {event!r} "
                                f"(its events: {', '.join(str(n) for n in functions)})")
        own = base == "concurrency_id" and str(value).lower() in ("own", "none", "null")
        functions[event].update({base: None} if own else _function_knobs({base: value}))


def effective_knobs(settings: Mapping[str, Any], api_name: str | None) -> dict[str, Any]:
    """The knob values a reference-server config sets for `api_name` (the first function otherwise)."""
    functions = settings.get("functions") or [{}]
    fn = next((f for f in functions if f.get("api_name") == api_name), functions[0])
    queue, launch = settings.get("queue") or {}, settings.get("launch") or {}
    limit = fn.get("concurrency_limit", "default")
    if settings.get("gradio") == 3:  # one pool for every event; launch() raises max_threads to it
        count = queue.get("concurrency_count") or 1
        batch = fn.get("max_batch_size", 4) if fn.get("batch") else 1
        return {"concurrency_count": count, "max_batch_size": batch,
                "max_threads": max(launch.get("max_threads", 40), count)}
    knobs: dict[str, Any] = {
        "concurrency_limit": queue.get("default_concurrency_limit", 1) if limit == "default" else limit,
        "max_batch_size": fn.get("max_batch_size", 4) if fn.get("batch") else 1,
        "max_threads": launch.get("max_threads", 40),
    }
    if "default_concurrency_limit" in queue:
        knobs["default_concurrency_limit"] = queue["default_concurrency_limit"]
    return knobs


def admin_body(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The `POST /admin/config` body that moves a running server to `settings` (the live-changeable knobs)."""
    queue = settings.get("queue") or {}
    launch = settings.get("launch") or {}
    functions = {
        fn["api_name"]: {
            k: fn[k] for k in ("concurrency_limit", "batch", "max_batch_size", "batch_wait_ms") if k in fn
        }
        for fn in settings.get("functions", [])
    }
    body: dict[str, Any] = {"functions": functions}
    body["queue"] = {k: queue[k] for k in _QUEUE_KNOBS if k in queue}
    if "max_threads" in launch:
        body["launch"] = {"max_threads": launch["max_threads"]}
    return body
