"""Sweep grids: knob axes (`concurrency_limit=1,2,4`) and linked variables (`users=2*concurrency_limit`) ->
the points to measure; a server knob is applied to the point's server, a client knob to its scenario."""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from qbench.errors import ScenarioError

Value = int | float | str | bool

SERVER_KNOBS: Final = (
    "concurrency_limit",
    "default_concurrency_limit",
    "max_batch_size",
    "batch_wait_ms",
    "max_threads",
    "max_size",
    "concurrency_id",
    "concurrency_count",
    "num_workers",
    "ssr_mode",
    "batch_timeout",
    "workers_per_device",
    "max_latency_ms",
    "workers",
    "max_concurrency",
    "num_replicas",
    "max_ongoing_requests",
    "max_queued_requests",
    "batch_wait_timeout_s",
    "max_concurrent_batches",
    "batch_size",
    "max_batch_delay",
    "job_queue_size",
)
#: Knobs only an app qbench launches has (Blocks.launch() arguments of Gradio 6.15+ / 5.0+).
LAUNCH_ONLY_KNOBS: Final = ("num_workers", "ssr_mode")
#: Client knob aliases -> dotted scenario override keys.
CLIENT_ALIASES: Final = {"rate": "load.rate", "users": "load.users", "duration": "load.duration"}

_SHORT: Final = {
    "concurrency_limit": "c",
    "default_concurrency_limit": "dc",
    "max_batch_size": "b",
    "batch_wait_ms": "w",
    "max_threads": "t",
    "max_size": "q",
    "concurrency_id": "g",
    "concurrency_count": "cc",
    "num_workers": "nw",
    "ssr_mode": "ssr",
    "batch_timeout": "bt",
    "workers_per_device": "wpd",
    "max_latency_ms": "ml",
    "workers": "wk",
    "max_concurrency": "mc",
    "num_replicas": "nr",
    "max_ongoing_requests": "mo",
    "max_queued_requests": "mq",
    "batch_wait_timeout_s": "bw",
    "max_concurrent_batches": "mb",
    "batch_size": "bs",
    "max_batch_delay": "bd",
    "job_queue_size": "jq",
    "rate": "r",
    "users": "u",
    "duration": "d",
}


#: Knobs of one event, which a sweep may scope to one of a mix's events: `concurrency_limit@a`.
EVENT_KNOBS: Final = ("concurrency_limit", "max_batch_size", "batch_wait_ms", "concurrency_id")


def split_knob(name: str) -> tuple[str, str | None]:
    """`concurrency_limit@a` -> ("concurrency_limit", "a"); an unscoped knob -> (name, None)."""
    base, at, event = name.partition("@")
    return (base, event) if at else (name, None)


def is_server_knob(name: str) -> bool:
    base, event = split_knob(name)
    return base in EVENT_KNOBS and bool(event) if event is not None else name in SERVER_KNOBS


def is_client_knob(name: str) -> bool:
    return name in CLIENT_ALIASES or "." in name


_FLAGS: Final = ("true", "false", "on", "off", "1", "0", "yes", "no")


def flag(value: Value) -> bool:
    """A true/false knob (ssr_mode) as a sweep writes it: true/false, on/off, 1/0, yes/no."""
    return str(value).strip().lower() in ("true", "on", "1", "yes")

#: Words a numeric server knob also accepts (besides numbers).
_KNOB_WORDS: Final = {
    "concurrency_limit": ("none", "null", "default"),
    "max_size": ("none", "null", "unlimited"),
}


def check_value(name: str, value: Value) -> None:
    """Raise ScenarioError unless a server knob's value is a number (or a word it accepts)."""
    base = split_knob(name)[0]
    if not is_server_knob(name) or base == "concurrency_id":
        return
    if base == "ssr_mode":
        if not isinstance(value, bool) and str(value).lower() not in _FLAGS:
            raise ScenarioError(f"grid axis {name!r}: value {value!r} is not valid; expected true or false")
        return
    words = _KNOB_WORDS.get(base, ())
    if isinstance(value, bool) or not isinstance(value, int | float) and str(value).lower() not in words:
        also = f" or one of {', '.join(words)}" if words else ""
        raise ScenarioError(f"grid axis {name!r}: value {value!r} is not valid; expected a number{also}")


def check_knob(name: str, where: str) -> None:
    """Raise ScenarioError unless `name` is a known server knob or a client knob."""
    if not (is_server_knob(name) or is_client_knob(name)):
        known = ", ".join([*SERVER_KNOBS, *CLIENT_ALIASES])
        raise ScenarioError(
            f"{where}: unknown knob {name!r}; expected one of {known}, a dotted key (load.rate), or "
            f"one event's {'/'.join(EVENT_KNOBS)} as KNOB@EVENT (concurrency_limit@a)"
        )


# ---------------------------------------------------------------- values


def parse_value(text: str) -> Value:
    """'4' -> 4, '0.5' -> 0.5, 'true' -> True, 'none' -> 'none', anything else stays a string."""
    text = text.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_axis(option: str) -> tuple[str, list[Value]]:
    """Parse a `--grid name=v1,v2,...` option."""
    name, sep, values = option.partition("=")
    name = name.strip()
    if not sep or not name or not values.strip():
        raise ScenarioError(f"--grid {option!r}: expected name=v1,v2,... (e.g. concurrency_limit=1,2,4)")
    check_knob(name, f"--grid {option!r}")
    parsed = [parse_value(v) for v in values.split(",") if v.strip()]
    return name, parsed


# ---------------------------------------------------------------- linked variables (safe expressions)

_BINOPS: Final[dict[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS: Final[dict[str, Callable[..., Any]]] = {
    "min": min,
    "max": max,
    "round": round,
    "int": int,
    "ceil": math.ceil,
    "floor": math.floor,
}


@dataclass(frozen=True)
class Expr:
    """A parsed linked-variable expression; `evaluate(knobs)` computes it for one point."""

    source: str
    tree: ast.expr = field(repr=False, compare=False)

    @classmethod
    def parse(cls, source: str, where: str = "expression") -> Expr:
        try:
            tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as exc:
            raise ScenarioError(f"{where}: cannot parse {source!r}: {exc.msg}") from None
        _validate(tree, source, where)
        return cls(source, tree)

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id not in _FUNCS}

    def evaluate(self, knobs: Mapping[str, Value]) -> Value:
        result = _eval(self.tree, knobs, self.source)
        if isinstance(result, float) and result.is_integer():
            return int(result)
        return result  # type: ignore[no-any-return]


def _validate(node: ast.AST, source: str, where: str) -> None:
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Constant, ast.Name, ast.Load)
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            if not (isinstance(child.func, ast.Name) and child.func.id in _FUNCS) or child.keywords:
                raise ScenarioError(f"{where}: {source!r}: only {', '.join(_FUNCS)} may be called")
        elif isinstance(child, ast.Constant):
            if not isinstance(child.value, int | float) or isinstance(child.value, bool):
                raise ScenarioError(f"{where}: {source!r}: only numbers are allowed as constants")
        elif isinstance(child, ast.operator):
            if type(child) not in _BINOPS:
                raise ScenarioError(f"{where}: {source!r}: operator {type(child).__name__} is not allowed")
        elif not isinstance(child, allowed):
            raise ScenarioError(f"{where}: {source!r}: {type(child).__name__} is not allowed")


def _eval(node: ast.expr, knobs: Mapping[str, Value], source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in knobs:
            raise ScenarioError(f"linked expression {source!r}: {node.id!r} is not a knob of this point")
        return knobs[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, knobs, source)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, knobs, source), _eval(node.right, knobs, source))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _FUNCS[node.func.id](*(_eval(arg, knobs, source) for arg in node.args))
    raise ScenarioError(f"linked expression {source!r}: unsupported syntax")  # unreachable after _validate


def parse_link(option: str) -> tuple[str, Expr]:
    """Parse a `--link users=2*concurrency_limit*max_batch_size` option."""
    name, sep, source = option.partition("=")
    name = name.strip()
    if not sep or not name or not source.strip():
        raise ScenarioError(f"--link {option!r}: expected name=expression (e.g. users=2*concurrency_limit)")
    check_knob(name, f"--link {option!r}")
    return name, Expr.parse(source, f"--link {option!r}")


# ---------------------------------------------------------------- grid and points


@dataclass(frozen=True)
class Point:
    """One configuration of the sweep: every knob's value (axes and linked variables)."""

    knobs: dict[str, Value]
    coords: tuple[int, ...] = ()  # index of each axis value (for neighbourhood search)

    @property
    def point_id(self) -> str:
        return point_id(self.knobs)

    def server_knobs(self) -> dict[str, Value]:
        return {k: v for k, v in self.knobs.items() if is_server_knob(k)}

    def client_overrides(self) -> dict[str, Value]:
        """Client knobs as dotted scenario overrides (`{"load.rate": 12}`)."""
        return {CLIENT_ALIASES.get(k, k): v for k, v in self.knobs.items() if is_client_knob(k)}


def point_id(knobs: Mapping[str, Value]) -> str:
    """Stable, filesystem-safe id: `c4-b8-t40` (short names for the known knobs)."""
    parts = []
    for name, value in knobs.items():
        base, event = split_knob(name)
        short = _SHORT.get(base, base.replace(".", "_")) + ("" if event is None else f"@{event}")
        text = f"{value:g}" if isinstance(value, float) else str(value)
        parts.append(short + "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in text))
    return "-".join(parts) or "default"


@dataclass(frozen=True)
class Grid:
    """Axes (ordered values per knob) plus linked variables."""

    axes: dict[str, list[Value]]
    links: dict[str, Expr] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, values in self.axes.items():
            if not values:
                raise ScenarioError(f"grid axis {name!r} has no values")
            for value in values:
                check_value(name, value)
        for name, expr in self.links.items():
            if name in self.axes:
                raise ScenarioError(f"{name!r} is both a grid axis and a linked variable")
            missing = expr.names() - set(self.axes) - set(self.links)
            if missing:
                raise ScenarioError(
                    f"linked variable {name} = {expr.source!r} uses {sorted(missing)}, "
                    f"which are not grid axes ({', '.join(self.axes) or 'none'})"
                )

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.axes.values())

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.axes.values())

    def point_at(self, coords: Sequence[int]) -> Point:
        pairs = zip(self.axes.items(), coords, strict=True)
        knobs: dict[str, Value] = {name: values[i] for (name, values), i in pairs}
        for name, expr in self.links.items():
            knobs[name] = expr.evaluate(knobs)
        return Point(knobs, tuple(coords))

    def points(self) -> list[Point]:
        ranges = [range(len(v)) for v in self.axes.values()]
        return [self.point_at(coords) for coords in itertools.product(*ranges)]

    def to_dict(self) -> dict[str, Any]:
        return {"axes": self.axes, "links": {k: e.source for k, e in self.links.items()}}

    def edge_notes(self, knobs: Mapping[str, Value]) -> list[str]:
        """Advice when a point sits on the grid's edge: the optimum may lie beyond the values tried."""
        notes = []
        for name, values in self.axes.items():
            if len(values) < 2 or knobs.get(name) not in values:
                continue
            value, index = knobs[name], values.index(knobs[name])
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                continue  # words (concurrency_id=gpu,own): no order to extend
            if index == len(values) - 1:
                notes.append(f"{name}={value} is the largest value tried: extend the grid past it")
            elif index == 0 and isinstance(value, int | float) and not isinstance(value, bool) and value > 1:
                notes.append(f"{name}={value} is the smallest value tried: extend the grid below it")
        return notes


def build_grid(
    axes: Sequence[str] | Mapping[str, Any], links: Sequence[str] | Mapping[str, str] = ()
) -> Grid:
    """Build a grid from CLI options (`["c=1,2"]`) or a scenario's `sweep.grid` mapping (`{c: [1, 2]}`)."""
    parsed: dict[str, list[Value]] = {}
    if isinstance(axes, Mapping):
        for name, values in axes.items():
            check_knob(str(name), f"sweep.grid.{name}")
            items = values if isinstance(values, list) else [values]
            parsed[str(name)] = [parse_value(str(v)) if isinstance(v, str) else v for v in items]
    else:
        for option in axes:
            name, values = parse_axis(option)
            parsed[name] = values
    parsed_links: dict[str, Expr] = {}
    if isinstance(links, Mapping):
        for name, source in links.items():
            check_knob(str(name), f"sweep.link.{name}")
            parsed_links[str(name)] = Expr.parse(str(source), f"sweep.link.{name}")
    else:
        for option in links:
            name, expr = parse_link(option)
            parsed_links[name] = expr
    return Grid(parsed, parsed_links)
