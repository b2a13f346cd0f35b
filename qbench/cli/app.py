"""The `qbench` Typer app, its one QbenchError handler, and `command`: each command declared by a frozen
dataclass of its options, so an option is declared, read and typed once; a field typed by a dataclass is
an option group (its fields are options, shared by the commands that take it)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, get_type_hints

import typer

from qbench.errors import QbenchError

P = ParamSpec("P")
A = TypeVar("A")

app = typer.Typer(
    name="qbench",
    help="Load-test and tune queued inference servers (Gradio apps first, plain HTTP second).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
trace_app = typer.Typer(help="Trace files for load.trace: import other formats, show a trace's shape.",
                        no_args_is_help=True)
app.add_typer(trace_app, name="trace")


def exits_on_error(command: Callable[P, None]) -> Callable[P, None]:
    """The one QbenchError -> exit handler: print `error: <message>` on stderr, exit with its exit_code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            command(*args, **kwargs)
        except QbenchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def command(name: str, *, group: typer.Typer = app, extra_args: str | None = None
            ) -> Callable[[Callable[[A], None]], Callable[[A], None]]:
    """Register `handler(args)` as the command `name` of `group`, its options the fields of `args`'s
    dataclass; `extra_args`: the field that receives the arguments after `--`."""

    def register(handler: Callable[[A], None]) -> Callable[[A], None]:
        args_type = _args_type(handler)
        kind = _grouped(args_type)  # Typer's flat values -> the options value, each group nested in it

        def cli(ctx: typer.Context, **values: Any) -> None:
            extra = {extra_args: list(ctx.args)} if extra_args else {}
            handler(kind(**values, **extra))

        options = cli_fields(args_type)
        names = [f.name for f in options]
        if len(set(names)) < len(names):
            raise TypeError(f"{handler.__name__}: an option is declared twice in {args_type.__name__}")
        hints = _option_hints(args_type)
        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
        cli.__signature__ = inspect.Signature([context] + [  # type: ignore[attr-defined]
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                              default=_default(f)) for f in options])
        cli.__annotations__ = {"ctx": typer.Context, **{f.name: hints[f.name] for f in options}}
        cli.__doc__, cli.__name__ = handler.__doc__, handler.__name__
        settings = {"allow_extra_args": True} if extra_args else {}
        group.command(name, context_settings=settings)(exits_on_error(cli))
        return handler

    return register


def cli_fields(kind: type) -> list[dataclasses.Field[Any]]:
    """The command-line options of an options dataclass, in order: its fields but `metadata={"cli": False}`,
    an option group's own in its place."""
    hints = get_type_hints(kind)
    fields: list[dataclasses.Field[Any]] = []
    for f in dataclasses.fields(kind):
        if f.metadata.get("cli", True):
            group = _group(hints[f.name])
            fields += cli_fields(group) if group is not None else [f]
    return fields


def _group(hint: Any) -> type | None:
    """The option group a field annotated `hint` holds (its type is a dataclass), else None."""
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _option_hints(kind: type) -> dict[str, Any]:
    """Each option's annotation (its Typer declaration), an option group's included."""
    out: dict[str, Any] = {}
    for name, hint in get_type_hints(kind, include_extras=True).items():
        group = _group(hint)
        out.update(_option_hints(group) if group is not None else {name: hint})
    return out


def _grouped(kind: type[A]) -> Callable[..., A]:
    """`kind` from its options as Typer passes them, flat: each option group's gathered into its value."""
    hints = get_type_hints(kind)
    groups: dict[str, tuple[Callable[..., Any], list[str]]] = {}
    for f in dataclasses.fields(kind):  # type: ignore[arg-type]
        group = _group(hints[f.name]) if f.metadata.get("cli", True) else None
        if group is not None:
            groups[f.name] = _grouped(group), [option.name for option in cli_fields(group)]

    def build(**values: Any) -> A:
        for name, (make, options) in groups.items():
            values[name] = make(**{option: values.pop(option) for option in options})
        return kind(**values)

    return build


def _args_type(handler: Callable[[A], None]) -> type[A]:
    hints = get_type_hints(handler)
    kind = next(iter(v for k, v in hints.items() if k != "return"))
    if not dataclasses.is_dataclass(kind):
        raise TypeError(f"{handler.__name__}: its one parameter must be an options dataclass")
    return kind  # type: ignore[return-value]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return inspect.Parameter.empty
