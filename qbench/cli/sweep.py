"""`qbench sweep`: server (and client) knobs swept, the points ranked under an SLO, Gradio settings
recommended."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qbench.cli.app import command
from qbench.cli.shared import ApiOpt, Credentials, SetOpt, SloOpt, app_scenario_file

if TYPE_CHECKING:
    from qbench.tune.sweep.config import CapacityOptions, SweepConfig, SweepOptions

GridOpt = Annotated[
    list[str] | None, typer.Option(help="Axis: --grid concurrency_limit=1,2,4 (repeatable; any knob).")
]
LinkOpt = Annotated[
    list[str] | None,
    typer.Option("--link", help="Linked knob: --link 'users=2*concurrency_limit*max_batch_size'."),
]
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
LaunchOpt = Annotated[
    str | None, typer.Option(help="Your app's command ({knob} and {port} placeholders optional); a "
                             "Gradio app gets the knobs from qbench's startup hook too, a LitServe or "
                             "Ray Serve app or BentoML service those its command does not pass itself.")
]
AppFileOpt = Annotated[
    Path | None,
    typer.Option("--app", help="Your Gradio, LitServe or Ray Serve app, BentoML service or TorchServe "
                 "config.properties, unmodified: `python APP [-- app args]` (`bentoml serve`, `serve "
                 "run`, `torchserve`) per point, with qbench's "
                 "startup hook setting the knobs (queue(), launch(), the events; LitAPI(max_batch_size, "
                 "batch_timeout), LitServer(workers_per_device); @bentoml.api(max_batch_size, "
                 "max_latency_ms), @bentoml.service(workers, traffic max_concurrency); "
                 "@serve.batch(max_batch_size, batch_wait_timeout_s, max_concurrent_batches), "
                 "@serve.deployment(num_replicas, max_ongoing_requests, max_queued_requests); "
                 "TorchServe's batch_size, max_batch_delay, workers, job_queue_size)."),
]
KnobScopeOpt = Annotated[
    str, typer.Option(help="Event knobs (concurrency_limit, ...) on the events the scenario drives "
                      "(driven) or on every queued event (all).")
]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(help="capacity (rank by the highest rate meeting the SLO) or latency (goodput at the "
                 "scenario's load). Default: capacity for a rate load with an SLO, else latency."),
]


@dataclass(frozen=True, kw_only=True)
class SweepCapacityArgs:
    """The sweep's capacity options, a group (SweepOptions.capacity)."""

    capacity_trials: Annotated[int | None, typer.Option(
        help="Rate probes per capacity search (0 = skip).")] = None
    capacity_tolerance: Annotated[str | None, typer.Option(
        help="Capacity search stops at this bracket width (default 10%).")] = None
    capacity_duration: Annotated[float | None, typer.Option(
        help="Seconds per capacity probe (default: the point duration).")] = None
    confirm_duration: Annotated[float | None, typer.Option(
        help="Seconds of the sustained run that confirms the winner's capacity (default 60; 0 = off: the "
        "capacity is then unconfirmed).")] = None

    def options(self) -> CapacityOptions:
        from qbench.tune.capacity.command import parse_tolerance
        from qbench.tune.sweep.config import CapacityOptions

        tolerance = parse_tolerance(self.capacity_tolerance) if self.capacity_tolerance else None
        return CapacityOptions(trials=self.capacity_trials, tolerance=tolerance,
                               duration=self.capacity_duration, confirm_duration=self.confirm_duration)


@dataclass(frozen=True, kw_only=True)
class SweepArgs:
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML (optional `sweep:` section: defaults); none: --target and --api.")] = None
    grid: GridOpt = None
    links: LinkOpt = None
    slo: SloOpt = None
    repeat: Annotated[int | None, typer.Option(help="Runs per point (confidence intervals, ties).")] = None
    resume: Annotated[Path | None, typer.Option(help="Resume the interrupted sweep in this folder.")] = None
    search: SearchOpt = None
    preset: PresetOpt = None
    server_config: Annotated[Path | None, typer.Option(help="Base reference-server settings YAML.")] = None
    live: Annotated[bool, typer.Option("--live", help="Reconfigure one reference server via /admin/config.")
                    ] = False
    launch: LaunchOpt = None
    app_file: AppFileOpt = None
    python: Annotated[str | None, typer.Option(
        help="Interpreter for --app: the app's virtualenv (default: qbench's own).")] = None
    knob_scope: KnobScopeOpt = "driven"
    set_: SetOpt = None
    target: Annotated[str | None, typer.Option(help="Fixed server URL: only client knobs are swept.")] = None
    api: ApiOpt = None
    duration: Annotated[float | None, typer.Option(help="Seconds of load per point.")] = None
    max_memory_mb: Annotated[float | None, typer.Option(help="Memory ceiling (peak RSS / GPU).")] = None
    tolerated_wait_s: Annotated[float | None, typer.Option(help="Wait users tolerate (max_size).")] = None
    objective: ObjectiveOpt = None
    capacity: SweepCapacityArgs = field(default_factory=SweepCapacityArgs)
    out: Annotated[Path, typer.Option(help="Folder for reports/<sweep-id>/.")] = Path("reports")
    credentials: Credentials = field(default_factory=Credentials)
    app_args: list[str] = field(default_factory=list, metadata={"cli": False})  # after `--`

    def options(self, scenario: Path) -> SweepOptions:
        """The sweep's options, parsed; paths absolute strings (sweep.json keeps them for --resume)."""
        from qbench.run.pipeline import parse_set_options
        from qbench.tune.sweep.config import SweepOptions
        from qbench.tune.values.constraints import parse_slo_options

        slo, overrides = parse_slo_options(self.slo or []), parse_set_options(self.set_ or [])
        return SweepOptions(
            scenario=str(scenario.resolve()), grid=self.grid or [], links=self.links or [], slo=slo,
            repeat=self.repeat, search=self.search, live=self.live, preset=self.preset,
            server_config=_absolute(self.server_config), launch=self.launch, target=self.target,
            duration=self.duration, max_memory_mb=self.max_memory_mb, tolerated_wait_s=self.tolerated_wait_s,
            capacity=self.capacity.options(), objective=self.objective, out_root=str(self.out.resolve()),
            app=_absolute(self.app_file), app_args=list(self.app_args), python=self.python,
            knob_scope=self.knob_scope, overrides=overrides)


@command("sweep", extra_args="app_args")
def sweep(args: SweepArgs) -> None:
    """Sweep server (and client) knobs, rank the points under an SLO, recommend Gradio (or LitServe) settings.

    `qbench sweep scenario.yaml --app app.py --grid concurrency_limit=1,2,4,8 [-- app args]` tunes an
    unmodified app: every point proves its knobs took effect before it is ranked."""
    from qbench.tune.sweep.command import run_sweep
    from qbench.tune.sweep.config import resumed_config
    from qbench.tune.sweep.console import SweepProgress, render_sweep, sweep_console, sweep_header

    console = sweep_console()
    auth = args.credentials.overrides()
    where = str(args.resume or args.out)
    try:
        config = resumed_config(args.resume) if args.resume else _new_sweep(args, auth)
        config = config.with_auth(auth)  # never saved in sweep.json
        where = str(config.sweep_dir)
        console.print(sweep_header(config))
        with SweepProgress(config.grid.size, smart=config.search != "grid") as progress:
            render_sweep(run_sweep(config, progress), console)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; finished points are saved: qbench sweep {args.scenario} --resume {where}")
        raise typer.Exit(130) from None


def _new_sweep(args: SweepArgs, auth: dict[str, Any]) -> SweepConfig:
    from qbench.run.options import check_api_option
    from qbench.tune.sweep.config import build_config, check_app_args

    check_app_args(args.app_args, args.app_file)
    check_api_option(args.scenario, args.api)
    scenario = args.scenario or app_scenario_file(args.target, args.api, auth, args.out)
    return build_config(args.options(scenario))


def _absolute(path: Path | None) -> str | None:
    return None if path is None else str(path.resolve())
