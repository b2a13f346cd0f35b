"""Reference server vs real Gradio: the same echo and sleep functions, the same client, one run.

    .venv/bin/python bench/server_vs_gradio.py [--duration 8] [--clients 16] [--sleep-clients 8]

Each server runs in its own subprocess and serves two functions declared alike on both sides:

    echo    async, returns its text; concurrency_limit --echo-limit (default: none, so up to
            max_threads=40 jobs at once)
    sleep   async, sleeps --sleep-ms (100); concurrency_limit --sleep-limit (4)

One aiohttp client drives both with the Gradio protocol (POST /queue/join, then GET /queue/data for
the session until process_completed): C closed-loop clients, each a fresh session per job, for a
fixed duration. Phases are interleaved (--rounds rounds, alternating which server goes first) and
the server not being measured is paused (SIGSTOP), so drifting machine load hits both alike and an
idle Gradio's 1 ms dispatcher poll costs nothing. Per server and phase it prints jobs/s, p50/p99
latency (join sent -> completion), the median queue overhead (join sent -> process_starts
received; the `echo-1` phase has ONE client on an idle server, so it is the protocol and dispatch
cost, not waiting behind other jobs), the server's CPU time per job (psutil; less sensitive to
machine load than jobs/s) and the client's CPU use. Ratio lines compare the two; `ratio: N.N` is
echo jobs/s, reference / gradio. On sleep, both should reach the ideal limit / sleep jobs/s
(4 / 0.1 s = 40/s).

Gradio is measured as shipped. Note that Gradio 6.31 rebuilds a pandas DataFrame of its last
(up to 10,000) event records after EVERY event (`Queue.compute_analytics_summary`, monitoring),
so its CPU per event grows with the events served; GRADIO_ANALYTICS_CACHE_FREQUENCY=100000 in the
environment (passed to the child) gave it 3.6x the echo jobs/s in one run here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import psutil

from qbench.tune.servers.server_process import free_port, reference_server_process

API = "/gradio_api"
T = TypeVar("T")


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
    rounds: int


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
    server_cpu_ms_per_job: float  # server process CPU time (user + system) per completed job
    client_cpu: float  # CPU seconds the client used per wall second (1.0 = one core saturated)


@dataclass
class Tally:
    """Everything measured for one (server, phase), pooled over rounds."""

    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0


@dataclass(frozen=True)
class Phase:
    name: str
    fn: str
    clients: int
    duration_s: float


@dataclass
class Server:
    """A running server subprocess."""

    name: str
    url: str
    process: psutil.Process
    fn_index: dict[str, int] = field(default_factory=dict)

    def cpu_s(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)


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


def summarize(server: str, phase: Phase, tally: Tally) -> Row:
    good = [s for s in tally.samples if s.ok]
    latencies = sorted((s.done - s.sent) * 1000 for s in good) or [float("nan")]
    queue = [(s.started - s.sent) * 1000 for s in good] or [float("nan")]
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return Row(
        server,
        phase.name,
        phase.clients,
        len(good) / tally.wall_s,
        statistics.median(latencies),
        p99,
        statistics.median(queue),
        len(tally.samples) - len(good),
        tally.server_cpu_s * 1000 / max(len(good), 1),
        tally.client_cpu_s / tally.wall_s,
    )


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when installed (a cheaper client leaves more CPU to the servers)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def fn_indices(url: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/config") as resp:
        config = await resp.json()
    return {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}


def run_phase(server: Server, phase: Phase, tally: Tally) -> None:
    """One closed-loop run of `phase` against `server`, added to `tally`."""
    cpu0, server_cpu0 = time.process_time(), server.cpu_s()
    samples, wall = run_async(
        closed_loop(server.url, server.fn_index[phase.fn], phase.clients, phase.duration_s)
    )
    tally.samples += samples
    tally.wall_s += wall
    tally.client_cpu_s += time.process_time() - cpu0
    tally.server_cpu_s += server.cpu_s() - server_cpu0


def phases(opts: Options) -> list[Phase]:
    return [
        Phase("echo", "echo", opts.clients, opts.duration_s),
        Phase("echo-1", "echo", 1, opts.overhead_s),
        Phase("sleep", "sleep", opts.sleep_clients, opts.duration_s),
    ]


def measure(servers: list[Server], opts: Options) -> list[Row]:
    """Warm up each server, then every phase, interleaved over rounds; the others are paused."""
    for server in servers:
        server.fn_index = run_async(fn_indices(server.url))
    tallies = {(s.name, p.name): Tally() for s in servers for p in phases(opts)}
    for round_no in range(opts.rounds):
        order = servers if round_no % 2 == 0 else servers[::-1]
        for phase in phases(opts):
            for server in order:
                with only_running(server, servers):
                    if round_no == 0 and phase.name == "echo":
                        run_async(closed_loop(server.url, server.fn_index["echo"], opts.clients, 1.0))
                    run_phase(server, phase, tallies[(server.name, phase.name)])
    return [summarize(s.name, p, tallies[(s.name, p.name)]) for s in servers for p in phases(opts)]


@contextmanager
def only_running(active: Server, servers: list[Server]) -> Iterator[None]:
    """Pause (SIGSTOP) every server but `active` for the duration of the block."""
    paused = [s for s in servers if s is not active]
    for server in paused:
        server.process.suspend()
    try:
        yield
    finally:
        for server in paused:
            server.process.resume()


# ---------------------------------------------------------------- servers




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
def subprocess_server(
    cmd: list[str], ready_marker: str, startup_s: float = 120.0
) -> Iterator[tuple[str, psutil.Process]]:
    """Start `cmd`, wait for a stdout line with `ready_marker` and a URL; yield (url, process); stop it."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        text=True,
    )
    try:
        yield _wait_for_url(proc, ready_marker, startup_s), psutil.Process(proc.pid)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.send_signal(signal.SIGCONT)  # in case it was left paused
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
def start_server(name: str, opts: Options) -> Iterator[Server]:
    if name == "reference":
        env = {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
        with reference_server_process(reference_config(opts), env=env, ready_timeout_s=120) as handle:
            assert handle.pid is not None
            yield Server(name, handle.base_url, psutil.Process(handle.pid))
        return
    spec = json.dumps(
        {"echo_limit": opts.echo_limit, "sleep_ms": opts.sleep_ms, "sleep_limit": opts.sleep_limit}
    )
    with subprocess_server([sys.executable, __file__, "--serve-gradio", spec], "READY") as (url, process):
        yield Server(name, url, process)


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


COLUMNS = (  # header, width, cell
    ("server", -10, lambda r: r.server),
    ("phase", -7, lambda r: r.phase),
    ("clients", 7, lambda r: f"{r.clients}"),
    ("jobs/s", 9, lambda r: f"{r.jobs_per_s:.1f}"),
    ("p50 ms", 8, lambda r: f"{r.p50_ms:.2f}"),
    ("p99 ms", 8, lambda r: f"{r.p99_ms:.2f}"),
    ("queue p50 ms", 13, lambda r: f"{r.queue_p50_ms:.2f}"),
    ("errors", 6, lambda r: f"{r.errors}"),
    ("srv cpu ms/job", 15, lambda r: f"{r.server_cpu_ms_per_job:.2f}"),
    ("client cpu", 11, lambda r: f"{r.client_cpu:.0%}"),
)


def table(rows: list[Row]) -> list[str]:
    def line(cells: list[str]) -> str:
        return " ".join(
            f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, (_, w, _) in zip(cells, COLUMNS, strict=True)
        )

    return [line([h for h, _, _ in COLUMNS])] + [line([cell(r) for _, _, cell in COLUMNS]) for r in rows]


def render(rows: list[Row], opts: Options) -> str:
    lines = table(rows)
    by = {(r.server, r.phase): r for r in rows}
    if {"reference", "gradio"} <= {r.server for r in rows}:
        ref, gra = by[("reference", "echo")], by[("gradio", "echo")]
        ref1, gra1 = by[("reference", "echo-1")], by[("gradio", "echo-1")]
        lines += [
            f"ratio: {ref.jobs_per_s / gra.jobs_per_s:.1f}   "
            f"(echo jobs/s, reference / gradio, {opts.clients} clients)",
            f"cpu ratio: {gra.server_cpu_ms_per_job / ref.server_cpu_ms_per_job:.1f}   "
            "(server CPU per echo job, gradio / reference)",
            "queue overhead p50 (echo, one client, join -> process_starts): "
            f"reference {ref1.queue_p50_ms:.2f} ms, gradio {gra1.queue_p50_ms:.2f} ms "
            f"(ratio {gra1.queue_p50_ms / ref1.queue_p50_ms:.1f})",
        ]
    ideal = opts.sleep_limit / (opts.sleep_ms / 1000)
    for server in opts.servers:
        achieved = by[(server, "sleep")].jobs_per_s
        lines.append(
            f"sleep {server}: {achieved:.1f} jobs/s of ideal {ideal:.1f} ({achieved / ideal:.0%})  "
            f"[limit {opts.sleep_limit} x {opts.sleep_ms:.0f} ms, {opts.sleep_clients} clients]"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per throughput phase and round (5)")
    p.add_argument("--overhead-duration", type=float, default=3.0, help="seconds of the one-client phase (3)")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds per phase (2)")
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
    if a.rounds < 1 or a.duration <= 0 or a.overhead_duration <= 0:
        p.error("--rounds must be >= 1 and the durations > 0")
    return Options(
        a.duration,
        a.clients,
        a.sleep_clients,
        a.sleep_ms,
        a.sleep_limit,
        a.echo_limit,
        a.overhead_duration,
        servers,
        a.rounds,
    )


def require_peers(opts: Options) -> None:
    """Real Gradio is what the reference server is compared with (when --servers names it)."""
    if "gradio" in opts.servers and importlib.util.find_spec("gradio") is None:
        raise SystemExit(
            "error: bench/server_vs_gradio.py compares the reference server with Gradio, which is not "
            f"installed in {sys.executable}; install the test extra: pip install -e '.[test]' "
            "(or pip install gradio), or measure the reference server alone: --servers reference"
        )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    require_peers(opts)
    with ExitStack() as stack:
        servers = [stack.enter_context(start_server(name, opts)) for name in opts.servers]
        for server in servers:
            print(f"{server.name}: {server.url} (pid {server.process.pid})", file=sys.stderr, flush=True)
        rows = measure(servers, opts)
    print(
        f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)"
    )
    print(render(rows, opts))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-gradio":
        serve_gradio(sys.argv[2])
    else:
        raise SystemExit(main())
