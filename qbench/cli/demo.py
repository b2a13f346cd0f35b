"""`qbench demo`: the main job end to end on an embedded default (a real model served, loaded, reported)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from qbench.cli.app import command


@dataclass(frozen=True, kw_only=True)
class DemoArgs:
    preset: Annotated[str, typer.Option(
        help="Reference-server preset: image, text, audio, chat; abc: a mix of three events.")] = "image"
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override the embedded scenario: --set load.rate=4.")] = None
    reports: Annotated[Path, typer.Option(help="Folder for the run directory.")] = Path("reports")


@command("demo")
def demo(args: DemoArgs) -> None:
    """The main job end to end: serve a real model, load it, print the summary, write the report."""
    from qbench.demo import run_demo
    from qbench.run.pipeline import parse_set_options

    run_demo(preset=args.preset, overrides=parse_set_options(args.set_ or []), reports=args.reports)
