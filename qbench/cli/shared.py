"""Options more than one command takes, and what they share: credentials, a scenario from the app."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qbench.errors import ScenarioError

if TYPE_CHECKING:
    from rich.console import Console

    from qbench.tune.servers.server_process import ServerHandle

ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help="Without a scenario file: the endpoint to load (api_name; an OpenAI model). "
                 "The scenario is written from the app's API (as `qbench init`) and saved with the results."),
]
TargetOpt = Annotated[str | None, typer.Option(help="Server base URL (overrides the scenario's).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a scenario key: --set load.rate=12 (repeat).")
]
AppOpt = Annotated[Path | None, typer.Option(
    "--app", help="Start this Gradio, LitServe or Ray Serve app, BentoML service or TorchServe "
    "config.properties, unmodified (`python APP`; `bentoml serve`; `serve run` for a Ray Serve app that "
    "only binds one; `torchserve` with the file's models; on a free port by qbench's startup hook), and "
    "load it.")]
PythonOpt = Annotated[str | None, typer.Option(
    help="Interpreter for --app: the app's virtualenv (default: qbench's own).")]
SloOpt = Annotated[list[str] | None, typer.Option(help="SLO bound: --slo p95_latency_s=2 (repeat).")]
LiveOpt = Annotated[bool, typer.Option(help="Show live progress.")]
AffinityOpt = Annotated[str, typer.Option(help="session (hash on the session_hash of every request: join "
                                          "body, stream and upload query, heartbeat path), ip (ip_hash) "
                                          "or none (round robin).")]


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """The credentials option group (run, sweep, capacity, init): over the scenario's `auth:` section."""

    auth: Annotated[str | None, typer.Option("--auth", help="USER:PASSWORD to log in with (auth.login).")
                    ] = None
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="'Name: value' sent on every request (repeatable).")] = None
    bearer_env: Annotated[str | None, typer.Option(
        "--bearer-env", help="Env variable holding a bearer token (auth.bearer).")] = None

    def overrides(self) -> dict[str, Any]:
        """As the scenario's `auth:` overrides (qbench.run.scenario.credentials)."""
        from qbench.run.scenario.credentials import cli_overrides

        return cli_overrides(self.auth, self.header or [], self.bearer_env)


def app_scenario_file(target: str | None, api: str | None, auth: dict[str, Any], folder: Path) -> Path:
    """Without a scenario file (capacity, sweep, plan): the app's scenario, written into `folder`."""
    from qbench.run.options import NO_SCENARIO
    from qbench.run.target.draft import write_app_scenario

    if target is None:
        raise ScenarioError(NO_SCENARIO)
    path = write_app_scenario(target, api, auth, folder)
    typer.echo(f"scenario written from the app (edit and re-run): {path}")
    return path


def start_app(stack: ExitStack, app_file: Path, work_dir: Path, console: Console,
              python: str | None = None, env: dict[str, str] | None = None) -> ServerHandle:
    """`python APP` on a free port by qbench's startup hook, stopped with `stack`, once ready: its handle."""
    from qbench.tune.servers.app_process import app_launch_line, launch_command

    if not app_file.is_file():
        raise ScenarioError(f"--app {app_file}: no such file")
    command_line = app_launch_line(app_file, python)
    # any answer on /config means it listens (LitServe has none: 404); the hook's record then says what
    # it started, and a LitServe app is ready once its /health says so
    handle = stack.enter_context(launch_command(command_line, {}, work_dir=work_dir, hook=True,
                                                any_status=True, env=env))
    console.print(f"started {app_file} at {handle.base_url} (pid {handle.pid}; log {handle.log_path})")
    return handle
