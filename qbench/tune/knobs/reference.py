"""A point's knobs -> reference server settings (`apply_server_knobs`: a relaunch; `admin_body`: a live
`POST /admin/config`), and a settings file -> its knob values (`effective_knobs`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from qbench.errors import ScenarioError

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
    """Reference-server settings (a mapping) with a point's server knobs applied: function knobs on the
    function `api_name` (every function if none is), or on one event (`knob@event`); queue/launch knobs."""
    raw: dict[str, Any] = json.loads(json.dumps(dict(base)))  # deep copy of plain data
    names = [f.get("api_name") for f in raw.get("functions", [])]
    targets = (
        [f for f in raw.get("functions", []) if f.get("api_name") == api_name]
        if api_name in names
        else raw.get("functions", [])
    )
    for fn in targets:
        fn.update(_function_knobs(knobs))
        if _function_knobs(knobs):
            fn.pop("on_cuda", None)  # the point's knobs hold on any device (not the preset's CUDA batch)
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
        functions[event].pop("on_cuda", None)


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
