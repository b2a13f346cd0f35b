"""`qbench report` (charts, summary.md and report.html from a run or sweep folder) and `qbench compare`
(what changed from run A to run B: a CI gate)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from qbench.cli.app import command
from qbench.errors import QbenchError


@dataclass(frozen=True, kw_only=True)
class ReportArgs:
    source: Annotated[Path, typer.Argument(help="A run or sweep folder (reports/<id>/).")]
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the source folder).")] = None
    open_: Annotated[bool, typer.Option("--open", help="Open report.html in a browser.")] = False
    x: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the x axis.")] = None
    y: Annotated[str | None, typer.Option(help="Sweep heatmaps: knob on the y axis.")] = None
    recompute: Annotated[bool, typer.Option(
        help="A run's summary, diagnosis and notes computed again from its records by this qbench "
             "(after an upgrade, or an edited SLO in run.json), not read from its summary.json.")] = False


@command("report")
def report(args: ReportArgs) -> None:
    """Charts, summary.md and a self-contained report.html from a run or sweep folder."""
    import webbrowser

    from qbench.report.build import build_report

    if (args.x is None) != (args.y is None):
        raise QbenchError("--x and --y go together: name both heatmap knobs, or neither")
    axes = (args.x, args.y) if args.x and args.y else None
    files = build_report(args.source, args.out, heatmap_axes=axes, recompute=args.recompute)
    typer.echo(files.markdown.read_text(encoding="utf-8"))
    typer.echo(f"report: {files.html}\nsummary: {files.markdown}\ncharts: {files.html.parent / 'charts'}")
    if args.open_:
        webbrowser.open(files.html.resolve().as_uri())


@dataclass(frozen=True, kw_only=True)
class CompareArgs:
    baseline: Annotated[Path, typer.Argument(help="Run A, the baseline (a run or sweep folder).")]
    candidate: Annotated[Path, typer.Argument(help="Run B, compared with A.")]
    max_regression: Annotated[list[str] | None, typer.Option(
        help="Fail (exit 3) when B is worse: --max-regression p95_latency_s=10% (repeatable).")] = None
    slo: Annotated[bool, typer.Option(help="Also check B against its scenario's slo: section.")] = True
    chart: Annotated[Path | None, typer.Option(
        help="Paired runs: write B - A per request over time to this PNG.")] = None


@command("compare")
def compare(args: CompareArgs) -> None:
    """What changed from run A to run B; exit 3 when B regresses past the thresholds (a CI gate)."""
    from rich.console import Console

    from qbench.report.compare import compare as compare_runs
    from qbench.report.compare import comparison_table, paired_lines, parse_max_regression, write_paired_chart

    console = Console()
    limits = parse_max_regression(args.max_regression or [])
    result = compare_runs(args.baseline, args.candidate, limits, use_slo=args.slo)
    console.print(comparison_table(result))
    for line in paired_lines(result.pairing) if result.pairing else []:
        console.print(line)
    if args.chart is not None:
        console.print(f"chart: {write_paired_chart(result, args.chart)}")
    for text in result.notes():
        console.print(f"[yellow]note:[/] {text}")
    for check in result.slo:
        verdict = "[green]pass[/]" if check.passed else "[bold red]FAIL[/]"
        actual = "-" if check.actual is None else f"{check.actual:.4g}"
        console.print(f"B's SLO {check.name}: {actual} (limit {check.threshold:g}) {verdict}")
    result.check()
    console.print("[green]no regression past the thresholds[/]")
