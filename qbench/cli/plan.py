"""`qbench plan`: replicas, users per replica and cost for a peak, from one replica's capacity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qbench.cli.app import command
from qbench.cli.shared import ApiOpt, app_scenario_file

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True, kw_only=True)
class PlanArgs:
    capacity: Annotated[Path | None, typer.Argument(
        help="A `qbench capacity` folder (or its capacity.json): one replica's capacity. A scenario YAML, or "
             "none with --target and --api: `qbench capacity` runs first, at its defaults.")] = None
    target: Annotated[str | None, typer.Option(
        help="Without a capacity folder: the server to measure.")] = None
    api: ApiOpt = None
    slo: Annotated[list[str] | None, typer.Option(help="Without a capacity folder: an SLO bound for the "
                                                  "capacity run: --slo p95_latency_s=2 (repeat).")] = None
    users: Annotated[int | None, typer.Option(help="Peak concurrent users.")] = None
    think_time: Annotated[float | None, typer.Option(
        help="Seconds between an answer and a user's next message (closed-loop users).")] = None
    messages_per_minute: Annotated[float | None, typer.Option(
        help="Messages per user per minute (instead of --think-time).")] = None
    rate: Annotated[float | None, typer.Option(help="A peak request rate (req/s), instead of users.")] = None
    requests_per_message: Annotated[float, typer.Option(
        help="Requests one message makes (a journey's requests).")] = 1.0
    headroom: Annotated[str, typer.Option(help="A margin over the measured capacity: plan for peak x (1 + "
                                          "this). Not replica-loss protection: that is --spare.")] = "30%"
    spare: Annotated[int, typer.Option(min=0, help="Spare replicas on top of what the peak needs: losing "
                                       "this many still serves the peak with its headroom.")] = 0
    price: Annotated[float | None, typer.Option(
        help="Price per replica-hour (GPU, Space, pod), for the cost.")] = None
    out: Annotated[Path | None, typer.Option(
        help="Where plan.json goes (default: beside capacity.json).")] = None


@command("plan")
def plan(args: PlanArgs) -> None:
    """How many replicas for N users? Replicas, users per replica and cost from one replica's capacity.

    Exit 0 with a plan, 2 on a bad option or a capacity folder without a capacity."""
    from qbench.tune.plan.command import is_scenario, parse_fraction, run_plan
    from qbench.tune.plan.console import render_plan
    from qbench.tune.plan.replicas import traffic
    from qbench.tune.sweep.console import sweep_console

    console = sweep_console()
    peak = traffic(args.users, args.think_time, args.messages_per_minute, args.rate,
                   args.requests_per_message)
    fraction = parse_fraction(args.headroom, "--headroom")
    capacity = args.capacity
    if capacity is None or is_scenario(capacity):  # measure one replica first, as `qbench capacity` does
        capacity = _measure(args, console)
    render_plan(run_plan(capacity, peak, fraction, args.price, args.out, args.spare), console)


def _measure(args: PlanArgs, console: Console) -> Path:
    """One replica's capacity, at `qbench capacity`'s defaults: its folder."""
    from qbench.run.options import check_api_option
    from qbench.tune.capacity.command import capacity_config, run_capacity
    from qbench.tune.capacity.console import capacity_header, render_capacity, show_probe
    from qbench.tune.values.constraints import parse_slo_options

    check_api_option(args.capacity, args.api)
    scenario = args.capacity or app_scenario_file(args.target, args.api, {}, Path("reports"))
    config = capacity_config(scenario, target=args.target, slo=parse_slo_options(args.slo or []))
    console.print(capacity_header(config))
    measured = run_capacity(config, lambda probe: show_probe(console, probe))
    render_capacity(measured, console)
    return measured.out_dir
