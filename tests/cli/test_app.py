"""Commands declared by their options' type (qbench.cli.app.command): Typer sees the dataclass's fields
as the command's parameters, the handler gets them parsed into one value."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from qbench.cli import app as qbench_app
from qbench.cli.app import cli_fields, command, trace_app
from qbench.cli.capacity import CapacityArgs
from qbench.cli.demo import DemoArgs
from qbench.cli.init import InitArgs
from qbench.cli.plan import PlanArgs
from qbench.cli.report import CompareArgs, ReportArgs
from qbench.cli.run import RunArgs
from qbench.cli.serve import BalanceArgs, ServeArgs
from qbench.cli.shared import Credentials
from qbench.cli.soak import SoakArgs
from qbench.cli.sweep import SweepArgs, SweepCapacityArgs
from qbench.cli.trace import TraceImportArgs, TraceShowArgs
from qbench.errors import QbenchError, SloViolation


@dataclass(frozen=True, kw_only=True)
class ToyArgs:
    source: Annotated[Path, typer.Argument(help="A folder.")]
    rate: Annotated[float, typer.Option(help="Requests per second.")] = 1.5
    set_: Annotated[list[str] | None, typer.Option("--set", help="key=value (repeat).")] = None
    fail: Annotated[str | None, typer.Option(help="Raise this QbenchError kind.")] = None
    rest: list[str] = field(default_factory=list, metadata={"cli": False})


def toy_app(seen: list[ToyArgs]) -> typer.Typer:
    group = typer.Typer()

    @command("toy", group=group, extra_args="rest")
    def toy(args: ToyArgs) -> None:
        """A toy command."""
        seen.append(args)
        if args.fail == "slo":
            raise SloViolation("the p95 was over")
        if args.fail:
            raise QbenchError("bad option")

    @command("other", group=group)
    def other(args: ToyArgs) -> None:  # a second command: Typer keeps the group's subcommands
        seen.append(args)

    return group


def test_options_are_parsed_into_one_typed_value() -> None:
    seen: list[ToyArgs] = []
    done = CliRunner().invoke(toy_app(seen), ["toy", "runs/a", "--rate", "3", "--set", "a=1", "--set",
                                              "b=2", "--", "--model", "x"])
    assert done.exit_code == 0, done.output
    assert seen == [ToyArgs(source=Path("runs/a"), rate=3.0, set_=["a=1", "b=2"], rest=["--model", "x"])]


def test_defaults_help_and_errors() -> None:
    seen: list[ToyArgs] = []
    group = toy_app(seen)
    assert CliRunner().invoke(group, ["toy", "x"]).exit_code == 0
    assert seen[-1] == ToyArgs(source=Path("x"))  # a list option not given is None, as declared
    shown = CliRunner().invoke(group, ["toy", "--help"]).output
    assert "A toy command." in shown and "Requests per second." in shown and "--rest" not in shown
    bad = CliRunner().invoke(group, ["toy", "x", "--fail", "bad"])
    assert bad.exit_code == 2 and "error: bad option" in bad.output
    assert CliRunner().invoke(group, ["toy", "x", "--fail", "slo"]).exit_code == 3
    assert CliRunner().invoke(group, ["toy", "x", "extra"]).exit_code == 0 and seen[-1].rest == ["extra"]
    assert CliRunner().invoke(group, ["other", "x", "extra"]).exit_code != 0  # takes no extra arguments


@dataclass(frozen=True, kw_only=True)
class Window:
    start: Annotated[float, typer.Option(help="First second.")] = 0.0
    end: Annotated[float | None, typer.Option(help="Last second.")] = None


@dataclass(frozen=True, kw_only=True)
class GroupedArgs:
    source: Annotated[Path, typer.Argument(help="A folder.")]
    window: Window = field(default_factory=Window)
    rate: Annotated[float, typer.Option(help="Requests per second.")] = 1.5


def test_an_option_group_is_options_in_its_place_and_one_value_in_the_handlers() -> None:
    seen: list[GroupedArgs] = []
    group = typer.Typer()

    @command("grouped", group=group)
    def grouped(args: GroupedArgs) -> None:
        seen.append(args)

    @command("again", group=group)
    def again(args: GroupedArgs) -> None:  # a second command sharing the group
        seen.append(args)

    assert [f.name for f in cli_fields(GroupedArgs)] == ["source", "start", "end", "rate"]
    params = list(inspect.signature(group.registered_commands[0].callback).parameters)
    assert params == ["ctx", "source", "start", "end", "rate"]
    done = CliRunner().invoke(group, ["grouped", "a", "--end", "9", "--rate", "2"])
    assert done.exit_code == 0, done.output
    assert seen[-1] == GroupedArgs(source=Path("a"), window=Window(end=9.0), rate=2.0)
    assert CliRunner().invoke(group, ["again", "b"]).exit_code == 0
    assert seen[-1] == GroupedArgs(source=Path("b"))
    shown = CliRunner().invoke(group, ["grouped", "--help"]).output
    assert "--start" in shown and "Last second." in shown and "--window" not in shown


@dataclass(frozen=True, kw_only=True)
class TwiceArgs:
    start: Annotated[float, typer.Option(help="Also a start.")] = 1.0
    window: Window = field(default_factory=Window)


def test_an_option_declared_twice_through_a_group_is_refused() -> None:
    with pytest.raises(TypeError, match="declared twice"):
        @command("twice", group=typer.Typer())
        def twice(args: TwiceArgs) -> None:
            pass


def test_the_credentials_are_one_group_of_the_commands_that_take_them() -> None:
    """--auth, --header, --bearer-env: declared once (Credentials), taken by run, sweep, capacity and init;
    the sweep's capacity options are a group too (SweepOptions.capacity)."""
    trio = ["auth", "header", "bearer_env"]
    for kind in (RunArgs, SweepArgs, CapacityArgs, InitArgs):
        assert [f.name for f in cli_fields(kind) if f.name in trio] == trio, kind
        assert kind.__dataclass_fields__["credentials"].type == "Credentials", kind
    assert not {"auth", "header", "bearer_env"} & {f.name for f in cli_fields(SoakArgs)}
    assert [f.name for f in cli_fields(SweepCapacityArgs)] == [
        "capacity_trials", "capacity_tolerance", "capacity_duration", "confirm_duration"]
    seen: list[RunArgs] = []
    group = typer.Typer()

    @command("run", group=group)
    def run(args: RunArgs) -> None:
        seen.append(args)

    assert CliRunner().invoke(group, ["--auth", "u:p", "--header", "A: b"]).exit_code == 0, seen
    assert seen[-1].credentials == Credentials(auth="u:p", header=["A: b"])
    assert seen[-1].credentials.overrides() == {"auth.login": {"username": "u", "password": "p"},
                                                "auth.headers.A": "b"}


def test_a_handler_must_take_an_options_dataclass() -> None:
    with pytest.raises(TypeError, match="options dataclass"):
        @command("bad", group=typer.Typer())
        def bad(args: int) -> None:
            pass


def test_every_command_of_qbench_is_declared_this_way() -> None:
    """Each qbench command's parameters are its options dataclass's CLI fields, in order (the context
    first), and its --help works."""
    declared = {"run": RunArgs, "soak": SoakArgs, "sweep": SweepArgs, "capacity": CapacityArgs,
                "plan": PlanArgs, "init": InitArgs, "serve": ServeArgs, "balance": BalanceArgs,
                "demo": DemoArgs, "report": ReportArgs, "compare": CompareArgs,
                "import": TraceImportArgs, "show": TraceShowArgs}
    registered = {c.name: c.callback for c in qbench_app.registered_commands + trace_app.registered_commands}
    assert set(registered) == set(declared)
    for name, kind in declared.items():
        params = list(inspect.signature(registered[name]).parameters)
        assert params == ["ctx"] + [f.name for f in cli_fields(kind)], name
        argv = ["trace", name, "--help"] if name in ("import", "show") else [name, "--help"]
        done = CliRunner().invoke(qbench_app, argv)
        assert done.exit_code == 0 and "Usage:" in done.output, (name, done.output)
    assert "app_args" not in {f.name for f in cli_fields(SweepArgs)}  # the arguments after `--`
