"""Reading JSON back: one tolerant reader per kind of value (a value of another shape reads as None), and
`Readable`: a file's dataclass read by one pydantic validator. Rules: docs/design/records-and-results.md."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator

_R = TypeVar("_R", bound="Readable")
_O = TypeVar("_O", bound="ReadableOrNone")


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


class _Reads:
    """A dataclass read from its JSON object. tolerant: a malformed top-level part, a null or "" reads as
    its default; unknown_to: the field that keeps the keys this version does not know."""

    tolerant: ClassVar[bool] = False
    unknown_to: ClassVar[str | None] = None

    def __init_subclass__(cls, tolerant: bool = False, unknown_to: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.tolerant, cls.unknown_to = tolerant, unknown_to

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """An older file's keys and shapes as this version writes them (a copy, changed in place)."""
        return data


class Readable(_Reads):
    @classmethod
    def from_dict(cls: type[_R], data: Mapping[str, Any]) -> _R:
        """From its JSON object; pydantic's ValidationError (a ValueError) when it is malformed."""
        return cast(_R, _validator(cls).validate_python(data))


class ReadableOrNone(_Reads):
    """A finding that may be absent: null, {}, anything but an object, or a malformed one read as None."""

    @classmethod
    def from_dict(cls: type[_O], data: Any) -> _O | None:
        return cast("_O | None", _validator(cls).validate_python(data))


_VALIDATORS: dict[type, SchemaValidator] = {}


def _validator(cls: type) -> SchemaValidator:
    """pydantic's schema of `cls`, with this module's rules written into it; built once per class."""
    found = _VALIDATORS.get(cls)
    if found is None:
        from pydantic import TypeAdapter
        from pydantic_core import CoreConfig, SchemaValidator

        schema = _rewrite(TypeAdapter(cls).core_schema)
        found = _VALIDATORS[cls] = SchemaValidator(schema, CoreConfig(title=cls.__name__))
    return found


_SKIP = frozenset({"cls", "config", "default", "default_factory", "expected", "function", "keys_schema",
                   "metadata", "ref", "schema_ref", "serialization"})  # no schema in them to rewrite


def _rewrite(node: Any, choice: bool = False) -> Any:
    """Numbers strict (a bool or a string is not one; a whole float is an int, unless a float is a choice
    too), {} an absent optional value, and each dataclass read by its own rules or its own from_dict."""
    from pydantic_core import core_schema as cs

    if isinstance(node, list | tuple):
        return type(node)(_rewrite(n, choice) for n in node)
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    out = {k: v if k in _SKIP else _rewrite(v, kind == "union" and k == "choices") for k, v in node.items()}
    if kind in ("float", "bool") or (kind == "int" and choice):
        out["strict"] = True
    elif kind == "int":
        return cs.union_schema([cs.int_schema(strict=True),
                                cs.no_info_after_validator_function(_whole, cs.float_schema(strict=True))])
    elif kind == "nullable" and node["schema"].get("type") in ("dataclass", "definition-ref"):
        return cs.no_info_before_validator_function(_empty_is_none, cast(Any, out))
    elif kind == "dataclass":
        return _dataclass(out)
    return out


def _dataclass(node: dict[str, Any]) -> Any:
    from pydantic_core import core_schema as cs

    cls, ref = node["cls"], node.pop("ref", None)
    if not issubclass(cls, _Reads):
        if callable(getattr(cls, "from_dict", None)):
            return cs.no_info_plain_validator_function(_legacy(cls), ref=ref)
    elif issubclass(cls, ReadableOrNone) or cls.tolerant or cls.unknown_to or _migrates(cls):
        return cs.no_info_wrap_validator_function(_reader(cls), cast(Any, node), ref=ref)
    return {**node, "ref": ref} if ref else node


def _migrates(cls: type[_Reads]) -> bool:
    return any("_migrate" in vars(c) for c in cls.__mro__[:cls.__mro__.index(_Reads)])


def _whole(value: float) -> int:
    if not value.is_integer():
        raise ValueError("not a whole number")
    return int(value)


def _empty_is_none(value: Any) -> Any:
    return None if value == {} else value


def _legacy(cls: Any) -> Callable[[Any], Any]:
    """A class that still reads itself: its own from_dict (its exceptions as pydantic's)."""

    def read(value: Any) -> Any:
        try:
            return cls.from_dict(value)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a {cls.__name__}: {exc!r}") from exc

    return read


def _reader(cls: type[_Reads]) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """`cls`'s own rules around pydantic's reading of it: migrated; tolerant: its malformed parts dropped
    (the error locations' top-level keys), then read again; ReadableOrNone: None when absent or malformed."""
    from pydantic_core import ValidationError

    names = frozenset(f.name for f in dataclasses.fields(cast(Any, cls)))
    known = names - {cls.unknown_to}
    or_none, tolerant, unknown_to, migrates = issubclass(cls, ReadableOrNone), cls.tolerant, cls.unknown_to, \
        _migrates(cls)

    def read(value: Any, handler: Callable[[Any], Any]) -> Any:
        if or_none and (not isinstance(value, Mapping) or not value):
            return None
        if isinstance(value, Mapping) and (tolerant or unknown_to or migrates):
            value = {k: v for k, v in value.items()
                     if not (tolerant and k in names and (v is None or v == ""))}
            if unknown_to:
                value = {**{k: v for k, v in value.items() if k in known},
                         unknown_to: {k: v for k, v in value.items() if k not in known}}
            value = cls._migrate(value)
        while True:
            try:
                return handler(value)
            except ValidationError as error:
                bad = {e["loc"][0] for e in error.errors() if e["loc"]} & set(value) \
                    if tolerant and isinstance(value, dict) else set()
                if not bad:
                    if or_none:
                        return None
                    raise
                value = {k: v for k, v in value.items() if k not in bad}

    return read
