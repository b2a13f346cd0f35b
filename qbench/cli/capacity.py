"""`qbench capacity`: the highest open-loop arrival rate that meets the SLO, confirmed by a sustained run."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qbench.cli.app import command
from qbench.cli.shared import (
    ApiOpt,
    AppOpt,
    Credentials,
    PythonOpt,
    SetOpt,
    SloOpt,
    TargetOpt,
    app_scenario_file,
    start_app,
)

if TYPE_CHECKING:
    from qbench.tune.capacity.command import CapacityConfig


@dataclass(frozen=True, kw_only=True)
class CapacityArgs:
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML (payload, endpoint and slo:); none: --target, --api.")] = None
    target: TargetOpt = None
    app_file: AppOpt = None
    python: PythonOpt = None
    api: ApiOpt = None
    slo: SloOpt = None
    tolerance: Annotated[str, typer.Option(
        help="Stop when failing / passing rate <= 1 + this; also the overload the bisection's probes are "
        "long enough to see.")] = "10%"
    think_time: Annotated[float | None, typer.Option(
        help="Seconds between a user's clicks, for the equivalent users (default: load.think_time, else "
        "10).")] = None
    duration: Annotated[float, typer.Option(
        help="Seconds of load per bracketing probe, and the bisection's least.")] = 5.0
    max_duration: Annotated[float, typer.Option(
        help="Longest bisection probe (s); their length comes from the rate and the tolerance.")] = 30.0
    confirm_duration: Annotated[float, typer.Option(
        help="Seconds of the sustained run that confirms the answer (two in a row, with different "
        "Poisson seeds, when the service time rises with the queue).")] = 60.0
    overload: Annotated[bool, typer.Option(
        help="One run at 1.3x the capacity: does throughput hold (max_size advice)?")] = True
    recheck: Annotated[bool, typer.Option(
        help="Measure the first passing rate again after the search: did the server get slower while it "
        "was measured? (degraded; no degradation, only when a 5% slowdown is excluded; "
        "inconclusive; or not judged, when the probes hold too few requests)")] = True
    warmup: Annotated[float, typer.Option(help="Seconds excluded at the start of each probe.")] = 0.5
    max_probes: Annotated[int, typer.Option(help="Open-loop probes at most.")] = 10
    estimate_users: Annotated[int, typer.Option(help="Closed-loop users of the first estimate.")] = 32
    start_rate: Annotated[float | None, typer.Option(
        help="Skip the estimate: start the bracket at this rate (req/s).")] = None
    confirm: Annotated[bool, typer.Option(
        help="Confirm the answer with a sustained run (stepping down if it fails).")] = True
    set_: SetOpt = None
    out: Annotated[Path, typer.Option(help="Folder for reports/capacity-<name>-<stamp>/.")] = Path("reports")
    credentials: Credentials = field(default_factory=Credentials)


@command("capacity")
def capacity(args: CapacityArgs) -> None:
    """How many users can my app handle? The highest open-loop arrival rate meeting the SLO (bisection).

    Exit 0 when the search ends (with or without a capacity), 2 on a bad option, a missing SLO or an
    unreachable target, 130 when interrupted."""
    from qbench.run.options import check_api_option
    from qbench.run.results.files import new_folder
    from qbench.tune.capacity.command import run_capacity
    from qbench.tune.capacity.console import capacity_header, render_capacity, show_probe
    from qbench.tune.servers.apphook import read_hook_record
    from qbench.tune.sweep.console import sweep_console

    console = sweep_console()
    auth = args.credentials.overrides()
    try:
        with ExitStack() as stack:
            if args.app_file is not None:  # the app's log and the hook's record: reports/app-<name>-<stamp>/
                app_dir = new_folder("app", args.app_file.stem, args.out)
                started = start_app(stack, args.app_file, app_dir, console, args.python)
                args = replace(args, target=started.base_url)
            check_api_option(args.scenario, args.api)
            scenario = args.scenario or app_scenario_file(args.target, args.api, auth, args.out)
            config = _config(args, scenario, auth)
            if args.app_file is not None:  # qbench started it: a server its runs collapse is restarted
                hooked = read_hook_record(app_dir)
                config = replace(config, restart=started.restart,
                                 own_cap_now=hooked.own_queue_cap() if hooked is not None else "")
            console.print(capacity_header(config))
            render_capacity(run_capacity(config, lambda probe: show_probe(console, probe)), console)
    except KeyboardInterrupt:
        typer.echo("interrupted: no capacity; the probes that finished are under probes/ of the folder above")
        raise typer.Exit(130) from None


def _config(args: CapacityArgs, scenario: Path, auth: dict[str, Any]) -> CapacityConfig:
    from qbench.run.pipeline import parse_set_options
    from qbench.tune.capacity.command import capacity_config, parse_tolerance
    from qbench.tune.values.constraints import parse_slo_options

    return capacity_config(
        scenario, target=args.target, slo=parse_slo_options(args.slo or []),
        tolerance=parse_tolerance(args.tolerance), max_probes=args.max_probes, duration_s=args.duration,
        warmup_s=args.warmup, think_time_s=args.think_time, estimate_users=args.estimate_users,
        start_rate=args.start_rate, confirm=args.confirm, out_root=args.out,
        overrides=parse_set_options(args.set_ or []) | auth, max_duration_s=args.max_duration,
        confirm_duration_s=args.confirm_duration, overload=args.overload, recheck=args.recheck)
