"""`build_app(settings) -> Starlette`: the reference server.

The lifespan owns the expensive things: it builds, loads and warms the workloads, then starts the
queue's dispatcher; handlers (gradio_routes, admin) only admit, enqueue and stream.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from reference_server.auth import AuthMiddleware, Logins
from reference_server.http import admin, gradio3_routes, gradio_routes, http_routes, openai_routes
from reference_server.http.gradio_routes import ClientError, JSONResponse
from reference_server.http.server_state import ServerState, load_workloads, resolve_device
from reference_server.observe.gpu import GpuSampler
from reference_server.settings import ServerSettings, for_device

# The collector's thresholds while serving (Python's: 700, 10, 10). A request allocates a few hundred
# containers (its frames, dicts, messages), nearly all freed within its loop turn: at 700 the youngest
# generation was collected every other prediction, and what survived each collection (the requests in
# flight) was scanned again; at 20,000 most have died before a collection (the core's CPU per image
# prediction, bench/core_cost.py, 16 users: 0.089 -> 0.082 ms, medians of 5).
GC_THRESHOLDS = (20_000, 20, 20)


async def _client_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ClientError)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status)


def build_app(settings: ServerSettings, file_dir: Path | None = None, *,
              resume_gc: bool = False) -> Starlette:
    """The ASGI app. Settings errors (unknown workload, batch generator) raise SettingsError here.
    `resume_gc`: the collector was paused for the start-up (launch.serve) and resumes once it is ready."""
    state = ServerState.create(settings, file_dir)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.device = resolve_device(settings)
        await anyio.to_thread.run_sync(load_workloads, settings, state.functions, state.device)
        if (served := for_device(settings, state.device)) is not settings:
            state.apply(served)  # the presets' on_cuda batch sizes
        await anyio.to_thread.run_sync(state.start_pool)
        state.queue.start()
        state.gpu = GpuSampler(state.metrics.registry)
        state.gpu.start()
        gc.freeze()  # the loaded workloads, modules and settings: never garbage, no longer scanned by each
        # full collection (the request path allocates enough to run them now and then)
        if resume_gc:
            gc.enable()
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        state.ready = True
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            state.ready = False
            await state.queue.stop()
            state.close()

    logins = Logins()  # settings.auth: Gradio's login and cookies, bearer tokens (reference_server.auth)
    auth = Middleware(AuthMiddleware, settings=settings.auth, logins=logins)
    guard = [auth] if settings.auth.enabled else []
    app = Starlette(
        routes=[*gradio3_routes.routes_for(settings.gradio), *openai_routes.ROUTES, *http_routes.ROUTES,
                *admin.ROUTES],
        lifespan=lifespan,
        exception_handlers={ClientError: _client_error},
        middleware=guard,
    )
    app.state.server = state
    # the hot routes' forms for requests forwarded by front ends (front_ends.CoreLink), by endpoint
    app.state.fast_routes = {endpoint: partial(fast, state) for endpoint, fast in gradio_routes.FAST.items()}
    app.state.logins = logins
    return app
