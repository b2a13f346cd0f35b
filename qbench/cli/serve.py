"""`qbench serve` (the reference server, or N replicas behind nginx) and `qbench balance` (nginx in front
of replicas you started)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from qbench.cli.app import command
from qbench.cli.shared import AffinityOpt
from qbench.errors import QbenchError


@dataclass(frozen=True, kw_only=True)
class ServeArgs:
    config: Annotated[Path | None, typer.Option(help="Server settings YAML file.")] = None
    preset: Annotated[str | None, typer.Option(
        help="Preset: echo (default), sleep, mixed, image, text, audio, chat, tokens.")] = None
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None
    port: Annotated[int | None, typer.Option(help="Port (default 7860; 0 = any free port).")] = None
    max_threads: Annotated[int | None, typer.Option(help="Max jobs running at once.")] = None
    default_concurrency_limit: Annotated[int | None, typer.Option(help="Default limit.")] = None
    max_size: Annotated[int | None, typer.Option(help="queue.max_size (waiting events before 503).")] = None
    admin_token: Annotated[str | None, typer.Option(help="Enables /admin/config.")] = None
    device: Annotated[str | None, typer.Option(help="auto | cpu | cuda")] = None
    model: Annotated[str | None, typer.Option(help="Override the model of the model workloads.")] = None
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level (default warning).")] = None
    auth: Annotated[list[str] | None, typer.Option(help="USER:PASSWORD: require a login (repeat).")] = None
    auth_token: Annotated[list[str] | None, typer.Option(help="Accept this bearer token (repeat).")] = None
    dtype: Annotated[str | None, typer.Option(help="auto | float32 | float16 | bfloat16 (models)")] = None
    compile: Annotated[bool | None, typer.Option("--compile/--no-compile",
                                                 help="torch.compile the model workloads.")] = None
    compile_backend: Annotated[str | None, typer.Option(
        help="inductor | aot_eager | eager | cudagraphs: the backend (implies --compile).")] = None
    replicas: Annotated[int | None, typer.Option(
        help="Run N replicas behind nginx (listening on --port).")] = None
    affinity: AffinityOpt = "session"


@command("serve")
def serve(args: ServeArgs) -> None:
    """Run the reference server (Gradio's queue semantics and wire protocol) in the foreground; with
    --replicas N, N of them behind a local nginx."""
    # imported here, as every command's library: `qbench --help` takes 0.14 s, 1.8 s with them all
    from reference_server.launch import ServeOptions, settings_from_options
    from reference_server.launch import serve as run_server
    from reference_server.settings import SettingsError

    options = ServeOptions(args.config, args.preset, args.host, args.port, args.max_threads,
                           args.default_concurrency_limit, args.max_size, args.admin_token, args.device,
                           args.model, args.log_level, args.auth, args.auth_token, args.dtype, args.compile,
                           args.compile_backend)
    try:
        settings = settings_from_options(options)
        if args.replicas is None:
            run_server(settings)
        else:
            from qbench.tune.servers.balancer import serve_replicas

            serve_replicas(settings, args.replicas, args.affinity, 7860 if args.port is None else args.port)
    except SettingsError as exc:
        raise QbenchError(str(exc)) from None  # exit 2, as any bad option


@dataclass(frozen=True, kw_only=True)
class BalanceArgs:
    upstreams: Annotated[list[str], typer.Argument(help="The replicas' base URLs (http://HOST:PORT).")]
    port: Annotated[int, typer.Option(help="Port nginx listens on (127.0.0.1).")] = 7860
    affinity: AffinityOpt = "session"


@command("balance")
def balance(args: BalanceArgs) -> None:
    """A local nginx in front of replicas you started (your app on several ports), until Ctrl-C."""
    from qbench.tune.servers.balancer import serve_balancer

    serve_balancer(args.upstreams, args.affinity, args.port)
