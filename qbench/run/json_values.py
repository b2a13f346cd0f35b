"""Reading JSON back: the one tolerant reader of each kind of value.

Every JSON file qbench reads back (its own run.json, summary.json, sweep.json, point.json, an older
qbench's, a server's /status, /config or /monitoring/summary) goes through these: a value of another
shape reads as None, never as an exception or a guess.

    json_number   a number as a float (a bool is not a number)
    json_int      a number as an int (a float truncated)
    json_text     a non-empty string, or a number written as text
    json_dict     a mapping (a copy)
"""

from __future__ import annotations

from typing import Any


def json_number(value: Any) -> float | None:
    """A number: None for anything else (null, a string, a bool: a bool is not a number)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def json_int(value: Any) -> int | None:
    """A number as an int (a float truncated, as int() does); None for anything else."""
    number = json_number(value)
    return None if number is None else int(value)


def json_text(value: Any) -> str | None:
    """A non-empty string, or a number written as text; None for anything else (null, "", a bool, a
    list or a mapping)."""
    if isinstance(value, str):
        return value or None
    return str(value) if json_number(value) is not None else None


def json_dict(value: Any) -> dict[str, Any] | None:
    """A mapping (a copy); None for anything else."""
    return dict(value) if isinstance(value, dict) else None
