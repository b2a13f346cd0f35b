"""Each queued server's own knobs (LitServe, BentoML, Ray Serve, TorchServe): which a framework has, its
equivalent for a knob it lacks, the framework an app uses, and the winner as the framework's code."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from qbench.tune.knobs.versions import KnobVersionError

LITSERVE_API_KNOBS: Final = ("max_batch_size", "batch_timeout")
LITSERVE_SERVER_KNOBS: Final = ("workers_per_device",)
BENTOML_API_KNOBS: Final = ("max_batch_size", "max_latency_ms")
BENTOML_SERVICE_KNOBS: Final = ("workers", "max_concurrency")
RAYSERVE_BATCH_KNOBS: Final = ("max_batch_size", "batch_wait_timeout_s", "max_concurrent_batches")
RAYSERVE_DEPLOYMENT_KNOBS: Final = ("num_replicas", "max_ongoing_requests", "max_queued_requests")
TORCHSERVE_KNOBS: Final = ("batch_size", "max_batch_delay", "workers", "job_queue_size")
#: framework -> its knobs
KNOBS: Final[dict[str, tuple[str, ...]]] = {"litserve": LITSERVE_API_KNOBS + LITSERVE_SERVER_KNOBS,
                                            "bentoml": BENTOML_API_KNOBS + BENTOML_SERVICE_KNOBS,
                                            "rayserve": RAYSERVE_BATCH_KNOBS + RAYSERVE_DEPLOYMENT_KNOBS,
                                            "torchserve": TORCHSERVE_KNOBS}
#: knobs only some framework has (Gradio and the reference server lack them), and whose they are
FRAMEWORK_ONLY: Final = {"batch_timeout": "litserve", "workers_per_device": "litserve",
                         "max_latency_ms": "bentoml", "workers": "BentoML or TorchServe",
                         "max_concurrency": "bentoml",
                         **{k: "rayserve" for k in ("batch_wait_timeout_s", "max_concurrent_batches",
                                                    *RAYSERVE_DEPLOYMENT_KNOBS)},
                         **{k: "torchserve" for k in ("batch_size", "max_batch_delay", "job_queue_size")}}
_NAMES: Final = {"litserve": "LitServe", "gradio": "Gradio", "bentoml": "BentoML", "rayserve": "Ray Serve",
                 "torchserve": "TorchServe"}

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
        "batch_size": "max_batch_size",
        "max_batch_delay": "batch_timeout (seconds: max_batch_delay=10 is batch_timeout=0.01)",
        "job_queue_size": "",  # LitServe queues without a cap
    },
    "bentoml": {
        "concurrency_limit": "workers (processes, each with its own batcher)",
        "default_concurrency_limit": "workers",
        "concurrency_count": "workers",
        "num_workers": "workers",
        "workers_per_device": "workers",
        "max_size": "max_concurrency (requests in flight per worker, running or waiting: 429 past it)",
        "batch_wait_ms": "none: max_latency_ms is the latency past which its batcher refuses a request",
        "batch_timeout": "none: max_latency_ms is the latency past which its batcher refuses a request",
        "batch_size": "max_batch_size",
        "max_batch_delay": "none: max_latency_ms is the latency past which its batcher refuses a request",
        "job_queue_size": "max_concurrency (requests in flight per worker, running or waiting: 429 past it)",
        "max_threads": "",
        "concurrency_id": "",
        "ssr_mode": "",
    },
    "rayserve": {
        "concurrency_limit": "max_ongoing_requests (requests each replica runs at once; num_replicas "
                             "replicas)",
        "default_concurrency_limit": "max_ongoing_requests",
        "concurrency_count": "max_ongoing_requests",
        "num_workers": "num_replicas (replica processes of the deployment)",
        "workers": "num_replicas (replica processes of the deployment)",
        "workers_per_device": "num_replicas (replica processes of the deployment)",
        "max_size": "max_queued_requests (requests waiting for a replica: 503 past it; -1 no cap)",
        "max_concurrency": "max_queued_requests plus max_ongoing_requests",
        "batch_wait_ms": "batch_wait_timeout_s (seconds: batch_wait_ms=10 is batch_wait_timeout_s=0.01)",
        "batch_timeout": "batch_wait_timeout_s (seconds)",
        "batch_size": "max_batch_size (in @serve.batch)",
        "max_batch_delay": "batch_wait_timeout_s (seconds: max_batch_delay=10 is batch_wait_timeout_s=0.01)",
        "job_queue_size": "max_queued_requests (requests waiting for a replica: 503 past it; -1 no cap)",
        "max_latency_ms": "",
        "max_threads": "",
        "concurrency_id": "",
        "ssr_mode": "",
    },
    "torchserve": {
        "max_batch_size": "batch_size (a model's batches, formed by TorchServe's frontend)",
        "concurrency_limit": "workers (worker processes per model; each runs one batch at a time)",
        "default_concurrency_limit": "workers",
        "concurrency_count": "workers",
        "num_workers": "workers",
        "workers_per_device": "workers",
        "num_replicas": "workers",
        "max_ongoing_requests": "workers (each runs one batch at a time)",
        "max_size": "job_queue_size (requests waiting per model: 503 past it; its default 100)",
        "max_queued_requests": "job_queue_size",
        "max_concurrency": "job_queue_size plus the batches its workers run",
        "batch_wait_ms": "max_batch_delay (milliseconds: the most a batch waits to fill from its first "
                         "request)",
        "batch_timeout": "max_batch_delay (milliseconds: batch_timeout=0.01 is max_batch_delay=10)",
        "batch_wait_timeout_s": "max_batch_delay (milliseconds)",
        "max_latency_ms": "",
        "max_concurrent_batches": "workers",
        "max_threads": "",
        "concurrency_id": "",
        "ssr_mode": "",
    },
    "gradio": {
        "batch_size": "max_batch_size (on an event declared batch=True)",
        "max_batch_delay": "none in Gradio, which runs a batch as soon as a worker is free",
        "job_queue_size": "max_size (the waiting requests)",
        "batch_timeout": "none in Gradio, which runs a batch as soon as a worker is free (the reference "
                         "server's batch_wait_ms waits for one to fill)",
        "workers_per_device": "concurrency_limit (per event; concurrency_count in 3.x)",
        "workers": "concurrency_limit (per event; concurrency_count in 3.x)",
        "max_concurrency": "max_size (the waiting requests; the running ones are concurrency_limit's)",
        "max_latency_ms": "",
        "num_replicas": "concurrency_limit (per event; concurrency_count in 3.x)",
        "max_ongoing_requests": "concurrency_limit (per event; concurrency_count in 3.x)",
        "max_queued_requests": "max_size (the waiting requests)",
        "batch_wait_timeout_s": "none in Gradio, which runs a batch as soon as a worker is free",
        "max_concurrent_batches": "",
    },
}

_IMPORTS: Final = {
    "litserve": re.compile(r"^\s*(import\s+litserve\b|from\s+litserve[\s.])", re.MULTILINE),
    "bentoml": re.compile(r"^\s*(import\s+bentoml\b|from\s+bentoml[\s.])", re.MULTILINE),
    "rayserve": re.compile(r"^\s*(import\s+ray\.serve\b|from\s+ray\s+import\s+(\(\s*)?([\w, ]+,\s*)?serve\b"
                           r"|from\s+ray\.serve[\s.])", re.MULTILINE),
    # a TorchServe config.properties (`qbench sweep --app config.properties`): what it loads, from where
    "torchserve": re.compile(r"^\s*(load_models|model_store|inference_address)\s*=", re.MULTILINE),
}


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
    """The winner as LitServe code (the app's own values where the sweep left them)."""
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


def check_framework_values(grid_values: Mapping[str, Iterable[Any]], framework: str, target: str) -> None:
    """Raise KnobVersionError for a value the framework refuses (BentoML: max_batch_size <= 1)."""
    sizes = [v for v in grid_values.get("max_batch_size", ()) if isinstance(v, int | float) and v <= 1]
    if framework == "bentoml" and sizes:
        raise KnobVersionError(f"{target} is a BentoML service: max_batch_size={sizes[0]:g} is not one "
                               "BentoML takes (it must be over 1; one request at a time is an API without "
                               "batchable=True, a change to its code): sweep 2 or more")


def bentoml_code(knobs: Mapping[str, Any], service_class: str = "MyService", api_name: str = "predict",
                 own: Mapping[str, Any] | None = None) -> str:
    """The winner as BentoML code (the service's own values where the sweep left them)."""
    own = own or {}
    pick = {k: knobs.get(k, own.get(k)) for k in (*BENTOML_API_KNOBS, *BENTOML_SERVICE_KNOBS)}
    service_args = [f"workers={pick['workers']}"] if pick["workers"] is not None else []
    if pick["max_concurrency"] is not None:
        service_args.append(f'traffic={{"max_concurrency": {pick["max_concurrency"]}}}')
    api_args = ["batchable=True"] + [f"{k}={pick[k]}" for k in BENTOML_API_KNOBS if pick[k] is not None]
    return "\n".join([f"@bentoml.service({', '.join(service_args)})", f"class {service_class}:",
                      f"    @bentoml.api({', '.join(api_args)})", f"    def {api_name}(self, ...): ..."])


def rayserve_code(knobs: Mapping[str, Any], deployment: str = "MyModel", method: str = "predict",
                  own_batch: Mapping[str, Any] | None = None, own_deployment: Mapping[str, Any] | None = None,
                  batched: bool = True) -> str:
    """The winner as Ray Serve code, and as a Serve config file's entry (the app's own values kept)."""
    own_batch, own_deployment = own_batch or {}, own_deployment or {}
    batch = {k: knobs.get(k, own_batch.get(k)) for k in RAYSERVE_BATCH_KNOBS}
    batch = {k: v for k, v in batch.items() if v is not None}
    options = {k: knobs.get(k, own_deployment.get(k)) for k in RAYSERVE_DEPLOYMENT_KNOBS}
    options = {k: v for k, v in options.items() if v is not None}
    lines = [f"@serve.deployment({', '.join(f'{k}={v}' for k, v in options.items())})",
             f"class {deployment}:"]
    if batched:
        lines += [f"    @serve.batch({', '.join(f'{k}={v}' for k, v in batch.items())})",
                  f"    async def {method}(self, inputs: list) -> list: ..."]
    if options:
        lines += ["# or in a Serve config file (serve deploy / serve run config.yaml):",
                  f"#   deployments: [{{name: {deployment}, "
                  + ", ".join(f"{k}: {v}" for k, v in options.items()) + "}]"]
    return "\n".join(lines)


def torchserve_code(knobs: Mapping[str, Any], models: Sequence[Mapping[str, Any]] = (),
                    own: Mapping[str, Any] | None = None) -> str:
    """The winner as config.properties lines, and as a model-config.yaml (the model's own values kept)."""
    own = own or {}
    pick = {k: knobs.get(k, own.get(k)) for k in TORCHSERVE_KNOBS}
    entry: dict[str, Any] = {}
    if pick["batch_size"] is not None:
        entry["batchSize"] = pick["batch_size"]
    if pick["max_batch_delay"] is not None:
        entry["maxBatchDelay"] = pick["max_batch_delay"]
    if pick["workers"] is not None:
        entry["minWorkers"] = entry["maxWorkers"] = pick["workers"]
    named = [(str(m.get("name") or "my_model"), str(m.get("version") or "1.0")) for m in models] or [
        ("my_model", "1.0")]
    models_json = json.dumps({name: {version: entry} for name, version in named})
    lines = ["# config.properties", f"models={models_json}"]
    if pick["job_queue_size"] is not None:
        lines.append(f"job_queue_size={pick['job_queue_size']}")
    yaml = [f"{key}: {value}" for key, value in entry.items()]
    if pick["job_queue_size"] is not None:
        yaml.append(f"jobQueueSize: {pick['job_queue_size']}")
    lines += ["# or in the model's model-config.yaml (torch-model-archiver --config-file; it wins over "
              "models=):", *(f"#   {line}" for line in yaml)]
    return "\n".join(lines)

