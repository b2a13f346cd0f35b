"""What `/config` and `/gradio_api/info` say: Gradio-shaped descriptions of the served functions.

Each function gets its own input and output components (ids are allocated in order), and its
dependency `id` is its position in `settings.functions` (the fn_index clients send).
"""

from __future__ import annotations

from typing import Any

from reference_server.io.components import component_config, parameter_info, return_info
from reference_server.queue import gradio3
from reference_server.queue.runtime import FunctionRuntime
from reference_server.settings import ServerSettings

#: Reported as config.version: gradio_client gates /info (> 3.36.1) and /cancel (> 4.29.0) on it.
GRADIO_VERSION = "6.31.0"
#: The release each `gradio:` setting emulates (its config.version).
VERSIONS = {3: gradio3.VERSION, 4: "4.44.1", 5: "5.50.0", 6: GRADIO_VERSION}
API_PREFIX = "/gradio_api"


def api_prefix(gradio: int) -> str:
    """Where the queue, upload and info routes sit: under /gradio_api from 5.0, at the root before."""
    return API_PREFIX if gradio >= 5 else ""


def _dependency(fn: FunctionRuntime, inputs: list[int], outputs: list[int]) -> dict[str, Any]:
    s = fn.settings
    return {
        "id": fn.index, "targets": [], "inputs": inputs, "outputs": outputs, "backend_fn": True,
        "js": None, "queue": s.queue, "api_name": s.api_name, "api_description": None,
        "scroll_to_output": False, "show_progress": "full", "show_progress_on": None,
        "batch": s.batch, "max_batch_size": s.max_batch_size, "cancels": [],
        "types": {"generator": fn.workload.is_generator, "cancel": False},
        "collects_event_data": False, "trigger_after": None, "trigger_only_on_success": False,
        "trigger_only_on_failure": False, "trigger_mode": "once", "api_visibility": s.api_visibility,
        "rendered_in": None, "render_id": None, "connection": "sse", "time_limit": None,
        "stream_every": 0.5, "event_specific_args": None, "component_prop_inputs": [],
        "js_implementation": None,
    }


def build_config(settings: ServerSettings, functions: list[FunctionRuntime]) -> dict[str, Any]:
    """The /config body, without `root` (filled per request from the Host header)."""
    components: list[dict[str, Any]] = []
    dependencies: list[dict[str, Any]] = []
    for fn in functions:
        ids_in, ids_out = [], []
        for comp in fn.workload.inputs:
            ids_in.append(len(components) + 1)
            components.append(component_config(ids_in[-1], comp))
        for comp in fn.workload.outputs:
            ids_out.append(len(components) + 1)
            components.append(component_config(ids_out[-1], comp))
        dependencies.append(_dependency(fn, ids_in, ids_out))
    if settings.gradio == 3:
        deps3 = [gradio3.dependency(fn.name, d["inputs"], d["outputs"], fn.settings.queue,
                                    fn.settings.batch, fn.settings.max_batch_size, fn.workload.is_generator)
                 for fn, d in zip(functions, dependencies, strict=True)]
        return gradio3.config(settings.title, settings.show_error, components, deps3)
    config = _config(settings, components, dependencies)
    config["version"] = VERSIONS[settings.gradio]
    return gradio3.config4(config) if settings.gradio == 4 else config


def _config(settings: ServerSettings, components: list[dict[str, Any]], dependencies: list[dict[str, Any]]
            ) -> dict[str, Any]:
    return {
        "version": GRADIO_VERSION, "api_prefix": API_PREFIX, "mode": "blocks", "app_id": 0,
        "dev_mode": False, "analytics_enabled": False, "components": components, "css": None,
        "connect_heartbeat": False, "js": None, "head": None, "title": settings.title,
        "space_id": None, "enable_queue": True, "show_error": settings.show_error,
        "is_colab": False, "max_file_size": settings.max_file_size, "stylesheets": [], "theme": None,
        "protocol": "sse_v3", "body_css": None, "fill_height": False, "fill_width": False,
        "pwa": False, "pages": [["", "Home"]], "page": {}, "mcp_server": False,
        "layout": {"id": 0, "children": [{"id": c["id"]} for c in components]},
        "dependencies": dependencies,
    }


def build_info(functions: list[FunctionRuntime], all_endpoints: bool = False) -> dict[str, Any]:
    """The /gradio_api/info body: public functions (and undocumented ones if all_endpoints)."""
    named: dict[str, Any] = {}
    for fn in functions:
        vis = fn.settings.api_visibility
        if vis == "private" or (vis == "undocumented" and not all_endpoints):
            continue
        named["/" + fn.name] = {
            "parameters": [parameter_info(c, i) for i, c in enumerate(fn.workload.inputs)],
            "returns": [return_info(c) for c in fn.workload.outputs],
            "api_visibility": vis,
            "description": "",
        }
    return {"named_endpoints": named, "unnamed_endpoints": {}}
