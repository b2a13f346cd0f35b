"""The conformance suite (`gradio_apps.SUITE`) as reference-server settings.

Each `FnSpec` maps onto one reference-server function with the same api_name, position (so the same
fn_index), queue knobs and an equivalent synthetic workload:

    FnSpec kind   reference workload   params
    echo          echo                 {}
    sleep         sleep                {base_ms}           (async, no jitter; a batch sleeps once)
    stream        stream               {chunks, interval_ms}
    fail          fail                 {base_ms}           (a plain exception: {"error": null})
    gr_error      fail                 {user_visible, title, duration, message}  (like gr.Error)
"""

from __future__ import annotations

from typing import Any

from reference_server.settings import ServerSettings, parse_settings

from .gradio_apps import ERROR_DURATION, ERROR_MESSAGE, ERROR_TITLE, FnSpec, QueueSpec


def workload_of(spec: FnSpec) -> tuple[str, dict[str, Any]]:
    """(workload kind, params) equivalent to the Gradio function built from `spec`."""
    if spec.kind == "sleep":
        return "sleep", {"base_ms": spec.sleep_s * 1000}
    if spec.kind == "stream":
        return "stream", {"chunks": spec.chunks, "interval_ms": spec.sleep_s * 1000}
    if spec.kind == "fail":
        return "fail", {"base_ms": spec.sleep_s * 1000}
    if spec.kind == "gr_error":
        visible = {"message": ERROR_MESSAGE, "title": ERROR_TITLE, "duration": ERROR_DURATION}
        return "fail", {"user_visible": True, **visible}
    return spec.kind, {}


def function_settings(spec: FnSpec) -> dict[str, Any]:
    workload, params = workload_of(spec)
    return {
        "api_name": spec.api_name,
        "workload": workload,
        "params": params,
        "concurrency_limit": spec.concurrency_limit,
        "concurrency_id": spec.concurrency_id,
        "batch": spec.batch,
        "max_batch_size": spec.max_batch_size,
    }


def reference_settings(
    specs: tuple[FnSpec, ...], queue: QueueSpec, extra_functions: tuple[dict[str, Any], ...] = ()
) -> ServerSettings:
    """Settings serving `specs` (then `extra_functions`, raw settings dicts) on a free port."""
    raw = {
        "functions": [function_settings(s) for s in specs] + list(extra_functions),
        "queue": {
            "default_concurrency_limit": queue.default_concurrency_limit,
            "max_size": queue.max_size,
            "status_update_rate": queue.status_update_rate,
        },
        "launch": {"max_threads": queue.max_threads, "host": "127.0.0.1", "port": 0},
    }
    return parse_settings(raw, "tests/conformance suite")
