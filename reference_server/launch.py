"""Starting the server: options -> ServerSettings -> uvicorn. Shared by `python -m reference_server`
and `qbench serve`.

Precedence: a --config file or a --preset gives the base settings (default: the `echo` preset);
command-line flags override single keys; QBENCH_ADMIN_TOKEN supplies the admin token if no flag does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from reference_server.auth import parse_auth_flags
from reference_server.http.app import build_app
from reference_server.http.front_ends import FrontEnds, resolve_front_ends
from reference_server.http.server_state import resolve_device
from reference_server.settings import (
    ServerSettings,
    SettingsError,
    load_settings,
    preset_path,
    with_overrides,
)
from reference_server.testing import bound_port
from reference_server.workloads.models.params import COMPILE_BACKENDS

#: kinds without a `model` param
MODEL_PARAM_KINDS = ("echo", "sleep", "cpu", "stream", "tokens", "fail", "imageop")


@dataclass
class ServeOptions:
    config: Path | None = None
    preset: str | None = None
    host: str | None = None
    port: int | None = None
    max_threads: int | None = None
    default_concurrency_limit: int | None = None
    max_size: int | None = None
    admin_token: str | None = None
    device: str | None = None
    model: str | None = None
    log_level: str | None = None
    auth: list[str] | None = None  # USER:PASSWORD, repeatable
    auth_token: list[str] | None = None  # accepted bearer tokens, repeatable
    dtype: str | None = None
    compile: bool | None = None
    compile_backend: str | None = None  # implies compile


def settings_from_options(opts: ServeOptions) -> ServerSettings:
    """Build validated settings from the options (SettingsError names the file/flag and value)."""
    if opts.config is not None and opts.preset is not None:
        raise SettingsError("give either --config FILE or --preset NAME, not both")
    path = opts.config if opts.config is not None else preset_path(opts.preset or "echo")
    settings = load_settings(path)
    flags: dict[str, Any] = {
        "launch.host": opts.host, "launch.port": opts.port, "launch.max_threads": opts.max_threads,
        "queue.default_concurrency_limit": opts.default_concurrency_limit, "queue.max_size": opts.max_size,
        "admin_token": opts.admin_token or os.environ.get("QBENCH_ADMIN_TOKEN") or None,
        "device": opts.device, "launch.log_level": opts.log_level,
    }
    overrides = {k: v for k, v in flags.items() if v is not None}
    auth = _auth_override(opts, settings)
    if auth is not None:
        overrides["auth"] = auth
    if opts.compile_backend is not None and opts.compile_backend not in COMPILE_BACKENDS:
        raise SettingsError(f"--compile-backend {opts.compile_backend!r}: expected one of "
                            f"{', '.join(COMPILE_BACKENDS)}")
    backend = opts.compile_backend if opts.compile is not False else None
    compile_value = backend or opts.compile
    model_params = {"model": opts.model, "dtype": opts.dtype, "compile": compile_value}
    model_params = {k: v for k, v in model_params.items() if v is not None}
    if model_params:
        for i, fn in enumerate(settings.functions):
            if fn.workload not in MODEL_PARAM_KINDS:
                overrides[f"functions.{i}.params"] = {**fn.params, **model_params}
    return _apply(settings, overrides) if overrides else settings


def _auth_override(opts: ServeOptions, settings: ServerSettings) -> dict[str, Any] | None:
    """--auth / --auth-token, else QBENCH_SERVER_AUTH (JSON, how qbench hands a launched server its
    auth block without writing it to a file); added to the file's own accounts and tokens."""
    try:
        if opts.auth or opts.auth_token:
            extra = parse_auth_flags(opts.auth or [], opts.auth_token or [])
        elif os.environ.get("QBENCH_SERVER_AUTH"):
            extra = json.loads(os.environ["QBENCH_SERVER_AUTH"])
        else:
            return None
    except (ValueError, json.JSONDecodeError) as exc:
        raise SettingsError(f"auth: {exc}") from None
    if not isinstance(extra, dict):
        raise SettingsError("QBENCH_SERVER_AUTH: expected a JSON object {users: {...}, tokens: [...]}")
    current = settings.auth
    return {
        "users": {**current.users, **dict(extra.get("users") or {})},
        "tokens": [*current.tokens, *list(extra.get("tokens") or [])],
    }


def _apply(settings: ServerSettings, overrides: dict[str, Any]) -> ServerSettings:
    simple = {k: v for k, v in overrides.items() if not k.startswith("functions.")}
    updated = with_overrides(settings, simple, "command-line flags")
    functions = [fn.model_copy() for fn in updated.functions]
    for key, value in overrides.items():
        if key.startswith("functions."):
            index = int(key.split(".")[1])
            functions[index] = functions[index].model_copy(update={"params": value})
    return updated.model_copy(update={"functions": functions})


async def _announce(server: uvicorn.Server, host: str) -> None:
    while not server.started:
        await asyncio.sleep(0.02)
    print(f"reference server ready on http://{host}:{bound_port(server)}", flush=True)


async def _serve(settings: ServerSettings) -> None:
    app = build_app(settings, resume_gc=True)
    launch = settings.launch
    front_ends = resolve_front_ends(launch.front_ends, lambda: resolve_device(settings), settings.gradio)
    if front_ends:
        await _serve_behind_front_ends(app, settings, front_ends)
        return
    config = uvicorn.Config(app, host=launch.host, port=launch.port, log_level=launch.log_level,
                            access_log=launch.access_log, lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    announcer = asyncio.create_task(_announce(server, launch.host))
    try:
        await server.serve()  # a busy port exits with code 3 from inside uvicorn
    finally:
        announcer.cancel()
    if not server.started:
        raise SystemExit(3)  # startup failed (uvicorn logged why, e.g. a model that did not load)


async def _serve_behind_front_ends(app: Starlette, settings: ServerSettings, count: int) -> None:
    """The core (this process: the app, on a private Unix socket) and `count` front-end processes that
    accept on the public port (reference_server.http.front_ends)."""
    launch = settings.launch
    try:
        listener = socket.create_server((launch.host, launch.port), backlog=4096)
    except OSError as exc:
        print(f"error: cannot listen on {launch.host}:{launch.port}: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    fronts = FrontEnds(app, count, listener, launch.log_level)
    config = uvicorn.Config(app, uds=str(Path(fronts.path).with_name("core-http.sock")),
                            log_level=launch.log_level, access_log=launch.access_log, lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)

    failed: list[str] = []

    async def start_front_ends() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        try:
            await fronts.start()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed.append(str(exc))
            server.should_exit = True
            return
        port = listener.getsockname()[1]
        print(f"reference server ready on http://{launch.host}:{port} ({count} front-end processes)",
              flush=True)

    starter = asyncio.create_task(start_front_ends())
    try:
        await server.serve()
    finally:
        starter.cancel()
        await fronts.stop()
        listener.close()
    if not server.started or failed:
        raise SystemExit(3)  # a model that did not load, or a front end that did not start


def serve(settings: ServerSettings) -> None:
    """Run the server in the foreground until interrupted (Ctrl-C / SIGTERM); uvloop when installed."""
    # The collector paused while the model's libraries import and it loads (each collection walks the
    # growing heap: an image preset's start took 20% less CPU, 3.55 s against 4.44); the app resumes it
    # once ready, that heap frozen (build_app's resume_gc). Spawned helpers start with their own.
    gc.disable()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(settings))
        return
    uvloop.run(_serve(settings))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reference_server",
        description="Run the reference server (Gradio's queue semantics and wire protocol) in the foreground."
        " Without --config or --preset it serves the `echo` preset.",
    )
    p.add_argument("--config", type=Path, help="server settings YAML file")
    p.add_argument(
        "--preset",
        help="a preset in reference_server/presets: echo, sleep, mixed, image, text, audio, chat, tokens,"
        " pipeline",
    )
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 7860; 0 = any free port)")
    p.add_argument("--max-threads", type=int, help="max jobs running at once (Gradio max_threads)")
    p.add_argument("--default-concurrency-limit", type=int, help="queue.default_concurrency_limit")
    p.add_argument("--max-size", type=int, help="queue.max_size (waiting events before 503)")
    p.add_argument("--admin-token", help="enable POST /admin/config with this bearer token")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--model", help="override the `model` param of the model workloads")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--auth", action="append", metavar="USER:PASSWORD",
                   help="require a login (Gradio's auth=); repeatable")
    p.add_argument("--auth-token", action="append", metavar="TOKEN",
                   help="accept `Authorization: Bearer TOKEN`; repeatable")
    p.add_argument("--dtype", choices=["auto", "float32", "float16", "bfloat16"],
                   help="override the `dtype` param of the model workloads (auto: bfloat16 on a GPU)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile the model workloads (dynamic shapes; compiles during warm-up)")
    p.add_argument("--compile-backend", choices=list(COMPILE_BACKENDS),
                   help="torch.compile's backend (implies --compile; default inductor; aot_eager captures "
                        "the graph without generating code)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_options(ServeOptions(**vars(args)))
        serve(settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
