"""`qbench init`: a scenario written from the running app's own API."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from qbench.cli.app import command
from qbench.cli.shared import Credentials
from qbench.errors import QbenchError


@dataclass(frozen=True, kw_only=True)
class InitArgs:
    url: Annotated[str, typer.Argument(help="The running app's base URL, e.g. http://127.0.0.1:7860.")]
    api: Annotated[str | None, typer.Option(
        "--api", help="Endpoint (api_name; for an OpenAI server, the model).")] = None
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Write here (default: print it).")] = None
    protocol: Annotated[str, typer.Option(help="auto (Gradio, else OpenAI-compatible, else plain HTTP), "
                                          "gradio, openai, http, mcp")] = "auto"
    mcp: Annotated[bool, typer.Option("--mcp", help="MCP tools (--protocol mcp): URL is a Gradio app's (with "
                                      "mcp_server=True) or any MCP URL, e.g. http://127.0.0.1:8000/mcp.")
                   ] = False
    force: Annotated[bool, typer.Option(help="Overwrite an existing --out file.")] = False
    mix: Annotated[bool, typer.Option(
        "--mix", help="A mix: of every public endpoint (equal weights, to edit).")] = False
    app: Annotated[Path | None, typer.Option(
        "--app", help="The app's source (a plain HTTP server that declares no request body, e.g. "
                      "LitServe's untyped decode_request): the body's keys are read from its code.")] = None
    credentials: Credentials = field(default_factory=Credentials)

    def command_line(self, protocol: str) -> str:
        """The command, as the scenario's header quotes it."""
        return " ".join(["qbench init", self.url, *(["--api", self.api] if self.api else []),
                         *(["--mix"] if self.mix else []), *(["--app", str(self.app)] if self.app else []),
                         *(["--protocol", protocol] if protocol != "auto" else [])])


@command("init")
def init(args: InitArgs) -> None:
    """Write a scenario from the app's own API: endpoint, one generator per input, load, SLO."""
    from qbench.run.target.draft import init_scenario

    out = args.out
    if out is not None and out.exists() and not args.force:
        raise QbenchError(f"{out}: exists; pass --force to overwrite it")
    protocol = "mcp" if args.mcp else args.protocol
    result = init_scenario(args.url, args.api, auth=args.credentials.overrides(), protocol=protocol,
                           command=args.command_line(protocol), scenario_path=out, mix=args.mix, app=args.app)
    if out is None:
        typer.echo(result.text.replace("THIS_FILE", "scenario.yaml"), nl=False)
    else:
        out.write_text(result.text.replace("THIS_FILE", str(out)), encoding="utf-8")
        typer.echo(f"wrote {out}: {result.draft.about[0]}", err=True)
    for note in result.draft.notes:
        typer.echo(f"note: {note}", err=True)
    if out is not None and not result.draft.fill_in:
        typer.echo(f"next: qbench run {out}", err=True)
