"""Reading JSON back: one tolerant reader per kind of value; a value of another shape reads as None."""

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
    """A non-empty string, or a number written as text; None for anything else (null, "", a bool...)."""
    if isinstance(value, str):
        return value or None
    return str(value) if json_number(value) is not None else None


def json_dict(value: Any) -> dict[str, Any] | None:
    """A mapping (a copy); None for anything else."""
    return dict(value) if isinstance(value, dict) else None
