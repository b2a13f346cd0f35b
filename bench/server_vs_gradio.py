"""Reference server vs real Gradio: the same echo and sleep functions, the same client, one run.

    .venv/bin/python bench/server_vs_gradio.py [--duration 8] [--clients 16] [--sleep-clients 8]

Each server runs in its own subprocess (one at a time, so they never share the CPU with each other)
and serves two functions declared alike on both sides:

    echo    async, returns its text; concurrency_limit --echo-limit (default: none, so up to
            max_threads=40 jobs at once)
    sleep   async, sleeps --sleep-ms (100); concurrency_limit --sleep-limit (4)

One aiohttp client drives both with the Gradio protocol (POST /queue/join, then GET /queue/data for
the session until process_completed): C closed-loop clients, each a fresh session per job, for a
fixed duration. Per server and phase it prints jobs/s, p50/p99 latency (join sent -> completion)
and the median queue overhead: join sent -> process_starts received, with ONE client on an idle
server (so it is the protocol and dispatch cost, not waiting behind other jobs). Ratio lines
compare the two; `ratio: N.N` is echo jobs/s, reference / gradio. On sleep, both should reach the
ideal limit / sleep jobs/s (4 / 0.1 s = 40/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

API = "/gradio_api"


@dataclass(frozen=True)
class Options:
    duration_s: float
    clients: int
    sleep_clients: int
    sleep_ms: float
    sleep_limit: int
    echo_limit: int | None
    overhead_s: float
    servers: tuple[str, ...]


@dataclass
class Sample:
    """One job as the client saw it (monotonic seconds)."""

    sent: float
    started: float  # process_starts received
    done: float  # process_completed received
    ok: bool


@dataclass(frozen=True)
class Row:
    server: str
    phase: str
    clients: int
    jobs_per_s: float
    p50_ms: float
    p99_ms: float
    queue_p50_ms: float
    errors: int
    client_cpu: float  # CPU seconds the client used per wall second (1.0 = one core saturated)


# ---------------------------------------------------------------- client


async def one_job(http: aiohttp.ClientSession, url: str, fn_index: int) -> Sample:
    """Join, open the session's stream, read until our process_completed."""
    session = uuid.uuid4().hex
    sent = time.monotonic()
    body = {"data": ["hello"], "fn_index": fn_index, "session_hash": session}
    async with http.post(f"{url}{API}/queue/join", json=body) as resp:
        if resp.status != 200:
            await resp.read()
            return Sample(sent, sent, time.monotonic(), False)
    started = 0.0
    async with http.get(f"{url}{API}/queue/data", params={"session_hash": session}) as stream:
        async for line in stream.content:
            if b'"process_starts"' in line:
                started = time.monotonic()
            elif b'"process_completed"' in line:
                done = time.monotonic()
                return Sample(sent, started or done, done, b'"success":true' in line)
    return Sample(sent, started or sent, time.monotonic(), False)


async def closed_loop(url: str, fn_index: int, clients: int, duration_s: float) -> tuple[list[Sample], float]:
    """`clients` loops, each sending its next job when the previous completes, for `duration_s`.

    Returns the samples and the wall time (until the last in-flight job finished).
    """
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    samples: list[Sample] = []
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        t0 = time.monotonic()
        deadline = t0 + duration_s

        async def user() -> None:
            while time.monotonic() < deadline:
                samples.append(await one_job(http, url, fn_index))

        await asyncio.gather(*(user() for _ in range(clients)))
        return samples, time.monotonic() - t0


def summarize(
    server: str, phase: str, clients: int, samples: list[Sample], wall_s: float, cpu_s: float
) -> Row:
    good = [s for s in samples if s.ok]
    latencies = sorted((s.done - s.sent) * 1000 for s in good) or [float("nan")]
    queue = [(s.started - s.sent) * 1000 for s in good] or [float("nan")]
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return Row(
        server,
        phase,
        clients,
        len(good) / wall_s,
        statistics.median(latencies),
        p99,
        statistics.median(queue),
        len(samples) - len(good),
        cpu_s / wall_s,
    )


async def fn_indices(url: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/config") as resp:
        config = await resp.json()
    return {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}


def measure(server: str, url: str, opts: Options) -> list[Row]:
    """Warm-up, echo throughput, echo queue overhead (one client), sleep throughput."""
    index = asyncio.run(fn_indices(url))
    asyncio.run(closed_loop(url, index["echo"], opts.clients, 1.0))  # warm-up
    rows = []
    for phase, fn, clients, duration in (
        ("echo", "echo", opts.clients, opts.duration_s),
        ("echo-1", "echo", 1, opts.overhead_s),
        ("sleep", "sleep", opts.sleep_clients, opts.duration_s),
    ):
        cpu0 = time.process_time()
        samples, wall = asyncio.run(closed_loop(url, index[fn], clients, duration))
        rows.append(summarize(server, phase, clients, samples, wall, time.process_time() - cpu0))
    return rows


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reference_config(opts: Options) -> dict[str, Any]:
    return {
        "functions": [
            {"api_name": "echo", "workload": "echo", "concurrency_limit": opts.echo_limit},
            {
                "api_name": "sleep",
                "workload": "sleep",
                "params": {"base_ms": opts.sleep_ms},
                "concurrency_limit": opts.sleep_limit,
            },
        ],
        "launch": {"host": "127.0.0.1", "port": 0, "max_threads": 40},
    }


def child_env() -> dict[str, str]:
    return {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}


@contextmanager
def subprocess_server(cmd: list[str], ready_marker: str, startup_s: float = 120.0) -> Iterator[str]:
    """Start `cmd`, wait for a stdout line containing `ready_marker` and a URL; stop it at exit."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        text=True,
    )
    try:
        yield _wait_for_url(proc, ready_marker, startup_s)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_url(proc: subprocess.Popen[str], marker: str, startup_s: float) -> str:
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if marker in line:
                found.append(line.split()[-1])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(startup_s)
    if not found:
        raise RuntimeError(f"{' '.join(proc.args)} did not print {marker!r} within {startup_s} s")  # type: ignore[arg-type]
    return found[0]


@contextmanager
def start_server(name: str, opts: Options) -> Iterator[str]:
    if name == "reference":
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.yaml"
            path.write_text(yaml.safe_dump(reference_config(opts)))
            cmd = [sys.executable, "-m", "reference_server", "--config", str(path), "--port", "0"]
            with subprocess_server(cmd, "ready on") as url:
                yield url
        return
    spec = json.dumps(
        {"echo_limit": opts.echo_limit, "sleep_ms": opts.sleep_ms, "sleep_limit": opts.sleep_limit}
    )
    with subprocess_server([sys.executable, __file__, "--serve-gradio", spec], "READY") as url:
        yield url


def serve_gradio(spec_json: str) -> None:
    """Child process: the same two functions as a real Gradio app."""
    import gradio as gr

    spec = json.loads(spec_json)

    async def echo(text: str) -> str:
        return text

    async def sleep(text: str) -> str:
        await asyncio.sleep(spec["sleep_ms"] / 1000)
        return text

    with gr.Blocks() as demo:
        box_in, box_out = gr.Textbox(), gr.Textbox()
        gr.Button("echo").click(echo, box_in, box_out, api_name="echo", concurrency_limit=spec["echo_limit"])
        gr.Button("sleep").click(
            sleep, box_in, box_out, api_name="sleep", concurrency_limit=spec["sleep_limit"]
        )
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    print(f"READY http://127.0.0.1:{port}", flush=True)
    sys.stdin.read()
    demo.close()


# ---------------------------------------------------------------- report


def render(rows: list[Row], opts: Options) -> str:
    lines = [
        f"{'server':<10} {'phase':<7} {'clients':>7} {'jobs/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'queue p50 ms':>13} {'errors':>6} {'client cpu':>10}"
    ]
    lines += [
        f"{r.server:<10} {r.phase:<7} {r.clients:>7} {r.jobs_per_s:>9.1f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} "
        f"{r.queue_p50_ms:>13.2f} {r.errors:>6} {r.client_cpu:>10.0%}"
        for r in rows
    ]
    by = {(r.server, r.phase): r for r in rows}
    if {"reference", "gradio"} <= {r.server for r in rows}:
        ref, gra = by[("reference", "echo")], by[("gradio", "echo")]
        lines.append(
            f"ratio: {ref.jobs_per_s / gra.jobs_per_s:.1f}   (echo jobs/s, reference / gradio, "
            f"{opts.clients} clients)"
        )
        ref1, gra1 = by[("reference", "echo-1")], by[("gradio", "echo-1")]
        lines.append(
            f"queue overhead ratio: {gra1.queue_p50_ms / ref1.queue_p50_ms:.1f}   "
            f"(join -> process_starts p50 with one client, gradio / reference)"
        )
    ideal = opts.sleep_limit / (opts.sleep_ms / 1000)
    for server in opts.servers:
        achieved = by[(server, "sleep")].jobs_per_s
        lines.append(
            f"sleep {server}: {achieved:.1f} jobs/s of ideal {ideal:.1f} ({achieved / ideal:.0%})  "
            f"[{opts.sleep_limit} x {opts.sleep_ms:.0f} ms, {opts.sleep_clients} clients]"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=8.0, help="seconds per throughput phase (8)")
    p.add_argument("--overhead-duration", type=float, default=4.0, help="seconds of the one-client phase (4)")
    p.add_argument("--clients", type=int, default=16, help="closed-loop clients on echo (16)")
    p.add_argument("--sleep-clients", type=int, default=8, help="closed-loop clients on sleep (8)")
    p.add_argument("--sleep-ms", type=float, default=100.0, help="sleep function duration (100)")
    p.add_argument("--sleep-limit", type=int, default=4, help="sleep concurrency_limit (4)")
    p.add_argument("--echo-limit", type=int, default=None, help="echo concurrency_limit (default: none)")
    p.add_argument("--servers", default="gradio,reference", help="which servers, in order (gradio,reference)")
    a = p.parse_args(argv)
    servers = tuple(s.strip() for s in a.servers.split(",") if s.strip())
    if not servers or set(servers) - {"gradio", "reference"}:
        p.error(f"--servers: expected a comma list of gradio, reference; got {a.servers!r}")
    return Options(
        a.duration,
        a.clients,
        a.sleep_clients,
        a.sleep_ms,
        a.sleep_limit,
        a.echo_limit,
        a.overhead_duration,
        servers,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    rows: list[Row] = []
    for name in opts.servers:
        with start_server(name, opts) as url:
            print(f"{name}: {url}", file=sys.stderr, flush=True)
            rows += measure(name, url, opts)
    print(render(rows, opts))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-gradio":
        serve_gradio(sys.argv[2])
    else:
        raise SystemExit(main())
