"""The qbench command line: a thin shell over the library.

Each command parses its options, builds a config object, calls ONE library function, renders the result
with rich and maps `QbenchError` (qbench.errors) to a non-zero exit code. No logic lives here;
`exits_on_error` is the one QbenchError handler.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer

from qbench.errors import QbenchError, ScenarioError

if TYPE_CHECKING:
    from rich.console import Console

    from qbench.run.options import OptionsRun
    from qbench.run.soak.soak import SoakReport

P = ParamSpec("P")

app = typer.Typer(
    name="qbench",
    help="Load-test and tune queued inference servers (Gradio apps first, plain HTTP second).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Commands are added below, one small function each: run, soak, capacity, plan, sweep, report, compare,
# serve, balance, demo.


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

# Credentials (run, sweep, capacity) override the scenario's auth: section (qbench.run.scenario.credentials).
AuthOpt = Annotated[str | None, typer.Option("--auth", help="USER:PASSWORD to log in with (auth.login).")]
HeaderOpt = Annotated[
    list[str] | None, typer.Option("--header", help="'Name: value' sent on every request (repeatable).")
]
BearerEnvOpt = Annotated[
    str | None, typer.Option("--bearer-env", help="Env variable holding a bearer token (auth.bearer).")
]


@app.command()
def serve(
    config: Annotated[Path | None, typer.Option(help="Server settings YAML file.")] = None,
    preset: Annotated[
        str | None,
        typer.Option(help="Preset: echo (default), sleep, mixed, image, text, audio, chat, tokens."),
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
    auth: Annotated[list[str] | None, typer.Option(help="USER:PASSWORD: require a login (repeat).")] = None,
    auth_token: Annotated[list[str] | None, typer.Option(help="Accept this bearer token (repeat).")] = None,
    dtype: Annotated[str | None, typer.Option(help="auto | float32 | float16 | bfloat16 (models)")] = None,
    compile: Annotated[bool | None, typer.Option("--compile/--no-compile",
                                                 help="torch.compile the model workloads.")] = None,
    replicas: Annotated[int | None, typer.Option(help="Run N replicas behind nginx (listening on --port).")
                        ] = None,
    affinity: Annotated[str, typer.Option(help="With --replicas: session (hash on the session_hash of "
                                          "every request: join body, stream and upload query, heartbeat "
                                          "path), ip (ip_hash) or none (round robin).")] = "session",
) -> None:
    """Run the reference server (Gradio's queue semantics and wire protocol) in the foreground; with
    --replicas N, N of them behind a local nginx."""
    from reference_server.launch import ServeOptions, settings_from_options
    from reference_server.launch import serve as run_server
    from reference_server.settings import SettingsError

    options = ServeOptions(config, preset, host, port, max_threads, default_concurrency_limit, max_size,
                           admin_token, device, model, log_level, auth, auth_token, dtype, compile)
    try:
        settings = settings_from_options(options)
        if replicas is None:
            run_server(settings)
        else:
            from qbench.tune.balancer import serve_replicas

            serve_replicas(settings, replicas, affinity, 7860 if port is None else port)
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except QbenchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help="Without a scenario file: the endpoint to load (api_name; an OpenAI model). "
                 "The scenario is written from the app's API (as `qbench init`) and saved with the results."),
]


@app.command()
@exits_on_error
def init(
    url: Annotated[str, typer.Argument(help="The running app's base URL, e.g. http://127.0.0.1:7860.")],
    api: Annotated[
        str | None, typer.Option("--api", help="Endpoint (api_name; for an OpenAI server, the model).")
    ] = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Write here (default: print it).")] = None,
    protocol: Annotated[
        str, typer.Option(help="auto (Gradio, else OpenAI-compatible, else plain HTTP), gradio, openai, "
                          "http, mcp")
    ] = "auto",
    mcp: Annotated[
        bool, typer.Option("--mcp", help="MCP tools (--protocol mcp): URL is a Gradio app's (with "
                           "mcp_server=True) or any MCP URL, e.g. http://127.0.0.1:8000/mcp.")
    ] = False,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --out file.")] = False,
    mix: Annotated[
        bool, typer.Option("--mix", help="A mix: of every public endpoint (equal weights, to edit).")
    ] = False,
    auth: AuthOpt = None,
    header: HeaderOpt = None,
    bearer_env: BearerEnvOpt = None,
) -> None:
    """Write a scenario from the app's own API: endpoint, one generator per input, load, SLO."""
    from qbench.run.init import init_scenario
    from qbench.run.scenario.credentials import cli_overrides

    if out is not None and out.exists() and not force:
        raise QbenchError(f"{out}: exists; pass --force to overwrite it")
    protocol = "mcp" if mcp else protocol
    command = " ".join(["qbench init", url, *(["--api", api] if api else []), *(["--mix"] if mix else []),
                        *(["--protocol", protocol] if protocol != "auto" else [])])
    result = init_scenario(url, api, auth=cli_overrides(auth, header or [], bearer_env),
                           protocol=protocol, command=command, scenario_path=out, mix=mix)
    if out is None:
        typer.echo(result.text.replace("THIS_FILE", "scenario.yaml"), nl=False)
    else:
        out.write_text(result.text.replace("THIS_FILE", str(out)), encoding="utf-8")
        typer.echo(f"wrote {out}: {result.draft.about[0]}", err=True)
    for note in result.draft.notes:
        typer.echo(f"note: {note}", err=True)
    if out is not None and not result.draft.fill_in:
        typer.echo(f"next: qbench run {out}", err=True)


@app.command()
@exits_on_error
def run(
    scenario: Annotated[
        Path | None, typer.Argument(help="Scenario YAML file (see scenarios/); none: --target and --api.")
    ] = None,
    target: Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")] = None,
    api: ApiOpt = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default reports/run-<name>-<stamp>).")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a key: --set load.rate=12 (repeatable).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show live progress.")] = True,
    processes: Annotated[
        int | None, typer.Option(help="Generator processes, when one core is not enough (load.processes).")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="A past run folder: send at its intended times, with its request ids."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Split the run over Ray actors (load.executor: ray): 'local' starts Ray on this machine, "
            "'auto' joins the cluster `ray start` runs here, HOST:6379 or ray://HOST:10001. Needs pip "
            "install -e '.\\[ray]'.",
        ),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(metavar="N|auto", help="Ray actors: a number, or auto (one per node; load.workers)."),
    ] = None,
    auth: AuthOpt = None,
    header: HeaderOpt = None,
    bearer_env: BearerEnvOpt = None,
    show_inputs: Annotated[
        bool, typer.Option("--show-inputs", help="Print the first input sets each endpoint was sent.")
    ] = False,
) -> None:
    """Fire the load a scenario describes, record every request, print a summary (exit 3 on SLO failure)."""
    from rich.console import Console

    from qbench.run.options import RunOptions, run_with_options
    from qbench.run.results.outcome import verdict
    from qbench.run.runner import parse_set_options
    from qbench.run.scenario.credentials import cli_overrides

    options = RunOptions(scenario, target, api, out, parse_set_options(set_ or []),
                         cli_overrides(auth, header or [], bearer_env), processes, replay, ray, workers, live)
    done = run_with_options(options)
    render_run(done, Console(), show_inputs=show_inputs)
    error = verdict(done.result.outcome)
    if error is not None:
        raise error


@app.command()
@exits_on_error
def soak(
    scenario: Annotated[
        Path | None, typer.Argument(help="Scenario YAML file (a steady load); none: --target and --api.")
    ] = None,
    target: Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")] = None,
    api: ApiOpt = None,
    duration: Annotated[
        float | None, typer.Option(help="Seconds of load (load.duration): minutes to hours.")
    ] = None,
    rate: Annotated[float | None, typer.Option(help="Requests per second (load.rate).")] = None,
    pid: Annotated[
        int | None, typer.Option(help="The server's process id: sample its process tree (RSS, files...).")
    ] = None,
    app_file: Annotated[
        Path | None, typer.Option("--app", help="Start this Gradio app, unmodified (`python APP`, on a free "
                                  "port by qbench's startup hook), and soak it.")
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between health samples.")] = 5.0,
    warmup: Annotated[
        float | None, typer.Option(help="Seconds cut before the steady part (default: 20% of the run).")
    ] = None,
    stuck_after: Annotated[
        float, typer.Option(help="End the run when requests go out and none completes for this long (s).")
    ] = 60.0,
    limit: Annotated[
        list[str] | None, typer.Option(help="When would it cross: --limit rss=16GiB (rss, cache, files, p95)")
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="The app's file cache (default GRADIO_TEMP_DIR, else <tmp>/gradio).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default reports/soak-<name>-<stamp>)")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a key: --set load.rate=12 (repeatable).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show live progress.")] = True,
) -> None:
    """Hold a steady load for long and watch the server: memory, files, latency, queue; a verdict each."""
    run_soak_command(dict(locals()))


def run_soak_command(cli: dict[str, Any]) -> None:
    """`qbench soak` with its CLI values: the app started when asked, the soak, its verdicts, the exit."""
    import contextlib

    from rich.console import Console

    from qbench.run.options import RunOptions
    from qbench.run.results.outcome import verdict
    from qbench.run.runner import parse_set_options
    from qbench.run.soak.health import default_cache_folder
    from qbench.run.soak.soak import SoakOptions, parse_limits, run_soak

    sets = parse_set_options(cli["set_"] or []) | {
        k: v for k, v in (("load.duration", cli["duration"]), ("load.rate", cli["rate"])) if v is not None}
    options = SoakOptions(cli["interval"], cli["warmup"], cli["stuck_after"], cli["pid"],
                          cli["cache_dir"] or default_cache_folder(), parse_limits(cli["limit"] or []))
    console, target, out = Console(), cli["target"], cli["out"]
    with contextlib.ExitStack() as stack:
        if cli["app_file"] is not None:
            target, out, pid = _start_app(stack, cli["app_file"], out, console)
            options = dataclasses.replace(options, pid=pid)
        run = RunOptions(cli["scenario"], target, cli["api"], out, sets, live=cli["live"])
        result = run_soak(run, options)
    render_run(result.done, console)
    render_soak(result.report, console)
    error = result.error() or verdict(result.done.result.outcome)
    if error is not None:
        raise error


def _start_app(stack: Any, app_file: Path, out: Path | None,
               console: Console) -> tuple[str, Path, int | None]:
    """`python APP` on a free port by qbench's startup hook, stopped with `stack`: (its URL, the run
    folder, its pid)."""
    from qbench.run.results.files import new_folder
    from qbench.tune.app_process import launch_command

    out = out or new_folder("soak", app_file.stem)
    command = shlex.join([sys.executable, str(app_file)])
    handle = stack.enter_context(launch_command(command, {}, work_dir=out / "app", hook=True))
    console.print(f"started {app_file} at {handle.base_url} (pid {handle.pid}; log {handle.log_path})")
    return handle.base_url, out, handle.pid


def render_soak(report: SoakReport, console: Console) -> None:
    """A soak run's findings, one line each (qbench.run.soak.soak.SoakReport.lines)."""
    from rich.markup import escape

    console.print("[bold]over time[/] (run.soak.drift: slope per 1,000 requests, an hour and a day, 95% CI):")
    for line in report.lines():
        style = "bold red" if line.startswith("STOPPED") else "yellow" if ": growing" in line else ""
        console.print(f"  [{style}]{escape(line)}[/]" if style else f"  {escape(line)}", highlight=False,
                      soft_wrap=True)


def render_run(done: OptionsRun, console: Console, show_inputs: bool = False) -> None:
    """A finished run: the scenario written from the app, the summary, where the records are, warnings,
    what the app's errors mean (run.diagnose.app_errors) and, with `show_inputs`, the first inputs sent."""
    from rich.markup import escape

    from qbench.run.diagnose.app_errors import input_lines
    from qbench.run.run_console import render_summary
    from qbench.tune.knobcheck import expectation_warnings

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


def app_scenario_file(target: str | None, api: str | None, auth: dict[str, Any], folder: Path) -> Path:
    """Without a scenario file (capacity, sweep): the app's scenario, written into `folder`."""
    from qbench.run.init import write_app_scenario
    from qbench.run.options import NO_SCENARIO

    if target is None:
        raise ScenarioError(NO_SCENARIO)
    path = write_app_scenario(target, api, auth, folder)
    typer.echo(f"scenario written from the app (edit and re-run): {path}")
    return path


GridOpt = Annotated[
    list[str] | None, typer.Option(help="Axis: --grid concurrency_limit=1,2,4 (repeatable; any knob).")
]
LinkOpt = Annotated[
    list[str] | None,
    typer.Option("--link", help="Linked knob: --link 'users=2*concurrency_limit*max_batch_size'."),
]
SloOpt = Annotated[list[str] | None, typer.Option(help="SLO bound: --slo p95_latency_s=2.")]
SearchOpt = Annotated[
    str | None,
    typer.Option(
        help="grid (every point), smart (hill climbing) or model (fit batch latency l(b) = t0 + alpha*b "
        "from a few points, measure only the best predicted ones; falls back to smart on a poor fit) or "
        "sim (the same fit drives a queue simulation of every grid point; measures the best predicted)."
    ),
]
PresetOpt = Annotated[
    str | None,
    typer.Option(help="Base reference-server preset (default: sweep.server, else the scenario's name)."),
]
LiveConfigOpt = Annotated[
    bool, typer.Option("--live", help="Reconfigure one reference server via /admin/config.")
]
LaunchOpt = Annotated[
    str | None, typer.Option(help="Your app's command ({knob} and {port} placeholders optional); a "
                             "Gradio app gets the knobs from qbench's startup hook too.")
]
AppFileOpt = Annotated[
    Path | None,
    typer.Option("--app", help="Your Gradio app, unmodified: `python APP [-- app args]` per point, with "
                 "qbench's startup hook setting the knobs (queue(), launch(), the events)."),
]
PythonOpt = Annotated[
    str | None, typer.Option(help="Interpreter for --app: the app's virtualenv (default: qbench's own).")
]
KnobScopeOpt = Annotated[
    str, typer.Option(help="Event knobs (concurrency_limit, ...) on the events the scenario drives "
                      "(driven) or on every queued event (all).")
]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a scenario key: --set load.rate=12 (repeat).")
]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(help="capacity (rank by the highest rate meeting the SLO) or latency (goodput at the "
                 "scenario's load). Default: capacity for a rate load with an SLO, else latency."),
]
CapacityTrialsOpt = Annotated[int | None, typer.Option(help="Rate probes per capacity search (0 = skip).")]
CapacityToleranceOpt = Annotated[
    str | None, typer.Option(help="Capacity search stops at this bracket width (default 10%).")
]
CapacityDurationOpt = Annotated[
    float | None, typer.Option(help="Seconds per capacity probe (default: the point duration).")
]
ConfirmDurationOpt = Annotated[
    float | None, typer.Option(help="Seconds of the sustained run that confirms the winner's capacity "
                               "(default 60; 0 = off: the capacity is then unconfirmed).")
]


@app.command(context_settings={"allow_extra_args": True})
@exits_on_error
def sweep(
    ctx: typer.Context,
    scenario: Annotated[
        Path | None,
        typer.Argument(help="Scenario YAML (optional `sweep:` section: defaults); none: --target and --api."),
    ] = None,
    grid: GridOpt = None,
    links: LinkOpt = None,
    slo: SloOpt = None,
    repeat: Annotated[int | None, typer.Option(help="Runs per point (confidence intervals, ties).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume the interrupted sweep in this folder.")] = None,
    search: SearchOpt = None,
    preset: PresetOpt = None,
    server_config: Annotated[Path | None, typer.Option(help="Base reference-server settings YAML.")] = None,
    live: LiveConfigOpt = False,
    launch: LaunchOpt = None,
    app_file: AppFileOpt = None,
    python: PythonOpt = None,
    knob_scope: KnobScopeOpt = "driven",
    set_: SetOpt = None,
    target: Annotated[str | None, typer.Option(help="Fixed server URL: only client knobs are swept.")] = None,
    api: ApiOpt = None,
    duration: Annotated[float | None, typer.Option(help="Seconds of load per point.")] = None,
    max_memory_mb: Annotated[float | None, typer.Option(help="Memory ceiling (peak RSS / GPU).")] = None,
    tolerated_wait_s: Annotated[float | None, typer.Option(help="Wait users tolerate (max_size).")] = None,
    objective: ObjectiveOpt = None,
    capacity_trials: CapacityTrialsOpt = None,
    capacity_tolerance: CapacityToleranceOpt = None,
    capacity_duration: CapacityDurationOpt = None,
    confirm_duration: ConfirmDurationOpt = None,
    out: Annotated[Path, typer.Option(help="Folder for reports/<sweep-id>/.")] = Path("reports"),
    auth: AuthOpt = None,
    header: HeaderOpt = None,
    bearer_env: BearerEnvOpt = None,
) -> None:
    """Sweep server (and client) knobs, rank the points under an SLO, recommend Gradio settings.

    `qbench sweep scenario.yaml --app app.py --grid concurrency_limit=1,2,4,8 [-- app args]` tunes an
    unmodified app: every point proves its knobs took effect before it is ranked."""
    run_sweep_command(ctx, {k: v for k, v in locals().items() if k != "ctx"})


def run_sweep_command(ctx: typer.Context, cli: dict[str, Any]) -> None:
    """`qbench sweep` with its CLI values: a new sweep (or `--resume`), its progress and its result."""
    from qbench.run.scenario.credentials import cli_overrides
    from qbench.tune.config import resumed_config
    from qbench.tune.sweep import run_sweep
    from qbench.tune.tune_console import SweepProgress, render_sweep, sweep_console, sweep_header

    console = sweep_console()
    credentials = cli_overrides(cli["auth"], cli["header"] or [], cli["bearer_env"])
    where = str(cli["resume"] or cli["out"])
    try:
        config = resumed_config(cli["resume"]) if cli["resume"] else _new_sweep(ctx, cli, credentials)
        config = config.with_auth(credentials)  # never saved in sweep.json
        where = str(config.sweep_dir)
        console.print(sweep_header(config))
        with SweepProgress(config.grid.size, smart=config.search != "grid") as progress:
            render_sweep(run_sweep(config, progress), console)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; finished points are saved: qbench sweep {cli['scenario']} --resume {where}")
        raise typer.Exit(130) from None


def _new_sweep(ctx: typer.Context, cli: dict[str, Any], credentials: dict[str, Any]) -> Any:
    """A new sweep's SweepConfig from the CLI values: the same names as SweepOptions' fields, except the
    ones parsed or renamed here."""
    from dataclasses import fields

    from qbench.run.options import check_api_option
    from qbench.run.runner import parse_set_options
    from qbench.tune.capacity_run import parse_tolerance
    from qbench.tune.config import (
        SweepOptions,
        build_config,
        check_app_args,
        parse_slo_options,
        sweep_options,
    )

    check_app_args(ctx.args, cli["app_file"])
    check_api_option(cli["scenario"], cli["api"])
    scenario = cli["scenario"] or app_scenario_file(cli["target"], cli["api"], credentials, cli["out"])
    same = {f.name for f in fields(SweepOptions)} - {"scenario"}
    values = {k: v for k, v in cli.items() if k in same}
    tolerance = cli["capacity_tolerance"]
    values.update(grid=cli["grid"] or [], links=cli["links"] or [], slo=parse_slo_options(cli["slo"] or []),
                  capacity_tolerance=parse_tolerance(tolerance) if tolerance else None, out_root=cli["out"],
                  app=cli["app_file"], app_args=list(ctx.args),
                  overrides=parse_set_options(cli["set_"] or []))
    return build_config(sweep_options(scenario, **values))


ToleranceOpt = Annotated[
    str, typer.Option(help="Stop when failing / passing rate <= 1 + this; also the overload the "
                      "bisection's probes are long enough to see.")
]
ThinkTimeOpt = Annotated[
    float | None, typer.Option(help="Seconds between a user's clicks, for the equivalent users "
                               "(default: load.think_time, else 10).")
]
ProbeDurationOpt = Annotated[
    float, typer.Option(help="Seconds of load per bracketing probe, and the bisection's least.")
]
MaxProbeDurationOpt = Annotated[
    float, typer.Option(help="Longest bisection probe (s); their length comes from the rate and the "
                        "tolerance.")
]
OverloadOpt = Annotated[
    bool, typer.Option(help="One run at 1.3x the capacity: does throughput hold (max_size advice)?")
]
RecheckOpt = Annotated[
    bool, typer.Option(help="Measure the first passing rate again after the search: did the server get "
                       "slower while it was measured? (degraded; no degradation, only when a 5% slowdown "
                       "is excluded; or inconclusive)")
]
StartRateOpt = Annotated[
    float | None, typer.Option(help="Skip the estimate: start the bracket at this rate (req/s).")
]
ConfirmOpt = Annotated[
    bool, typer.Option(help="Confirm the answer with a sustained run (stepping down if it fails).")
]


@app.command()
@exits_on_error
def capacity(
    scenario: Annotated[
        Path | None, typer.Argument(help="Scenario YAML (payload, endpoint and slo:); none: --target, --api.")
    ] = None,
    target: Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")] = None,
    api: ApiOpt = None,
    slo: Annotated[list[str] | None, typer.Option(help="SLO bound: --slo p95_latency_s=2 (repeat).")] = None,
    tolerance: ToleranceOpt = "10%",
    think_time: ThinkTimeOpt = None,
    duration: ProbeDurationOpt = 5.0,
    max_duration: MaxProbeDurationOpt = 30.0,
    confirm_duration: Annotated[
        float, typer.Option(help="Seconds of the sustained run that confirms the answer (two in a row, "
                                 "with different Poisson seeds, when the service time rises with the queue).")
    ] = 60.0,
    overload: OverloadOpt = True,
    recheck: RecheckOpt = True,
    warmup: Annotated[float, typer.Option(help="Seconds excluded at the start of each probe.")] = 0.5,
    max_probes: Annotated[int, typer.Option(help="Open-loop probes at most.")] = 10,
    estimate_users: Annotated[int, typer.Option(help="Closed-loop users of the first estimate.")] = 32,
    start_rate: StartRateOpt = None,
    confirm: ConfirmOpt = True,
    set_: SetOpt = None,
    out: Annotated[Path, typer.Option(help="Folder for reports/capacity-<name>-<stamp>/.")] = Path("reports"),
    auth: AuthOpt = None,
    header: HeaderOpt = None,
    bearer_env: BearerEnvOpt = None,
) -> None:
    """How many users can my app handle? The highest open-loop arrival rate meeting the SLO (bisection).

    Exit 0 when the search ends (with or without a capacity), 2 on a bad option, a missing SLO or an
    unreachable target, 130 when interrupted."""
    run_capacity_command(dict(locals()))


def run_capacity_command(cli: dict[str, Any]) -> None:
    """`qbench capacity` with its CLI values: the search, its probes as they end, and the answer."""
    from qbench.run.options import check_api_option
    from qbench.run.runner import parse_set_options
    from qbench.run.scenario.credentials import cli_overrides
    from qbench.tune.capacity_run import capacity_config, parse_tolerance, run_capacity
    from qbench.tune.config import parse_slo_options
    from qbench.tune.tune_console import capacity_header, render_capacity, show_probe, sweep_console

    console = sweep_console()
    credentials = cli_overrides(cli["auth"], cli["header"] or [], cli["bearer_env"])
    try:
        check_api_option(cli["scenario"], cli["api"])
        scenario = cli["scenario"] or app_scenario_file(cli["target"], cli["api"], credentials, cli["out"])
        config = capacity_config(
            scenario, target=cli["target"], slo=parse_slo_options(cli["slo"] or []),
            tolerance=parse_tolerance(cli["tolerance"]), max_probes=cli["max_probes"],
            duration_s=cli["duration"], warmup_s=cli["warmup"], think_time_s=cli["think_time"],
            estimate_users=cli["estimate_users"], start_rate=cli["start_rate"], confirm=cli["confirm"],
            out_root=cli["out"], overrides=parse_set_options(cli["set_"] or []) | credentials,
            max_duration_s=cli["max_duration"], confirm_duration_s=cli["confirm_duration"],
            overload=cli["overload"], recheck=cli["recheck"],
        )
        console.print(capacity_header(config))
        render_capacity(run_capacity(config, lambda probe: show_probe(console, probe)), console)
    except KeyboardInterrupt:
        typer.echo("interrupted: no capacity; the probes that finished are under probes/ of the folder above")
        raise typer.Exit(130) from None


@app.command()
@exits_on_error
def balance(
    upstreams: Annotated[list[str], typer.Argument(help="The replicas' base URLs (http://HOST:PORT).")],
    port: Annotated[int, typer.Option(help="Port nginx listens on (127.0.0.1).")] = 7860,
    affinity: Annotated[str, typer.Option(help="session (hash on the session_hash of every request: join "
                                          "body, stream and upload query, heartbeat path), ip (ip_hash) "
                                          "or none (round robin).")] = "session",
) -> None:
    """A local nginx in front of replicas you started (your app on several ports), until Ctrl-C."""
    from qbench.tune.balancer import serve_balancer

    serve_balancer(upstreams, affinity, port)


@app.command()
@exits_on_error
def plan(
    capacity: Annotated[Path | None, typer.Argument(
        help="A `qbench capacity` folder (or its capacity.json): one replica's capacity. A scenario YAML, or "
             "none with --target and --api: `qbench capacity` runs first, at its defaults.")] = None,
    target: Annotated[str | None, typer.Option(help="Without a capacity folder: the server to measure.")
                      ] = None,
    api: ApiOpt = None,
    slo: Annotated[list[str] | None, typer.Option(help="Without a capacity folder: an SLO bound for the "
                                                  "capacity run: --slo p95_latency_s=2 (repeat).")] = None,
    users: Annotated[int | None, typer.Option(help="Peak concurrent users.")] = None,
    think_time: Annotated[float | None, typer.Option(help="Seconds between an answer and a user's next "
                                                     "message (closed-loop users).")] = None,
    messages_per_minute: Annotated[float | None, typer.Option(help="Messages per user per minute (instead "
                                                              "of --think-time).")] = None,
    rate: Annotated[float | None, typer.Option(help="A peak request rate (req/s), instead of users.")] = None,
    requests_per_message: Annotated[float, typer.Option(help="Requests one message makes (a journey's "
                                                        "requests).")] = 1.0,
    headroom: Annotated[str, typer.Option(help="A margin over the measured capacity: plan for peak x (1 + "
                                          "this). Not replica-loss protection: that is --spare.")] = "30%",
    spare: Annotated[int, typer.Option(min=0, help="Spare replicas on top of what the peak needs: losing "
                                       "this many still serves the peak with its headroom.")] = 0,
    price: Annotated[float | None, typer.Option(help="Price per replica-hour (GPU, Space, pod), for the "
                                                "cost.")] = None,
    out: Annotated[Path | None, typer.Option(help="Where plan.json goes (default: beside capacity.json).")
                   ] = None,
) -> None:
    """How many replicas for N users? Replicas, users per replica and cost from one replica's capacity.

    Exit 0 with a plan, 2 on a bad option or a capacity folder without a capacity."""
    from qbench.run.options import check_api_option
    from qbench.tune.capacity_run import capacity_config, run_capacity
    from qbench.tune.config import parse_slo_options
    from qbench.tune.plan import traffic
    from qbench.tune.plan_run import is_scenario, parse_fraction, run_plan
    from qbench.tune.tune_console import (
        capacity_header,
        render_capacity,
        render_plan,
        show_probe,
        sweep_console,
    )

    console = sweep_console()
    peak = traffic(users, think_time, messages_per_minute, rate, requests_per_message)
    fraction = parse_fraction(headroom, "--headroom")
    if capacity is None or is_scenario(capacity):  # measure one replica first, as `qbench capacity` does
        check_api_option(capacity, api)
        scenario = capacity or app_scenario_file(target, api, {}, Path("reports"))
        config = capacity_config(scenario, target=target, slo=parse_slo_options(slo or []))
        console.print(capacity_header(config))
        measured = run_capacity(config, lambda probe: show_probe(console, probe))
        render_capacity(measured, console)
        capacity = measured.out_dir
    render_plan(run_plan(capacity, peak, fraction, price, out, spare), console)


@app.command()
@exits_on_error
def demo(
    preset: Annotated[str, typer.Option(
        help="Reference-server preset: image, text, audio, chat; abc: a mix of three events.")] = "image",
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override the embedded scenario: --set load.rate=4.")
    ] = None,
    reports: Annotated[Path, typer.Option(help="Folder for the run directory.")] = Path("reports"),
) -> None:
    """The main job end to end: serve a real model, load it, print the summary, write the report."""
    from qbench.demo import run_demo
    from qbench.run.runner import parse_set_options

    run_demo(preset=preset, overrides=parse_set_options(set_ or []), reports=reports)


@app.command()
@exits_on_error
def report(
    source: Annotated[Path, typer.Argument(help="A run or sweep folder (reports/<id>/).")],
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the source folder).")] = None,
    open_: Annotated[bool, typer.Option("--open", help="Open report.html in a browser.")] = False,
    x: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the x axis.")] = None,
    y: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the y axis.")] = None,
    recompute: Annotated[bool, typer.Option(
        help="A run's summary, diagnosis and notes computed again from its records by this qbench "
             "(after an upgrade, or an edited SLO in run.json), not read from its summary.json.")] = False,
) -> None:
    """Charts, summary.md and a self-contained report.html from a run or sweep folder."""
    import webbrowser

    from qbench.report.build import build_report

    if (x is None) != (y is None):
        raise QbenchError("--x and --y go together: name both heatmap knobs, or neither")
    files = build_report(source, out, heatmap_axes=(x, y) if x and y else None, recompute=recompute)
    typer.echo(files.markdown.read_text(encoding="utf-8"))
    typer.echo(f"report: {files.html}\nsummary: {files.markdown}\ncharts: {files.html.parent / 'charts'}")
    if open_:
        webbrowser.open(files.html.resolve().as_uri())


@app.command()
@exits_on_error
def compare(
    baseline: Annotated[Path, typer.Argument(help="Run A, the baseline (a run or sweep folder).")],
    candidate: Annotated[Path, typer.Argument(help="Run B, compared with A.")],
    max_regression: Annotated[
        list[str] | None,
        typer.Option(help="Fail (exit 3) when B is worse: --max-regression p95_latency_s=10% (repeatable)."),
    ] = None,
    slo: Annotated[bool, typer.Option(help="Also check B against its scenario's slo: section.")] = True,
    chart: Annotated[
        Path | None, typer.Option(help="Paired runs: write B - A per request over time to this PNG.")
    ] = None,
) -> None:
    """What changed from run A to run B; exit 3 when B regresses past the thresholds (a CI gate)."""
    from rich.console import Console

    from qbench.report.compare import compare as compare_runs
    from qbench.report.compare import comparison_table, paired_lines, parse_max_regression, write_paired_chart

    console = Console()
    result = compare_runs(baseline, candidate, parse_max_regression(max_regression or []), use_slo=slo)
    console.print(comparison_table(result))
    for line in paired_lines(result.pairing) if result.pairing else []:
        console.print(line)
    if chart is not None:
        console.print(f"chart: {write_paired_chart(result, chart)}")
    for text in result.notes():
        console.print(f"[yellow]note:[/] {text}")
    for check in result.slo:
        verdict = "[green]pass[/]" if check.passed else "[bold red]FAIL[/]"
        actual = "-" if check.actual is None else f"{check.actual:.4g}"
        console.print(f"B's SLO {check.name}: {actual} (limit {check.threshold:g}) {verdict}")
    result.check()
    console.print("[green]no regression past the thresholds[/]")


trace_app = typer.Typer(help="Trace files for load.trace: import other formats, show a trace's shape.",
                        no_args_is_help=True)
app.add_typer(trace_app, name="trace")


@trace_app.command("import")
@exits_on_error
def trace_import(
    source: Annotated[Path, typer.Argument(help="The file to convert.")],
    format_: Annotated[str, typer.Option("--format", help="nginx | uvicorn | har | mooncake")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The trace file to write (JSON Lines).")],
    include: Annotated[
        str | None, typer.Option(help="Keep requests whose path matches this regex, e.g. '/predict$'.")
    ] = None,
    spread: Annotated[
        bool, typer.Option(help="nginx: spread the requests of one logged second evenly over it.")
    ] = True,
) -> None:
    """Convert an access log, a HAR recording or a Mooncake trace into a qbench trace file."""
    from qbench.run.scenario.trace_formats import import_trace, write_jsonl

    lines = import_trace(source, format_, spread=spread, include=include)
    write_jsonl(lines, out)
    typer.echo(f"wrote {len(lines)} requests to {out} (use it as load: {{trace: {out}}})")


@trace_app.command("show")
@exits_on_error
def trace_show(
    trace: Annotated[Path, typer.Argument(help="A trace file (JSON Lines or CSV).")],
) -> None:
    """A trace's shape before replaying it: requests, span, rate over time, endpoints."""
    from rich.console import Console

    from qbench.run.scenario.trace import read_trace
    from qbench.run.scenario.trace_formats import sparkline, trace_shape

    shape = trace_shape(read_trace(trace))
    console = Console()
    console.print(f"{trace}: {shape.requests:,} requests over {shape.span_s:,.1f} s, "
                  f"mean {shape.mean_rps:.2f} req/s, peak {shape.peak_rps_1s:.0f} in one second; "
                  f"{shape.with_inputs:,} carry their own inputs")
    console.print(f"req/s over time |{sparkline(shape.per_second)}| (0 to {shape.span_s:,.0f} s)")
    for name, count in shape.endpoints.items():
        console.print(f"  {count:>8,}  {name}")
