"""The `qbench` Typer app, its one QbenchError handler, and `command`: each command declared by a frozen
dataclass of its options, so an option is declared, read and typed once."""

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
        kind = _args_type(handler)

        def cli(ctx: typer.Context, **values: Any) -> None:
            extra = {extra_args: list(ctx.args)} if extra_args else {}
            handler(kind(**values, **extra))

        options = cli_fields(kind)
        hints = get_type_hints(kind, include_extras=True)
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
    """The fields of an options dataclass that are command-line options (not `metadata={"cli": False}`)."""
    return [f for f in dataclasses.fields(kind) if f.metadata.get("cli", True)]


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
