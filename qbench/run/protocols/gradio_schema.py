"""Inputs of a `gradio.Server` app (6.10+): each `@server.api` parameter's JSON schema (from /info) -> a
payload input of that type (`api_suggestion`); None for what it cannot make (FileData, `$ref`)."""

from __future__ import annotations

import re
from typing import Any

Suggestion = tuple[dict[str, Any], str]

NUMBER_NAME = re.compile(r"(^|_)(n|num|number|count|seconds?|secs?|minutes?|steps|age|year|size|times)($|_)",
                         re.I)
NUMBERS_AS_TEXT = ["1", "2", "3", "4", "5"]  # a text input that asks for a number (gradio_api's Textbox too)
PLACEHOLDERS = {"integer": "{int}", "number": "{float}", "string": "{word}", "boolean": True}


def api_suggestion(info: dict[str, Any]) -> Suggestion | None:
    """The payload input for one `Api` parameter (its /info entry); None when its schema is not plain."""
    schema = concrete(info.get("type")) or {}
    kind = schema.get("type")
    default = info.get("parameter_default") if info.get("parameter_has_default") else None
    name = str(info.get("parameter_name") or "")
    if kind == "string":
        return _string(schema, name)
    if kind in ("integer", "number"):
        return _number(schema, kind, default)
    if kind == "boolean":
        return {"boolean": {"true_share": 0.5}}, "true or false"
    if kind == "array":
        item = PLACEHOLDERS.get(str((concrete(schema.get("items")) or {}).get("type")), "{word}")
        return {"json": [item, item, item]}, f"a list of 3 {_plural(schema.get('items'))}"
    if kind == "object":
        return _object(schema, default)
    if kind == "null":
        return {"value": None}, "null (the only value its type allows)"
    return None


def concrete(schema: Any) -> dict[str, Any] | None:
    """The schema without its null alternative (oneOf/anyOf's first non-null branch, a type list's first)."""
    if not isinstance(schema, dict):
        return None
    for key in ("oneOf", "anyOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            usable = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
            return concrete(usable[0]) if usable else {"type": "null"}
    kind = schema.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        return {**schema, "type": types[0] if types else "null"}
    return schema


def _string(schema: dict[str, Any], name: str) -> Suggestion:
    choices = schema.get("enum")
    if isinstance(choices, list) and choices:
        return {"choice": {"values": choices}}, f"one of {', '.join(map(str, choices[:8]))}"
    if NUMBER_NAME.search(name):
        why = f"a number as text (its name, {name!r}, asks for one)"
        return {"choice": {"values": list(NUMBERS_AS_TEXT)}}, why
    return {"text": {"words": [2, 8]}}, "text"


def _number(schema: dict[str, Any], kind: str, default: Any) -> Suggestion:
    low, high = schema.get("minimum"), schema.get("maximum")
    start = default if isinstance(default, int | float) and not isinstance(default, bool) else 1
    if not isinstance(low, int | float):
        low = start
    if not isinstance(high, int | float) or high < low:
        high = low + (4 if kind == "integer" else 1)
    spec: dict[str, Any] = {"min": low, "max": high}
    if kind == "integer":
        spec["integer"] = True
    whole = "a whole number" if kind == "integer" else "a number"
    return {"number": spec}, f"{whole} from {low:g} to {high:g}"


def _object(schema: dict[str, Any], default: Any) -> Suggestion:
    properties = schema.get("properties")
    if isinstance(properties, dict) and properties:
        template = {key: PLACEHOLDERS.get(str((concrete(sub) or {}).get("type")), "{word}")
                    for key, sub in properties.items()}
        return {"json": template}, f"an object with {', '.join(properties)}"
    value = default if isinstance(default, dict) else {}
    return {"value": value}, "an object (its schema names no properties: qbench sends this one; check it)"


def _plural(items: Any) -> str:
    kind = str((concrete(items) or {}).get("type") or "value")
    return {"integer": "integers", "number": "numbers", "string": "words", "boolean": "booleans"}.get(
        kind, "words")
