"""Each queued server's own knobs: which a framework has, the equivalent where it lacks one, the code.

    framework    its knobs (set by qbench's startup hook in an unmodified app)
    gradio       the queue knobs of qbench.tune.knobs.versions (per release)
    litserve     LitAPI(max_batch_size, batch_timeout)   LitServer(workers_per_device)

A sweep names knobs as the framework does. A knob the app's framework lacks is an error before any load,
naming the framework's equivalent (`check_framework_knobs`): LitServe has no concurrency limit (each
inference worker process runs one request, or one batch, at a time: `workers_per_device` of them per
device), no queue cap and no `batch_wait_ms` (its `batch_timeout` is in seconds).

`app_framework(source)` reads which one an app uses from its code (`import litserve`); the hook's record
says which one it really started.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from qbench.tune.knobs.versions import KnobVersionError

LITSERVE_API_KNOBS: Final = ("max_batch_size", "batch_timeout")
LITSERVE_SERVER_KNOBS: Final = ("workers_per_device",)
#: framework -> its knobs
KNOBS: Final[dict[str, tuple[str, ...]]] = {"litserve": LITSERVE_API_KNOBS + LITSERVE_SERVER_KNOBS}
#: knobs only some framework has (Gradio and the reference server lack them), and whose they are
FRAMEWORK_ONLY: Final = {"batch_timeout": "litserve", "workers_per_device": "litserve"}
_NAMES: Final = {"litserve": "LitServe", "gradio": "Gradio"}

_WORKERS = ("workers_per_device (inference processes per device; each runs one request, or one batch, at a "
            "time)")
#: framework -> {a knob it lacks: its equivalent there ("" none)}
EQUIVALENTS: Final[dict[str, dict[str, str]]] = {
    "litserve": {
        "concurrency_limit": _WORKERS,
        "default_concurrency_limit": _WORKERS,
        "concurrency_count": _WORKERS,
        "batch_wait_ms": "batch_timeout (seconds: batch_wait_ms=10 is batch_timeout=0.01)",
        "max_size": "",  # LitServe queues without a cap
        "max_threads": "",
        "concurrency_id": "",
        "num_workers": _WORKERS,
        "ssr_mode": "",
    },
    "gradio": {
        "batch_timeout": "none in Gradio, which runs a batch as soon as a worker is free (the reference "
                         "server's batch_wait_ms waits for one to fill)",
        "workers_per_device": "concurrency_limit (per event; concurrency_count in 3.x)",
    },
}

_IMPORTS: Final = {"litserve": re.compile(r"^\s*(import\s+litserve\b|from\s+litserve[\s.])", re.MULTILINE)}


def framework_name(framework: str) -> str:
    return _NAMES.get(framework, framework)


def app_framework(source: str) -> str | None:
    """The framework an app's code imports (None: none qbench knows other than Gradio)."""
    for framework, pattern in _IMPORTS.items():
        if pattern.search(source):
            return framework
    return None


def check_framework_knobs(knobs: Iterable[str], framework: str, target: str) -> None:
    """Raise KnobVersionError for the first knob `framework` lacks, naming its equivalent."""
    own = KNOBS.get(framework)
    for knob in knobs:
        base, event = knob.partition("@")[::2]
        if own is not None and base in own and event:
            raise KnobVersionError(f"{target} is a {framework_name(framework)} app: its knobs are not per "
                                   f"event ({knob!r}); sweep {base!r}")
        if own is not None and base in own or own is None and base not in FRAMEWORK_ONLY:
            continue
        equivalent = EQUIVALENTS.get(framework, {}).get(base, "")
        instead = f"; the equivalent there is {equivalent}" if equivalent else "; it has no equivalent"
        known = f" (its knobs: {', '.join(own)})" if own else ""
        raise KnobVersionError(f"{target} is a {framework_name(framework)} app, which has no {base!r} "
                               f"knob{instead}{known}. Sweep the equivalent instead (or drop the axis)")


def litserve_code(knobs: Mapping[str, Any], api_class: str = "MyAPI",
                  own: Mapping[str, Any] | None = None) -> str:
    """The winner as LitServe code: the API's batch settings, the server's workers (the app's own values
    where the sweep left them, LitServe's defaults otherwise)."""
    own = own or {}
    api = {k: knobs.get(k, own.get(k)) for k in LITSERVE_API_KNOBS}
    api = {k: v for k, v in api.items() if v is not None}
    workers = knobs.get("workers_per_device", own.get("workers_per_device"))
    api_args = ", ".join(f"{k}={v}" for k, v in api.items())
    server_args = "api" + (f", workers_per_device={workers}" if workers is not None else "")
    lines = [f"api = {api_class}({api_args})", f"server = ls.LitServer({server_args})"]
    size = api.get("max_batch_size")
    if isinstance(size, int) and size > 1:
        lines.insert(0, "# predict() gets a list of up to max_batch_size inputs (batch/unbatch split them)")
    return "\n".join(lines)
