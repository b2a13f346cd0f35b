"""What `qbench plan` shows: the plan's lines, each figure with what it rests on."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from qbench.tune.plan.command import PlanRun


def render_plan(run: PlanRun, console: Console) -> None:
    """Print the plan's lines (a multi-line value, the settings' code, indented under its label)."""
    for label, text in run.plan.lines:
        style = "bold green" if label == "replicas" else "bold"
        first, *rest = text.split("\n")
        console.print(Text.assemble((f"{label}:", style), f" {first}"), highlight=False)
        for line in rest:
            console.print(f"    {line}", markup=False, highlight=False)
    console.print(f"files: {run.path}")
