"""Replicas behind nginx, started unprivileged from a generated config, in front of N reference servers
(`reference_replicas`, `qbench serve --replicas`) or of any URLs (`nginx_balancer`, `qbench balance`), with
an affinity (AFFINITIES) that keeps each Gradio session on one replica."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from qbench.errors import ScenarioError, ServerLaunchError
from qbench.run import control
from qbench.tune.servers.server_process import (
    READY_TIMEOUT_S,
    ServerHandle,
    free_port,
    reference_server_process,
    spawn,
    stop_process_group,
)

AFFINITIES = ("session", "ip", "none")
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")

# The session_hash of a request, wherever its kind of request carries it: the query (/queue/data's stream,
# 4.0's GET /queue/join, and qbench's uploads and output downloads: `?session_hash=`), the path
# (/heartbeat/{session_hash}, /stream/{session_hash}/...), the JSON body (/queue/join, /cancel, /reset),
# else a `session_hash` header (Gradio's upload-trace convention). A request with none (/config, a
# browser's or gradio_client's upload) hashes on "": one replica for all of them.
SESSION_MAPS = r"""
  map $request_body $qbench_body_session {
    "~\"session_hash\"\s*:\s*\"(?<qbench_bsh>[^\"]+)\"" $qbench_bsh;
    default $http_session_hash;
  }
  map $uri $qbench_path_session {
    "~^(?!.*/file=).*/(heartbeat|stream)/(?<qbench_psh>[^/]+)" $qbench_psh;
    default $qbench_body_session;
  }
  map $arg_session_hash $qbench_session {
    "" $qbench_path_session;
    default $arg_session_hash;
  }"""
BALANCING = {"session": "hash $qbench_session consistent;", "ip": "ip_hash;", "none": ""}


def nginx_binary() -> str | None:
    """The nginx executable (PATH, then the usual places), None when it is not installed."""
    found = shutil.which("nginx")
    return found or next((p for p in NGINX_CANDIDATES if Path(p).is_file()), None)


def check_affinity(affinity: str) -> str:
    if affinity not in AFFINITIES:
        raise ScenarioError(f"--affinity {affinity!r}: expected one of {', '.join(AFFINITIES)}")
    return affinity


def nginx_config(upstreams: Sequence[str], port: int, affinity: str, folder: Path) -> str:
    """nginx.conf for a balancer on 127.0.0.1:`port` in front of `upstreams`, its files in `folder`."""
    servers = "\n".join(f"    server {_host_port(url)} max_fails=0;" for url in upstreams)
    temp = " ".join(f"{kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                       "uwsgi", "scgi"))
    maps = SESSION_MAPS if affinity == "session" else ""
    return f"""worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  {temp}
  map $http_upgrade $qbench_connection {{ default upgrade; "" ""; }}{maps}
  upstream replicas {{
    {BALANCING[affinity]}
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    client_body_buffer_size 1m;
    client_max_body_size 0;
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $qbench_connection;
      proxy_buffering off;
      proxy_read_timeout 3600s;
      add_header X-Qbench-Upstream $upstream_addr always;
    }}
  }}
}}
"""


def _host_port(url: str) -> str:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.hostname or not parts.port:
        raise ScenarioError(f"upstream {url!r}: expected http://HOST:PORT")
    return f"{parts.hostname}:{parts.port}"


@dataclass
class Balancer:
    """nginx in front of replicas: where it listens, what it balances, and its folder."""

    url: str  # http://127.0.0.1:PORT
    upstreams: list[str]
    affinity: str
    folder: Path
    handle: ServerHandle
    replicas: list[ServerHandle] = field(default_factory=list)  # servers qbench started, if any

    def describe(self) -> str:
        return (f"nginx in front of {len(self.upstreams)} replicas ({', '.join(self.upstreams)}), affinity "
                f"{self.affinity}")


@contextlib.contextmanager
def nginx_balancer(upstreams: Sequence[str], affinity: str = "session", port: int = 0,
                   work_dir: Path | None = None, ready_timeout_s: float = 30.0) -> Iterator[Balancer]:
    """nginx balancing `upstreams`, ready, stopped on exit; ServerLaunchError if missing or failing."""
    check_affinity(affinity)
    if not upstreams:
        raise ScenarioError("a balancer needs at least one upstream")
    binary = nginx_binary()
    if binary is None:
        raise ServerLaunchError("nginx is not installed (Debian/Ubuntu: apt-get install nginx-light); "
                                "qbench starts it unprivileged in front of the replicas")
    with contextlib.ExitStack() as stack:
        folder = work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qbench-nginx-")))
        folder.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        conf = folder / "nginx.conf"
        conf.write_text(nginx_config(upstreams, port, affinity, folder), encoding="utf-8")
        argv = [binary, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf),
                "-g", "daemon off;"]
        process = spawn(argv, env=None, log_path=folder / "nginx.log")
        handle = ServerHandle(f"http://127.0.0.1:{port}", process, folder / "error.log")
        try:
            _wait_listening(handle, ready_timeout_s)
            yield Balancer(handle.base_url, list(upstreams), affinity, folder, handle)
        finally:
            stop_process_group(process)


def _wait_listening(handle: ServerHandle, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with control.client(timeout_s=2.0) as http:
        while time.monotonic() < deadline:
            if handle.process is not None and handle.process.poll() is not None:
                raise ServerLaunchError(f"nginx exited with code {handle.process.returncode}:\n"
                                        f"{handle.log_tail()}")
            if control.answers(http, handle.base_url + "/", any_status=True):
                return
            time.sleep(0.05)
    raise ServerLaunchError(f"nginx did not answer on {handle.base_url} within {timeout_s:g} s:\n"
                            f"{handle.log_tail()}")


@contextlib.contextmanager
def reference_replicas(settings: Any, replicas: int, affinity: str = "session", port: int = 0,
                       args: Sequence[str] = (), work_dir: Path | None = None,
                       ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[Balancer]:
    """`replicas` reference servers, each on its own free port, behind nginx on `port`; stopped on exit."""
    check_affinity(affinity)
    if replicas < 1:
        raise ScenarioError(f"--replicas {replicas}: expected at least 1")
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(reference_server_process(settings, args=args,
                                                                 ready_timeout_s=ready_timeout_s))
                   for _ in range(replicas)]
        front = stack.enter_context(nginx_balancer([h.base_url for h in handles], affinity, port, work_dir))
        front.replicas = handles
        yield front


def serve_replicas(settings: Any, replicas: int, affinity: str = "session", port: int = 7860,
                   echo: Any = print) -> None:
    """`qbench serve --replicas N`: N reference servers behind nginx until Ctrl-C or SIGTERM."""
    _foreground(lambda: reference_replicas(settings, replicas, affinity, port), "reference server", echo)


def serve_balancer(upstreams: Sequence[str], affinity: str = "session", port: int = 7860,
                   echo: Any = print) -> None:
    """`qbench balance URL...`: nginx in front of servers started elsewhere, until Ctrl-C or SIGTERM."""
    _foreground(lambda: nginx_balancer(upstreams, affinity, port), "balancer", echo)


def _foreground(start: Callable[[], contextlib.AbstractContextManager[Balancer]], what: str,
                echo: Any) -> None:
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with start() as front:
            echo(f"{what} ready on {front.url} ({front.describe()})", flush=True)
            while all(h.process is None or h.process.poll() is None for h in [front.handle, *front.replicas]):
                time.sleep(0.5)
            raise ServerLaunchError(f"a replica or nginx exited; nginx's log:\n{front.handle.log_tail()}")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
