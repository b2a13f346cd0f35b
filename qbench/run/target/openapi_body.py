"""A plain HTTP server's request body from its OpenAPI description (`$ref`s followed), for `qbench init`."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32  # nested references followed at most (a recursive model stops there)


def request_schema(spec: Any, path: str) -> dict[str, Any] | None:
    """POST `path`'s JSON body schema, resolved (None: none declared)."""
    paths = spec.get("paths") if isinstance(spec, dict) else None
    operation = (paths or {}).get(path, {}).get("post") if isinstance(paths, dict) else None
    if not isinstance(operation, dict):
        return None
    body = resolve(spec, operation.get("requestBody"))
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, dict):
        return None
    json_type = next((k for k in content if k == "application/json"), None) or next(
        (k for k in content if "json" in k), None)
    media = content.get(json_type) if json_type else None
    schema = resolve(spec, media.get("schema")) if isinstance(media, dict) else None
    return schema if isinstance(schema, dict) and schema else None


def resolve(spec: Any, node: Any, depth: int = 0) -> Any:
    """`node` with local `$ref`s followed and `allOf` merged, down its properties, items and alternatives."""
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _pointer(spec, ref)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return resolve(spec, {**target, **rest} if isinstance(target, dict) else rest, depth + 1)
    parts = node.get("allOf")
    if isinstance(parts, list):
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for part in (resolve(spec, p, depth + 1) for p in parts):
            if isinstance(part, dict):
                merged["properties"] = {**merged.get("properties", {}), **part.get("properties", {})}
                merged["required"] = [*merged.get("required", []), *part.get("required", [])]
                merged.setdefault("type", part.get("type"))
        return resolve(spec, merged, depth + 1)
    out = dict(node)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: resolve(spec, v, depth + 1) for k, v in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        out["items"] = resolve(spec, node["items"], depth + 1)
    for key in ("oneOf", "anyOf"):
        if isinstance(node.get(key), list):
            out[key] = [resolve(spec, v, depth + 1) for v in node[key]]
    return out


def _pointer(spec: Any, ref: str) -> Any:
    """The node a local JSON pointer (`#/components/schemas/Model`) names; {} where it names nothing."""
    if not ref.startswith("#/"):
        return {}
    node = spec
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node


def body_fields(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, schema, required) of an object body's fields, required first; [] for a non-object body."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return []
    required = [str(r) for r in schema.get("required") or [] if r in properties]
    order = required + [str(n) for n in properties if n not in required]
    return [(name, properties[name] if isinstance(properties[name], dict) else {}, name in required)
            for name in order]
