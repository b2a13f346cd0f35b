"""Non-Gradio endpoints: /metrics, /status, /status/tokens, /healthz and the live reconfiguration
/admin/config.

`POST /admin/config` exists only if the server was started with an admin token; it needs
`Authorization: Bearer <token>` and takes a JSON body of knobs, all optional:

    {"queue": {"default_concurrency_limit": 2, "max_size": 16, "status_update_rate": "auto"},
              # or "concurrency_count": 2 on a `gradio: 3` server
     "launch": {"max_threads": 8},
     "show_error": true,
     "functions": {"<api_name>": {"concurrency_limit": 4, "batch": true, "max_batch_size": 8,
                                  "batch_wait_ms": 5}}}

New values apply to events dispatched after the call; the answer is the effective settings and hash.
"""

from __future__ import annotations

import hmac
import resource
import time
from pathlib import Path
from typing import Any

import psutil
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reference_server.http.gradio_routes import ClientError, JSONResponse, json_body, state_of
from reference_server.settings import ServerSettings, SettingsError, parse_settings

ALLOWED = {
    "queue": {"default_concurrency_limit", "concurrency_count", "max_size", "status_update_rate"},
    "launch": {"max_threads"},
    "function": {"concurrency_limit", "batch", "max_batch_size", "batch_wait_ms"},
}


async def metrics(request: Request) -> Response:
    body = state_of(request).metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


async def healthz(request: Request) -> Response:
    ready = state_of(request).ready
    return JSONResponse({"ready": ready}, status_code=200 if ready else 503)


def peak_rss_bytes() -> int:
    """This process's peak RSS. Linux: VmHWM, which belongs to this program's address space; getrusage's
    ru_maxrss would survive fork+exec and report the parent's peak (e.g. a 300 MB launcher's)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def status(request: Request) -> Response:
    state = state_of(request)
    proc = psutil.Process()
    cpu = proc.cpu_times()
    gpu = {"gpu": state.gpu.snapshot()} if state.gpu is not None and state.gpu.available else {}
    return JSONResponse({
        "settings": state.settings.summary(),
        "config_hash": state.settings.config_hash(),
        "uptime_s": time.time() - state.started_at,
        "ready": state.ready,
        "device": state.device,
        "jobs_completed": state.queue.completed,
        "events_waiting": state.queue.waiting_count,
        "jobs_running": state.queue.running_jobs,
        "leaked_bytes": sum(map(len, state.queue.leaked)),  # queue.leak_bytes_per_event, kept so far
        "rss_bytes": proc.memory_info().rss,
        "peak_rss_bytes": peak_rss_bytes(),
        "torch_cuda_memory": state.torch_memory(),
        "cpu_s": cpu.user + cpu.system,  # this process's CPU time (all threads) since it started
        "event_loop_cpu_s": _main_thread_cpu_s(proc),  # the main thread's, where the event loop runs
        "event_loop_wait_s": _main_thread_wait_s(proc),  # its time ready to run but waiting for a core
        "children_cpu_s": _children_cpu_s(proc),  # its live child processes' (front ends, decode workers)
        **gpu,  # per GPU: utilisation, memory, power, busy_s / sampled_s integrals (observe.gpu)
        "workloads": {fn.name: fn.workload.describe() for fn in state.functions},
    })


async def status_tokens(request: Request) -> Response:
    """The OpenAI front's per-token send times (observe.token_log); `?clear=true` empties it."""
    log = state_of(request).tokens
    body = log.snapshot()
    if request.query_params.get("clear", "").lower() in ("1", "true", "yes"):
        log.clear()
    return JSONResponse(body)


def _children_cpu_s(proc: psutil.Process) -> float:
    """CPU time of the live child processes (HTTP front ends, decode workers), user + system."""
    total = 0.0
    for child in proc.children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _main_thread_cpu_s(proc: psutil.Process) -> float | None:
    """CPU time of the main thread (on Linux its id is the process id); None where threads are hidden."""
    try:
        return next((t.user_time + t.system_time for t in proc.threads() if t.id == proc.pid), None)
    except (psutil.Error, OSError):
        return None


def _main_thread_wait_s(proc: psutil.Process) -> float | None:
    """Time the main thread spent runnable but waiting for a core (Linux schedstat, its second field,
    in ns): on a shared host a busy event loop gets only part of a core, and this is the rest it wanted.
    None where the kernel does not say."""
    try:
        fields = Path(f"/proc/{proc.pid}/task/{proc.pid}/schedstat").read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


_ABSENT = object()


def _overrides(body: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    """Admin JSON -> dotted overrides; unknown sections or knobs are a 422. A queue or launch knob that
    cannot change at runtime may be sent with its current value (settings read from /status and
    posted back whole), and is then left alone."""
    out: dict[str, Any] = {}
    for section, value in body.items():
        if section == "show_error":
            out["show_error"] = value
        elif section in ("queue", "launch") and isinstance(value, dict):
            for key, v in value.items():
                if key not in ALLOWED[section] and v == getattr(getattr(settings, section), key, _ABSENT):
                    continue
                if key not in ALLOWED[section]:
                    raise ClientError(422, f"{section}.{key} cannot be changed at runtime; "
                                           f"allowed: {sorted(ALLOWED[section])}")
                out[f"{section}.{key}"] = v
        elif section == "functions" and isinstance(value, dict):
            out.update(_function_overrides(value, settings))
        else:
            raise ClientError(422, f"unknown or malformed section {section!r}; expected queue, launch, "
                                   "functions (a mapping of api_name to knobs) or show_error")
    return out


def _function_overrides(value: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, knobs in value.items():
        index = settings.function_index(name)
        if index is None or not isinstance(knobs, dict):
            raise ClientError(422, f"functions.{name}: no such api_name (or its knobs are not a mapping)")
        for key, v in knobs.items():
            if key not in ALLOWED["function"]:
                raise ClientError(422, f"functions.{name}.{key} cannot be changed at runtime; "
                                       f"allowed: {sorted(ALLOWED['function'])}")
            out[f"functions.{index}.{key}"] = v
    return out


def _apply_dotted(settings: ServerSettings, overrides: dict[str, Any]) -> ServerSettings:
    raw = settings.model_dump(mode="json", context={"reveal_secrets": True})  # keep auth as it is
    for dotted, value in overrides.items():
        node: Any = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    return parse_settings(raw, "admin request")


async def admin_config(request: Request) -> Response:
    state = state_of(request)
    token = state.settings.admin_token
    if token is None:
        raise ClientError(404, "Not Found")
    auth = request.headers.get("authorization", "")
    if not auth.startswith("Bearer "):
        raise ClientError(401, "missing 'Authorization: Bearer <admin token>' header")
    if not hmac.compare_digest(auth[len("Bearer "):].encode(), token.encode()):
        raise ClientError(403, "wrong admin token")
    body = await json_body(request)
    try:
        new = _apply_dotted(state.settings, _overrides(body, state.settings))
        state.apply(new)
    except (SettingsError, ValueError) as exc:
        raise ClientError(422, str(exc)) from None
    return JSONResponse({"settings": new.summary(), "config_hash": new.config_hash()})


ROUTES = [
    Route("/metrics", metrics, methods=["GET"]),
    Route("/status", status, methods=["GET"]),
    Route("/status/tokens", status_tokens, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/admin/config", admin_config, methods=["POST"]),
]
