"""`serve_in_thread(settings)`: a real uvicorn server on 127.0.0.1 and a free port, for tests and benches.

    with serve_in_thread(synthetic_settings()) as server:
        httpx.get(server.url + "/config")

The server stops (and its thread joins) when the block exits, even on errors. This is the one
in-process way to start the server; the one subprocess way, which runs `python -m reference_server`
(launch.py) exactly as a user does, is `qbench.tune.servers.server_process.reference_server_process`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from reference_server.http.app import build_app
from reference_server.http.server_state import ServerState
from reference_server.settings import ServerSettings


@dataclass
class RunningServer:
    url: str  # http://127.0.0.1:PORT (no trailing slash)
    port: int
    app: Starlette
    server: uvicorn.Server

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.server
        return state


def bound_port(server: uvicorn.Server) -> int:
    """The port the started server listens on (useful with port 0)."""
    for srv in server.servers:
        for sock in srv.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("uvicorn server has no listening socket")


@contextmanager
def serve_in_thread(
    settings: ServerSettings, startup_timeout_s: float = 60.0, file_dir: Path | None = None,
    wrap: Callable[[Starlette], Any] | None = None,
) -> Iterator[RunningServer]:
    """Run the reference server for `settings` in a background thread; yield its URL. Uploads and
    outputs go under `file_dir` (default: a temporary folder removed at shutdown). `wrap`: an ASGI
    middleware served around the app (a test's: it sees or alters the requests)."""
    app = build_app(settings, file_dir)
    config = uvicorn.Config(app if wrap is None else wrap(app), host="127.0.0.1", port=0,
                            log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="reference-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("reference server failed to start (see the log above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"reference server did not start within {startup_timeout_s} s")
            time.sleep(0.01)
        port = bound_port(server)
        yield RunningServer(f"http://127.0.0.1:{port}", port, app, server)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
