"""Which queued inference framework serves a plain HTTP target (`read_framework`), and the request keys
its app's code reads (`request_keys`). Design: docs/design/records-and-results.md."""

from __future__ import annotations

import ast
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from qbench.run import control


@dataclass(frozen=True)
class Framework:
    """A recognised framework and the facts its own endpoints gave."""

    name: str  # "LitServe"
    facts: str  # in words, for the scenario's header: "1 worker per device on cpu, timeout 30 s"
    streamed: tuple[str, ...] = ()  # its paths that stream their answer
    convention: dict[str, str] = field(default_factory=dict)  # its docs' request body, "$0" the input
    schema_hint: str = ""  # where its request schema comes from, for a server that declares none
    batchable: tuple[str, ...] = ()  # its paths whose list inputs it batches across requests (BentoML)
    queue_cap: str = ""  # its own cap on waiting requests in its code, {waiting} the advised size ("": none)


def litserve(info: Any) -> Framework | None:
    """LitServe, from its GET /info (None: not LitServe's shape)."""
    server = info.get("server") if isinstance(info, dict) else None
    if not isinstance(server, dict) or "workers_per_device" not in server or "model" not in info:
        return None
    devices = _flat(server.get("devices") or [])
    names = sorted({str(d).split(":")[0] for d in devices}) or ["?"]
    workers = server.get("workers_per_device")
    timeout = server.get("timeout")
    facts = f"{workers} worker{'s' if workers != 1 else ''} per device on {len(devices)} " \
            f"{'/'.join(names)} device{'s' if len(devices) != 1 else ''}"
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        facts += f", request timeout {timeout:g} s"
    stream = server.get("stream")
    streamed = tuple(str(path) for path, on in stream.items() if on) if isinstance(stream, dict) else ()
    return Framework("LitServe", facts, streamed, {"input": "$0"},
                     "an untyped decode_request(self, request) declares no request schema: give its "
                     "app to `qbench init --app app.py` to read the keys it reads, or type it with a "
                     "pydantic model")


def _flat(devices: Any) -> list[Any]:
    """LitServe's devices: a list, of lists when several per worker."""
    if not isinstance(devices, list):
        return [devices]
    return [d for item in devices for d in (item if isinstance(item, list) else [item])]


def bentoml(schema: Any) -> Framework | None:
    """BentoML, from its GET /schema.json (None: not BentoML's shape); task APIs (`is_task`) are left out."""
    routes = schema.get("routes") if isinstance(schema, dict) and schema.get("type") == "service" else None
    if not isinstance(routes, list):
        return None
    served = [r for r in routes if isinstance(r, dict) and isinstance(r.get("route"), str)
              and not r.get("is_task")]
    batchable = tuple(r["route"] for r in served if r.get("batchable"))
    streamed = tuple(r["route"] for r in served
                     if isinstance(r.get("output"), dict) and r["output"].get("is_stream"))
    listed = ", ".join(f"POST {r['route']}" + (" (batchable)" if r["route"] in batchable else "")
                       for r in served) or "no API"
    return Framework("BentoML", f"service {schema.get('name') or '?'}: {listed}", streamed,
                     schema_hint="its /schema.json declares no input fields for this API",
                     batchable=batchable,
                     queue_cap=BENTOML_CAP)


def own_cap_lead(server: str, now: str = "") -> str:
    """How the queue-cap advice opens for a server whose own cap is a setting of the app's code: its cap
    as the app sets it now (`now`, "max_queued_requests=57"; "": none set, so it queues without one)."""
    if now:
        return f"{server} caps its queue with your app's own {now} now; advised instead"
    return f"{server} queues without a cap unless its own is set"


#: BentoML's own cap on requests in flight, for the overload advice ({waiting}: the advised queue)
BENTOML_CAP = ('traffic={{"max_concurrency": N}} in @bentoml.service, N = {waiting} plus the requests it '
               "runs at once (it counts both, per worker; past N a 429 at once). A batchable API's batcher "
               "also refuses (503 'process is overloaded') what it expects to wait past its max_latency_ms")


def rayserve(routes: Any) -> Framework | None:
    """Ray Serve, from its proxy's GET /-/routes (None: not that shape; empty: none deployed yet)."""
    if not isinstance(routes, dict) or not all(isinstance(k, str) and k.startswith("/")
                                                and isinstance(v, str) for k, v in routes.items()):
        return None
    listed = ", ".join(f"{prefix} ({name})" for prefix, name in sorted(routes.items()))
    facts = f"applications at {listed}" if listed else "no application deployed yet"
    return Framework("Ray Serve", facts, convention={"input": "$0"},
                     schema_hint="a deployment that reads its request itself (`await request.json()`) "
                     "declares no request schema: give its app to `qbench init --app app.py` to read the "
                     "keys it reads, or serve it through FastAPI (@serve.ingress), whose /openapi.json does",
                     queue_cap=RAYSERVE_CAP)


#: Ray Serve's own cap on waiting requests, for the overload advice ({waiting}: the advised queue)
RAYSERVE_CAP = ("max_queued_requests={waiting} in @serve.deployment (requests waiting for a replica, at "
                "each proxy; past it a 503 at once; its default -1 queues without a cap)")


def torchserve(description: Any, models: Sequence[Mapping[str, Any]] = (), management: str = ""
               ) -> Framework | None:
    """TorchServe, from its inference API's GET /api-description (None: not TorchServe's), its `models` as
    its management API at `management` describes them (GET /models/{name}; none when it did not answer)."""
    info = description.get("info") if isinstance(description, dict) else None
    if not isinstance(info, dict) or info.get("title") != "TorchServe APIs":
        return None
    version = f"TorchServe {info['version']}" if info.get("version") else "TorchServe"
    if models:
        facts = f"{version}, management API at {management}: " + "; ".join(model_facts(m) for m in models)
    else:
        facts = f"{version}; its models unknown: its management API did not answer at {management or '?'}"
    return Framework("TorchServe", facts,
                     schema_hint="it hands each request's body to the model's handler as it came (data[i]"
                     "[\"body\"]) and declares no request schema: give the handler (or the config.properties "
                     "whose model store holds it) to `qbench init --app` to read the keys it reads",
                     queue_cap=TORCHSERVE_CAP)


def model_facts(model: Mapping[str, Any]) -> str:
    """One TorchServe model as its management API describes it, in words: "batched 1.0: batchSize 4,
    maxBatchDelay 10 ms, 1 of minWorkers 1 READY, job queue 100"."""
    workers = [w for w in model.get("workers") or [] if isinstance(w, dict)]
    ready = sum(1 for w in workers if w.get("status") == "READY")
    queue = model.get("jobQueueStatus") or {}
    size = (queue.get("remainingCapacity") or 0) + (queue.get("pendingRequests") or 0) if queue else None
    said = (f"{model.get('modelName', '?')} {model.get('modelVersion', '')}".rstrip()
            + f": batchSize {model.get('batchSize')}, maxBatchDelay {model.get('maxBatchDelay')} ms, "
            f"{ready} of minWorkers {model.get('minWorkers')} READY")
    return said + (f", job queue {size}" if size is not None else "")


def management_url(base_url: str) -> str:
    """A TorchServe's management API by its default layout: the inference URL's host, the next port."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port + 1}"


#: TorchServe's own cap on waiting requests, for the overload advice ({waiting}: the advised queue)
TORCHSERVE_CAP = ("job_queue_size={waiting} in config.properties (requests waiting for a worker, per model; "
                  "past it a 503 at once; its default 100), or jobQueueSize in the model's model-config.yaml")

#: Each server's own cap on waiting requests by its name (LitServe has none), for advice on a sweep
OWN_CAPS = {"bentoml": BENTOML_CAP, "rayserve": RAYSERVE_CAP, "torchserve": TORCHSERVE_CAP}


def bentoml_spec(schema: dict[str, Any]) -> dict[str, Any]:
    """BentoML's /schema.json routes as OpenAPI paths: each API's input schema as its POST's JSON body."""
    paths: dict[str, Any] = {}
    for route in schema.get("routes") or []:
        if isinstance(route, dict) and isinstance(route.get("route"), str) and not route.get("is_task"):
            body = {"content": {"application/json": {"schema": route.get("input") or {}}}}
            paths[route["route"]] = {"post": {"requestBody": body}}
    return {"paths": paths}


# ---------------------------------------------------------------- the app's code


def request_keys(app: Path) -> list[str]:
    """The constant keys the app's request decoder (LitServe, Ray Serve, TorchServe; a config.properties: its
    handlers) reads from its JSON body, in first-read order; [] when none."""
    if app.suffix == ".properties":
        return [key for where, source in torchserve_handlers(app) for key in source_keys(source, where)]
    return source_keys(app.read_text(encoding="utf-8"), str(app))


def source_keys(source: str, where: str) -> list[str]:
    """request_keys of one file's `source` (`where`: its name, for a syntax error's message)."""
    tree = ast.parse(source, filename=where)
    keys: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = [a.arg for a in node.args.args]
        if node.name == "decode_request" and len(args) >= 2:
            found = _read_keys(node, args[1])
        elif node.name == "__call__" and len(args) >= 2:
            found = _json_keys(node, args[1])
        elif node.name in ("preprocess", "handle") and args:
            found = _envelope_keys(node, args[1] if args[0] == "self" and len(args) > 1 else args[0])
        else:
            found = []
        for key in found:
            if key not in keys:
                keys.append(key)
    return keys


#: The keys TorchServe puts each request under in the batch it hands a handler (a JSON body is decoded)
ENVELOPE: Final = ("body", "data")


def _envelope_keys(function: ast.AST, batch: str) -> list[str]:
    """Keys read from each request's body in a TorchServe handler's `function` (`batch`: its requests)."""
    bodies = [target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
              and any(_envelope_read(part) for part in ast.walk(node.value))
              for target in node.targets if isinstance(target, ast.Name)]
    keys: list[str] = []
    for body in bodies:
        keys += [key for key in _read_keys(function, body) if key not in ENVELOPE]
    return keys if any(isinstance(node, ast.Name) and node.id == batch for node in ast.walk(function)) else []


def _envelope_read(node: ast.AST) -> bool:
    """`x.get("body")`, `x["body"]` (or "data")."""
    if isinstance(node, ast.Subscript):
        key: ast.expr | None = node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args:
        key = node.args[0]
    else:
        return False
    return isinstance(key, ast.Constant) and key.value in ENVELOPE


def torchserve_properties(config: Path) -> dict[str, str]:
    """A TorchServe config.properties' settings (Java properties: `key=value` lines, # comments)."""
    settings: dict[str, str] = {}
    for line in config.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, sep, value = text.partition("=")
        if sep:
            settings[key.strip()] = value.strip()
    return settings


def torchserve_handlers(config: Path) -> list[tuple[str, str]]:
    """(where, source) of the handlers of the models a TorchServe config.properties loads (model_store)."""
    settings = torchserve_properties(config)
    store = config.parent / settings.get("model_store", "model_store")
    wanted = [part.split("=")[-1].strip() for part in settings.get("load_models", "all").split(",")]
    models = sorted(p for p in store.iterdir() if p.is_dir() or p.suffix == ".mar") \
        if wanted in (["all"], ["ALL"]) and store.is_dir() else [store / name for name in wanted]
    handlers = []
    for model in models:
        try:
            manifest = json.loads(_model_file(model, "MAR-INF/MANIFEST.json") or "")
        except ValueError:
            continue
        handler = str((manifest.get("model") or {}).get("handler") or "").split(":")[0]
        source = _model_file(model, handler) if handler.endswith(".py") else None
        if source is not None:
            handlers.append((f"{model}/{handler}", source))
    return handlers


def _model_file(model: Path, name: str) -> str | None:
    """A file of a TorchServe model, by its path inside it: in its folder, or in its .mar archive."""
    try:
        if model.is_file():
            with zipfile.ZipFile(model) as archive:
                return archive.read(name).decode("utf-8")
        return (model / name).read_text(encoding="utf-8")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


def _json_keys(function: ast.AST, request: str) -> list[str]:
    """Keys read from `request.json()`'s value in `function`, through a name or directly."""
    bodies = [target.id for node in ast.walk(function)
              if isinstance(node, ast.Assign) and _is_json_call(node.value, request)
              for target in node.targets if isinstance(target, ast.Name)]
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and _is_json_call(node.value, request):
            key: ast.expr | None = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.append((node.lineno, node.col_offset, key.value))
    keys = [key for _, _, key in sorted(found)]
    for body in bodies:
        keys += _read_keys(function, body)
    return keys


def _is_json_call(node: ast.expr, request: str) -> bool:
    """`await request.json()` or `request.json()`."""
    call = node.value if isinstance(node, ast.Await) else node
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "json"
            and _is_name(call.func.value, request))


def _read_keys(function: ast.AST, name: str) -> list[str]:
    """Constant string keys read from the variable `name` in `function`, in source order."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and _is_name(node.value, name):
            key: ast.expr | None = node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
              and node.func.attr in ("get", "pop") and _is_name(node.func.value, name)):
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, node.col_offset, key.value))
    return [key for _, _, key in sorted(found)]


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def read_framework(base_url: str, timeout_s: float = 2.0) -> Framework | None:
    """The framework a plain HTTP server is, from the paths it serves (Ray Serve's first), else None."""
    with control.client(timeout_s=timeout_s) as http:
        for path, known in (("/-/routes", rayserve), ("/info", litserve), ("/schema.json", bentoml)):
            try:
                answer = http.get(base_url.rstrip("/") + path)
                body = answer.json() if answer.status_code == 200 else None
                framework = known(body) if answer.status_code == 200 else None
                if framework is not None and path == "/-/routes" and not body:  # {}: Ray's health
                    healthy = http.get(base_url.rstrip("/") + "/-/healthz")  # says "success", another's not
                    framework = framework if healthy.text.strip() == "success" else None
            except (httpx.HTTPError, ValueError):
                continue
            if framework is not None:
                return framework
        return _torchserve_now(http, base_url.rstrip("/"))


def _torchserve_now(http: httpx.Client, base: str) -> Framework | None:
    """TorchServe, its models described by its management API (by its default layout), else None."""
    try:
        answer = http.get(base + "/api-description")
        described = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if torchserve(described) is None:
        return None
    management, models = management_url(base), []
    try:
        listed = http.get(management + "/models").json().get("models") or []
        for name in [m.get("modelName") for m in listed if isinstance(m, dict)]:
            found = http.get(f"{management}/models/{name}").json()
            models += [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
    except (httpx.HTTPError, ValueError, AttributeError):
        models = []
    return torchserve(described, models, management)

