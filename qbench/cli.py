"""The qbench command line: a thin shell over the library.

Each command parses its options, builds a config object, calls ONE library function, renders the result
with rich and maps `QbenchError` (qbench.errors) to a non-zero exit code. No logic lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="qbench",
    help="Load-test and tune queued inference servers (Gradio apps first, plain HTTP second).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Commands are added below, one small function each: run, sweep, report, compare, serve, demo.


@app.command()
def serve(
    config: Annotated[Path | None, typer.Option(help="Server settings YAML file.")] = None,
    preset: Annotated[str | None, typer.Option(help="Preset: echo, sleep, mixed, image...")] = None,
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 7860; 0 = any free port).")] = None,
    max_threads: Annotated[int | None, typer.Option(help="Max jobs running at once.")] = None,
    default_concurrency_limit: Annotated[int | None, typer.Option(help="Default limit.")] = None,
    max_size: Annotated[int | None, typer.Option(help="queue.max_size (waiting events before 503).")] = None,
    admin_token: Annotated[str | None, typer.Option(help="Enables /admin/config.")] = None,
    device: Annotated[str | None, typer.Option(help="auto | cpu | cuda")] = None,
    model: Annotated[str | None, typer.Option(help="Override the model of the model workloads.")] = None,
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level (default warning).")] = None,
) -> None:
    """Run the reference server (Gradio's queue semantics and wire protocol) in the foreground."""
    from reference_server.launch import ServeOptions, settings_from_options
    from reference_server.launch import serve as run_server
    from reference_server.settings import SettingsError

    options = ServeOptions(config, preset, host, port, max_threads, default_concurrency_limit, max_size,
                           admin_token, device, model, log_level)
    try:
        run_server(settings_from_options(options))
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file (see scenarios/).")],
    target: Annotated[str | None, typer.Option(help="Server base URL; overrides the scenario's target.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default reports/<time>-<name>).")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a scenario key: --set load.rate=12 (repeatable).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show live progress.")] = True,
) -> None:
    """Fire the load a scenario describes, record every request, print a summary (exit 3 on SLO failure)."""
    from rich.console import Console

    from qbench.console import render_summary
    from qbench.errors import QbenchError, SloViolation
    from qbench.runner import load_scenario, parse_set_options, run_scenario

    console = Console()
    try:
        spec = load_scenario(scenario, parse_set_options(set_ or []))
        result = run_scenario(spec, target=target, out_dir=out, live=live)
        render_summary(result.summary, console, open_loop=spec.load.users is None)
        console.print(f"records: {result.run_dir}")
        failed = result.summary.failed_checks()
        if failed:
            names = ", ".join(f"{c.name} (actual {c.actual}, limit {c.threshold})" for c in failed)
            raise SloViolation(f"SLO violated: {names}")
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
