"""`qbench trace import` (other formats -> a qbench trace file) and `qbench trace show` (a trace's shape)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from qbench.cli.app import command, trace_app


@dataclass(frozen=True, kw_only=True)
class TraceImportArgs:
    source: Annotated[Path, typer.Argument(help="The file to convert.")]
    format_: Annotated[str, typer.Option("--format", help="nginx | uvicorn | har | mooncake")]
    out: Annotated[Path, typer.Option("-o", "--out", help="The trace file to write (JSON Lines).")]
    include: Annotated[str | None, typer.Option(
        help="Keep requests whose path matches this regex, e.g. '/predict$'.")] = None
    spread: Annotated[bool, typer.Option(
        help="nginx: spread the requests of one logged second evenly over it.")] = True


@command("import", group=trace_app)
def trace_import(args: TraceImportArgs) -> None:
    """Convert an access log, a HAR recording or a Mooncake trace into a qbench trace file."""
    from qbench.run.scenario.trace_formats import import_trace, write_jsonl

    lines = import_trace(args.source, args.format_, spread=args.spread, include=args.include)
    write_jsonl(lines, args.out)
    typer.echo(f"wrote {len(lines)} requests to {args.out} (use it as load: {{trace: {args.out}}})")


@dataclass(frozen=True, kw_only=True)
class TraceShowArgs:
    trace: Annotated[Path, typer.Argument(help="A trace file (JSON Lines or CSV).")]


@command("show", group=trace_app)
def trace_show(args: TraceShowArgs) -> None:
    """A trace's shape before replaying it: requests, span, rate over time, endpoints."""
    from rich.console import Console

    from qbench.run.scenario.trace import read_trace
    from qbench.run.scenario.trace_formats import sparkline, trace_shape

    shape = trace_shape(read_trace(args.trace))
    console = Console()
    console.print(f"{args.trace}: {shape.requests:,} requests over {shape.span_s:,.1f} s, "
                  f"mean {shape.mean_rps:.2f} req/s, peak {shape.peak_rps_1s:.0f} in one second; "
                  f"{shape.with_inputs:,} carry their own inputs")
    console.print(f"req/s over time |{sparkline(shape.per_second)}| (0 to {shape.span_s:,.0f} s)")
    for name, count in shape.endpoints.items():
        console.print(f"  {count:>8,}  {name}")
