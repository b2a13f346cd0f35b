"""`qbench soak`: a steady load held for long, the server's health watched, a verdict per signal."""

from __future__ import annotations

import dataclasses
import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qbench.cli.app import command
from qbench.cli.run import render_run
from qbench.cli.shared import ApiOpt, AppOpt, LiveOpt, PythonOpt, SetOpt, TargetOpt, start_app

if TYPE_CHECKING:
    from rich.console import Console

    from qbench.run.soak.command import SoakReport


@dataclass(frozen=True, kw_only=True)
class SoakArgs:
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML file (a steady load); none: --target and --api.")] = None
    target: TargetOpt = None
    api: ApiOpt = None
    duration: Annotated[float | None, typer.Option(
        help="Seconds of load (load.duration): minutes to hours; the whole of them (a scenario's "
             "load.requests no longer ends the soak, unless --set gives it).")] = None
    rate: Annotated[float | None, typer.Option(help="Requests per second (load.rate).")] = None
    pid: Annotated[int | None, typer.Option(
        help="The server's process id: sample its process tree (RSS, files...).")] = None
    app_file: AppOpt = None
    python: PythonOpt = None
    interval: Annotated[float, typer.Option(help="Seconds between health samples.")] = 5.0
    warmup: Annotated[float | None, typer.Option(
        help="Seconds cut before the steady part (default: 20% of the run).")] = None
    stuck_after: Annotated[float, typer.Option(
        help="End the run when requests go out and none completes for this long (s).")] = 60.0
    limit: Annotated[list[str] | None, typer.Option(
        help="When would it cross: --limit rss=16GiB (rss, cache, files, p95)")] = None
    cache_dir: Annotated[Path | None, typer.Option(
        help="The app's file cache (default: with --app, a folder of the app's own in the run folder; else "
             "GRADIO_TEMP_DIR, else <tmp>/gradio).")] = None
    out: Annotated[Path | None, typer.Option(help="Run folder (default reports/soak-<name>-<stamp>)")] = None
    set_: SetOpt = None
    live: LiveOpt = True

    def overrides(self) -> dict[str, Any]:
        """--set, --duration and --rate as load.duration/rate; load.requests dropped unless --set sets it."""
        from qbench.run.pipeline import parse_set_options

        given = (("load.duration", self.duration), ("load.rate", self.rate))
        held = {"load.requests": None} if self.duration is not None else {}
        return held | parse_set_options(self.set_ or []) | {k: v for k, v in given if v is not None}


@command("soak")
def soak(args: SoakArgs) -> None:
    """Hold a steady load for long and watch the server: memory, files, latency, queue; a verdict each."""
    from rich.console import Console

    from qbench.run.options import RunOptions
    from qbench.run.results.outcome import verdict
    from qbench.run.soak.command import SoakOptions, parse_limits, run_soak
    from qbench.run.soak.health import default_cache_folder

    options = SoakOptions(args.interval, args.warmup, args.stuck_after, args.pid,
                          args.cache_dir or default_cache_folder(), parse_limits(args.limit or []))
    console, target, out = Console(), args.target, args.out
    with ExitStack() as stack:
        if args.app_file is not None:
            from qbench.run.results.files import new_folder

            out = out or new_folder("soak", args.app_file.stem)
            cache = own_cache(args.cache_dir, out / "app")
            app = start_app(stack, args.app_file, out / "app", console, args.python,
                            env={"GRADIO_TEMP_DIR": str(cache)} if cache else None)
            target = app.base_url
            options = dataclasses.replace(options, pid=app.pid, cache_folder=cache or options.cache_folder)
        run = RunOptions(args.scenario, target, args.api, out, args.overrides(), live=args.live)
        result = run_soak(run, options)
    render_run(result.done, console)
    render_soak(result.report, console)
    error = result.error() or verdict(result.done.result.outcome)
    if error is not None:
        raise error


def own_cache(cache_dir: Path | None, work_dir: Path) -> Path | None:
    """A GRADIO_TEMP_DIR of its own for `qbench soak --app`; None if --cache-dir or the env names one."""
    if cache_dir is not None or os.environ.get("GRADIO_TEMP_DIR"):
        return None
    return work_dir / "gradio-cache"


def render_soak(report: SoakReport, console: Console) -> None:
    """A soak run's findings, one line each (qbench.run.soak.command.SoakReport.lines)."""
    from rich.markup import escape

    console.print("[bold]over time[/] (run.soak.drift: slope per 1,000 requests, an hour and a day, 95% CI):")
    for line in report.lines():
        style = "bold red" if line.startswith("STOPPED") else "yellow" if ": growing" in line else ""
        console.print(f"  [{style}]{escape(line)}[/]" if style else f"  {escape(line)}", highlight=False,
                      soft_wrap=True)
