"""`qbench run`: the load a scenario describes, every request recorded, the summary printed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qbench.cli.app import command
from qbench.cli.shared import ApiOpt, Credentials, LiveOpt, SetOpt, TargetOpt

if TYPE_CHECKING:
    from rich.console import Console

    from qbench.run.options import OptionsRun


@dataclass(frozen=True, kw_only=True)
class RunArgs:
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML file (see scenarios/); none: --target and --api.")] = None
    target: TargetOpt = None
    api: ApiOpt = None
    out: Annotated[Path | None, typer.Option(help="Run folder (default reports/run-<name>-<stamp>).")] = None
    set_: SetOpt = None
    live: LiveOpt = True
    processes: Annotated[int | None, typer.Option(
        help="Generator processes, when one core is not enough (load.processes).")] = None
    replay: Annotated[Path | None, typer.Option(
        help="A past run folder: send at its intended times, with its request ids.")] = None
    ray: Annotated[str | None, typer.Option(
        metavar="ADDRESS",
        help="Split the run over Ray actors (load.executor: ray): 'local' starts Ray on this machine, "
        "'auto' joins the cluster `ray start` runs here, HOST:6379 or ray://HOST:10001. Needs pip "
        "install -e '.\\[ray]'.")] = None
    workers: Annotated[str | None, typer.Option(
        metavar="N|auto", help="Ray actors: a number, or auto (one per node; load.workers).")] = None
    credentials: Credentials = field(default_factory=Credentials)
    show_inputs: Annotated[bool, typer.Option(
        "--show-inputs", help="Print the first input sets each endpoint was sent.")] = False


@command("run")
def run(args: RunArgs) -> None:
    """Fire the load a scenario describes, record every request, print a summary (exit 3 on SLO failure)."""
    from rich.console import Console

    from qbench.run.options import RunOptions, run_with_options
    from qbench.run.pipeline import parse_set_options
    from qbench.run.results.outcome import verdict

    options = RunOptions(args.scenario, args.target, args.api, args.out, parse_set_options(args.set_ or []),
                         args.credentials.overrides(), args.processes, args.replay, args.ray, args.workers,
                         args.live)
    done = run_with_options(options)
    render_run(done, Console(), show_inputs=args.show_inputs)
    error = verdict(done.result.outcome)
    if error is not None:
        raise error


def render_run(done: OptionsRun, console: Console, show_inputs: bool = False) -> None:
    """A finished run: scenario written, summary, records, warnings, app errors, inputs (`show_inputs`)."""
    from rich.markup import escape

    from qbench.run.console import render_summary
    from qbench.run.diagnose.app_errors import input_lines
    from qbench.tune.points.knobcheck import expectation_warnings

    result, load = done.result, done.scenario.load
    if done.written is not None:
        console.print(f"scenario (written from the app; edit and re-run): {done.written}")
    render_summary(result.summary, console, open_loop=load.users is None, burst=load.shape == "burst",
                   findings=result.diagnosis)
    console.print(f"records: {result.run_dir}")
    for note in result.app_notes:
        console.print(f"[bold yellow]the app:[/] {escape(note)}", highlight=False)
    for item in result.alongside:
        console.print(f"[bold]alongside:[/] {escape(item.line())}", highlight=False, soft_wrap=True)
    if show_inputs:
        console.print("inputs sent (the first input sets of each endpoint; the same seed sends the same):")
        for line in input_lines(done.scenario):
            console.print(f"  {line}", highlight=False, markup=False)
    for text in expectation_warnings(done.scenario, result.columns()):
        console.print(f"[bold yellow]warning:[/] {text}")
    if result.outcome.logins:
        console.print(f"login: {result.outcome.logins} login(s), {result.outcome.relogins} re-login(s) "
                      "after a 401")
