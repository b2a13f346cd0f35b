"""Which queued inference framework serves a plain HTTP target, from what it serves, and what its app's
code says its request body is where the server declares none (`read_framework_name(url)`: which one a
running server is).

    LitServe   GET /info: {"model": ..., "server": {"devices", "workers_per_device", "timeout",
               "stream": {path: bool}, ...}} (litserve.server, 0.2.x); an untyped
               `LitAPI.decode_request(self, request)` publishes no request schema, so the keys it reads
               (`request["input"]`, `request.get("input")`) come from the app's code (`request_keys`)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- the app's code


def request_keys(app: Path) -> list[str]:
    """The keys the app's request decoder reads from its JSON body, in the order it first reads them:
    LitServe's `decode_request(self, request)` in any class of `app` (`request["k"]`, `request.get("k")`).
    [] when there is none or it reads no constant key."""
    tree = ast.parse(app.read_text(encoding="utf-8"), filename=str(app))
    keys: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "decode_request":
            args = [a.arg for a in node.args.args]
            for key in _read_keys(node, args[1]) if len(args) >= 2 else []:
                if key not in keys:
                    keys.append(key)
    return keys


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


def read_framework_name(base_url: str, timeout_s: float = 2.0) -> str | None:
    """The framework a plain HTTP server is, from what it serves (LitServe's GET /info): its name, else
    None."""
    try:
        with control.client(timeout_s=timeout_s) as http:
            answer = http.get(base_url.rstrip("/") + "/info")
            info = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    framework = litserve(info)
    return framework.name if framework is not None else None
