"""Options more than one command takes, and what they share: credentials, a scenario from the app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from qbench.errors import ScenarioError

# Credentials (run, sweep, capacity, init) override the scenario's auth: section
# (qbench.run.scenario.credentials).
AuthOpt = Annotated[str | None, typer.Option("--auth", help="USER:PASSWORD to log in with (auth.login).")]
HeaderOpt = Annotated[
    list[str] | None, typer.Option("--header", help="'Name: value' sent on every request (repeatable).")
]
BearerEnvOpt = Annotated[
    str | None, typer.Option("--bearer-env", help="Env variable holding a bearer token (auth.bearer).")
]
ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help="Without a scenario file: the endpoint to load (api_name; an OpenAI model). "
                 "The scenario is written from the app's API (as `qbench init`) and saved with the results."),
]
TargetOpt = Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a scenario key: --set load.rate=12 (repeat).")
]
SloOpt = Annotated[list[str] | None, typer.Option(help="SLO bound: --slo p95_latency_s=2 (repeat).")]
LiveOpt = Annotated[bool, typer.Option(help="Show live progress.")]
AffinityOpt = Annotated[str, typer.Option(help="session (hash on the session_hash of every request: join "
                                          "body, stream and upload query, heartbeat path), ip (ip_hash) "
                                          "or none (round robin).")]


def credentials(auth: str | None, header: list[str] | None, bearer_env: str | None) -> dict[str, Any]:
    """--auth, --header and --bearer-env as the scenario's `auth:` overrides."""
    from qbench.run.scenario.credentials import cli_overrides

    return cli_overrides(auth, header or [], bearer_env)


def app_scenario_file(target: str | None, api: str | None, auth: dict[str, Any], folder: Path) -> Path:
    """Without a scenario file (capacity, sweep, plan): the app's scenario, written into `folder`."""
    from qbench.run.init import write_app_scenario
    from qbench.run.options import NO_SCENARIO

    if target is None:
        raise ScenarioError(NO_SCENARIO)
    path = write_app_scenario(target, api, auth, folder)
    typer.echo(f"scenario written from the app (edit and re-run): {path}")
    return path
