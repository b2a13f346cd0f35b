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
    preset: Annotated[
        str | None, typer.Option(help="Preset: echo (default), sleep, mixed, image, text, audio, chat.")
    ] = None,
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
    target: Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default reports/<time>-<name>).")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a key: --set load.rate=12 (repeatable).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show live progress.")] = True,
    processes: Annotated[
        int | None, typer.Option(help="Generator processes, when one core is not enough (load.processes).")
    ] = None,
) -> None:
    """Fire the load a scenario describes, record every request, print a summary (exit 3 on SLO failure)."""
    from rich.console import Console

    from qbench.errors import QbenchError, SloViolation, TargetError
    from qbench.run.console import render_summary
    from qbench.run.runner import load_scenario, parse_set_options, run_scenario

    console = Console()
    try:
        overrides = parse_set_options(set_ or [])
        if processes is not None:
            overrides["load.processes"] = processes
        spec = load_scenario(scenario, overrides)
        result = run_scenario(spec, target=target, out_dir=out, live=live)
        load = spec.load
        render_summary(result.summary, console, open_loop=load.users is None, burst=load.shape == "burst")
        console.print(f"records: {result.run_dir}")
        verdict = result.run_info.get("failed_opening")
        if verdict:
            stopped = str(result.run_info.get("stop_reason") or "").startswith("stopped early")
            raise TargetError(f"{'run stopped early' if stopped else 'run failed'}: {verdict}")
        if result.run_info.get("stop_kind") == "interrupted":
            raise typer.Exit(130)
        failed = result.summary.failed_checks()
        if failed:
            names = ", ".join(
                f"{c.name} ({c.note if c.actual is None and c.note else f'actual {_g(c.actual)}'}, "
                f"limit {_g(c.threshold)})"
                for c in failed
            )
            raise SloViolation(f"SLO violated: {names}")
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def _g(value: float | None) -> str:
    """A figure in an error message, to 4 significant digits."""
    return "none" if value is None else f"{value:.4g}"


@app.command()
def sweep(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (optional `sweep:` section: defaults).")],
    grid: Annotated[
        list[str] | None, typer.Option(help="Axis: --grid concurrency_limit=1,2,4 (repeatable; any knob).")
    ] = None,
    link: Annotated[
        list[str] | None, typer.Option(help="Linked knob: --link 'users=2*concurrency_limit*max_batch_size'.")
    ] = None,
    slo: Annotated[list[str] | None, typer.Option(help="SLO bound: --slo p95_latency_s=2.")] = None,
    repeat: Annotated[int | None, typer.Option(help="Runs per point (confidence intervals, ties).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume the interrupted sweep in this folder.")] = None,
    search: Annotated[
        str | None,
        typer.Option(
            help="grid (every point), smart (hill climbing) or model (fit batch latency l(b) = t0 + alpha*b "
            "from a few points, measure only the best predicted ones; falls back to smart on a poor fit)."
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(help="Base reference-server preset (default: sweep.server, else the scenario's name)."),
    ] = None,
    server_config: Annotated[Path | None, typer.Option(help="Base reference-server settings YAML.")] = None,
    live_config: Annotated[
        bool, typer.Option("--live", help="Reconfigure one reference server via /admin/config.")
    ] = False,
    launch: Annotated[
        str | None, typer.Option(help="Your app's command with {knob} and {port} placeholders.")
    ] = None,
    target: Annotated[str | None, typer.Option(help="Fixed server URL: only client knobs are swept.")] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds of load per point.")] = None,
    max_memory_mb: Annotated[float | None, typer.Option(help="Memory ceiling (peak RSS / GPU).")] = None,
    tolerated_wait_s: Annotated[float | None, typer.Option(help="Wait users tolerate (max_size).")] = None,
    capacity_trials: Annotated[int | None, typer.Option(help="Rate probes for capacity (0 = skip).")] = None,
    out: Annotated[Path, typer.Option(help="Folder for reports/<sweep-id>/.")] = Path("reports"),
) -> None:
    """Sweep server (and client) knobs, rank the points under an SLO, recommend Gradio settings."""
    from qbench.errors import QbenchError
    from qbench.tune.config import build_config, parse_slo_options, resume_options, sweep_options
    from qbench.tune.console import SweepProgress, render_sweep, sweep_console
    from qbench.tune.sweep import run_sweep

    console = sweep_console()
    where = str(resume or out)
    try:
        if resume is not None:
            config = build_config(resume_options(resume), sweep_dir=resume)
        else:
            options = sweep_options(
                scenario, grid=grid or [], links=link or [], slo=parse_slo_options(slo or []), repeat=repeat,
                search=search, live=live_config, preset=preset, server_config=server_config, launch=launch,
                target=target, duration=duration, max_memory_mb=max_memory_mb,
                tolerated_wait_s=tolerated_wait_s, capacity_trials=capacity_trials, out_root=out,
            )
            config = build_config(options)
        where = str(config.sweep_dir)
        console.print(f"sweep {where} ({config.mode}, {config.search}, {config.grid.size} points)")
        with SweepProgress(config.grid.size, smart=config.search != "grid") as progress:
            result = run_sweep(config, progress)
        render_sweep(result, console)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; finished points are saved: qbench sweep {scenario} --resume {where}")
        raise typer.Exit(130) from None
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


@app.command()
def demo(
    preset: Annotated[str, typer.Option(help="Reference-server preset: image, text, audio, chat.")] = "image",
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override the embedded scenario: --set load.rate=4.")
    ] = None,
    reports: Annotated[Path, typer.Option(help="Folder for the run directory.")] = Path("reports"),
) -> None:
    """The main job end to end: serve a real model, load it, print the summary, write the report."""
    from qbench.demo import run_demo
    from qbench.errors import QbenchError
    from qbench.run.runner import parse_set_options

    try:
        run_demo(preset=preset, overrides=parse_set_options(set_ or []), reports=reports)
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


@app.command()
def report(
    source: Annotated[Path, typer.Argument(help="A run or sweep folder (reports/<id>/).")],
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the source folder).")] = None,
    open_: Annotated[bool, typer.Option("--open", help="Open report.html in a browser.")] = False,
    x: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the x axis.")] = None,
    y: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the y axis.")] = None,
) -> None:
    """Charts, summary.md and a self-contained report.html from a run or sweep folder."""
    import webbrowser

    from qbench.errors import QbenchError
    from qbench.report.build import build_report

    try:
        if (x is None) != (y is None):
            raise QbenchError("--x and --y go together: name both heatmap knobs, or neither")
        files = build_report(source, out, heatmap_axes=(x, y) if x and y else None)
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    typer.echo(files.markdown.read_text(encoding="utf-8"))
    typer.echo(f"report: {files.html}\nsummary: {files.markdown}\ncharts: {files.html.parent / 'charts'}")
    if open_:
        webbrowser.open(files.html.resolve().as_uri())


@app.command()
def compare(
    baseline: Annotated[Path, typer.Argument(help="Run A, the baseline (a run or sweep folder).")],
    candidate: Annotated[Path, typer.Argument(help="Run B, compared with A.")],
    max_regression: Annotated[
        list[str] | None,
        typer.Option(help="Fail (exit 3) when B is worse: --max-regression p95_latency_s=10% (repeatable)."),
    ] = None,
    slo: Annotated[bool, typer.Option(help="Also check B against its scenario's slo: section.")] = True,
) -> None:
    """What changed from run A to run B; exit 3 when B regresses past the thresholds (a CI gate)."""
    from rich.console import Console

    from qbench.errors import QbenchError
    from qbench.report.compare import compare as compare_runs
    from qbench.report.compare import comparison_table, parse_max_regression

    console = Console()
    try:
        result = compare_runs(baseline, candidate, parse_max_regression(max_regression or []), use_slo=slo)
        console.print(comparison_table(result))
        for text in result.notes():
            console.print(f"[yellow]note:[/] {text}")
        for check in result.slo:
            verdict = "[green]pass[/]" if check.passed else "[bold red]FAIL[/]"
            actual = "-" if check.actual is None else f"{check.actual:.4g}"
            console.print(f"B's SLO {check.name}: {actual} (limit {check.threshold:g}) {verdict}")
        result.check()
        console.print("[green]no regression past the thresholds[/]")
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
