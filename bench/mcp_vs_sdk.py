"""qbench's `protocol: mcp` against the official MCP SDK client, on the same servers, in one run.

    .venv/bin/python bench/mcp_vs_sdk.py [--calls 40] [--rounds 3] [--servers fastmcp,gradio]

Two servers, each in its own subprocess (the one not being measured is paused, SIGSTOP):

    fastmcp  the SDK's own server (FastMCP, Streamable HTTP at /mcp, stateful sessions): a tool `steps`
             that sleeps --step-ms (10) and reports progress, 3 times, then answers after one more sleep
             (progress is sent only to a call that asks for it, with a progressToken)
    gradio   a Gradio app launched with mcp_server=True (/gradio_api/mcp/): a tool `work` that sleeps
             20 ms

and two clients, one user each (closed loop, one call after another), each with progress asked for
(the SDK: `call_tool(..., progress_callback=...)`, which sends a progressToken; qbench's default) and
without (`endpoint.progress: false`):

    qbench   `python -m qbench run` on a scenario calling the tool (--warmup + --calls requests)
    sdk      `mcp.ClientSession` over `streamable_http_client` in a subprocess of this script

Per server, progress setting and client it prints the median over --rounds of each round's p50 and p90
latency (sent -> the call's answer; the first --warmup calls of each round left out), the p50 of the
first progress notification, the progress notifications per call and the client's CPU ms per call
(its process's CPU time over its calls / calls). Ratio lines: p50 qbench / SDK with the same progress
setting, and progress on / off per client (what asking for progress costs on that server). Exits
non-zero when the `mcp` SDK is missing (or Gradio, unless --servers leaves it out), or when a client
completes no call.
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
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from qbench.tune.servers.server_process import free_port

SERVERS = ("fastmcp", "gradio")
CLIENTS = ("qbench", "sdk")

FASTMCP_APP = '''
import asyncio
import sys

from mcp.server.fastmcp import Context, FastMCP

DELAY = float(sys.argv[2]) / 1000
server = FastMCP("steps", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool()
async def steps(count: int, ctx: Context) -> int:
    """Report progress `count` times, then answer `count`.

    Args:
        count: how many progress notifications to send
    """
    for i in range(count):
        await asyncio.sleep(DELAY)
        await ctx.report_progress(i + 1, count)
    await asyncio.sleep(DELAY)
    return count


server.run(transport="streamable-http")
'''

GRADIO_APP = '''
import sys
import time

import gradio as gr


def work(count: int) -> int:
    """Sleep 20 ms, then answer `count`.

    Args:
        count: any whole number
    """
    time.sleep(0.02)
    return count


with gr.Blocks() as demo:
    gr.api(work, api_name="work")

demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]), mcp_server=True, quiet=True)
'''


@dataclass(frozen=True)
class Options:
    calls: int
    warmup: int
    rounds: int
    step_ms: float
    servers: tuple[str, ...]


@dataclass(frozen=True)
class Server:
    name: str
    origin: str  # http://127.0.0.1:PORT
    path: str  # the MCP URL's path
    tool: str
    process: subprocess.Popen[bytes]


@dataclass(frozen=True)
class Sample:
    """One client's calls in one round."""

    latencies_s: list[float]  # per call after the warmup: sent -> answer
    first_s: list[float]  # per call with progress: sent -> first progress notification
    outputs: float  # progress notifications per call
    cpu_ms: float  # the client's CPU per call (all its calls, warmup included)
    errors: int


# ---------------------------------------------------------------- the SDK client (a subprocess of this)
async def sdk_calls(url: str, tool: str, calls: int, progress: bool) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    latencies, firsts, outputs, errors = [], [], [], 0
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        cpu0 = time.process_time()
        seen: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            seen.append(time.perf_counter())

        callback = on_progress if progress else None
        for _ in range(calls):
            seen.clear()
            t0 = time.perf_counter()
            result = await session.call_tool(tool, {"count": 3}, progress_callback=callback)
            latencies.append(time.perf_counter() - t0)
            firsts.append(seen[0] - t0 if seen else None)
            outputs.append(len(seen))
            errors += bool(result.isError)
        cpu = time.process_time() - cpu0
    return {"latencies_s": latencies, "first_s": firsts, "outputs": outputs, "cpu_s": cpu, "errors": errors}


def run_sdk(server: Server, opts: Options, progress: bool) -> Sample:
    argv = [sys.executable, __file__, "--sdk-client", server.origin + server.path, server.tool,
            str(opts.warmup + opts.calls), "1" if progress else "0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the SDK client failed on {server.name}: {done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    keep = slice(opts.warmup, None)
    firsts = [f for f in raw["first_s"][keep] if f is not None]
    return Sample(raw["latencies_s"][keep], firsts, statistics.mean(raw["outputs"][keep]),
                  1000 * raw["cpu_s"] / len(raw["latencies_s"]), raw["errors"])


# ---------------------------------------------------------------- qbench (python -m qbench run)
def run_qbench(server: Server, opts: Options, progress: bool, folder: Path) -> Sample:
    import pandas as pd

    total = opts.warmup + opts.calls
    scenario = {"name": "mcp", "target": server.origin, "protocol": "mcp",
                "endpoint": {"path": server.path, "tool": server.tool, "arguments": ["count"],
                             "progress": progress},
                "payload": {"inputs": [{"value": 3}]},
                "load": {"users": 1, "requests": total, "warmup": 0, "timeout": 60}}
    path, out = folder / "mcp.yaml", folder / f"run-{time.monotonic_ns()}"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "qbench", "run", str(path), "--out", str(out), "--no-live"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 3):
        raise SystemExit(f"qbench run failed on {server.name}: {(done.stdout + done.stderr)[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    records = pd.read_parquet(out / "records.parquet").sort_values("request_id").iloc[opts.warmup:]
    ok = records[records["outcome"] == "ok"]
    latencies = (ok["completed_at_s"] - ok["sent_at_s"]).tolist()
    firsts = (ok["first_output_at_s"] - ok["sent_at_s"]).dropna().tolist()
    return Sample(latencies, firsts, float(ok["outputs"].fillna(0).mean()) if len(ok) else 0.0,
                  1000 * summary["generator"]["cpu_s"] / total, int((records["outcome"] != "ok").sum()))


# ---------------------------------------------------------------- servers
@contextmanager
def start_server(name: str, step_ms: float, folder: Path, tries: int = 3) -> Iterator[Server]:
    """The server in its subprocess, started again (up to `tries` times) when it exits while starting:
    on a busy host Gradio's own check that localhost answers can time out."""
    script = folder / f"{name}_app.py"
    script.write_text(FASTMCP_APP if name == "fastmcp" else GRADIO_APP)
    path, tool = ("/mcp", "steps") if name == "fastmcp" else ("/gradio_api/mcp/", "work")
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    for attempt in range(tries):
        port = free_port()
        argv = [sys.executable, str(script), str(port)] + ([str(step_ms)] if name == "fastmcp" else [])
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   cwd=folder)
        server = Server(name, f"http://127.0.0.1:{port}", path, tool, process)
        try:
            asyncio.run(wait_ready(server))
            break
        except SystemExit:
            stop(process)
            if attempt == tries - 1:
                raise
            print(f"{name} exited while starting; starting it again", file=sys.stderr, flush=True)
    try:
        yield server
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def wait_ready(server: Server, timeout_s: float = 120.0) -> None:
    """Until the server answers an `initialize` at its MCP URL."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise SystemExit(f"{server.name} exited: {server.process.stderr.read().decode()[-2000:]}"
                                 if server.process.stderr else f"{server.name} exited")
            try:
                async with http.post(server.origin + server.path, json=body, headers=headers) as resp:
                    await resp.read()
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit(f"{server.name} did not answer initialize within {timeout_s:g} s")


# ---------------------------------------------------------------- the run
def measure(servers: list[Server], opts: Options, folder: Path) -> dict[tuple[str, bool, str], list[Sample]]:
    samples: dict[tuple[str, bool, str], list[Sample]] = {}
    for r in range(opts.rounds):
        for server in servers:
            for other in servers:
                os.kill(other.process.pid, signal.SIGCONT if other is server else signal.SIGSTOP)
            asyncio.run(wait_ready(server))  # a resumed server answers again before it is measured
            for progress in (True, False):
                for client in (CLIENTS if r % 2 == 0 else CLIENTS[::-1]):
                    sample = (run_qbench(server, opts, progress, folder) if client == "qbench"
                              else run_sdk(server, opts, progress))
                    if not sample.latencies_s:
                        raise SystemExit(f"{client} completed no call on {server.name} (progress {progress})")
                    samples.setdefault((server.name, progress, client), []).append(sample)
                    print(f"round {r + 1} {server.name} progress={progress} {client}: p50 "
                          f"{1000 * pct(sample.latencies_s, 50):.1f} ms", file=sys.stderr, flush=True)
    return samples


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def med(samples: list[Sample], figure: Any) -> float:
    return statistics.median(figure(s) for s in samples)


def render(samples: dict[tuple[str, bool, str], list[Sample]], opts: Options) -> str:
    lines = [f"{opts.calls} calls per client and round after {opts.warmup} warm-up calls, 1 user, "
             f"median of {opts.rounds} rounds",
             f"{'server':8} {'progress':8} {'client':6} {'p50 ms':>8} {'p90 ms':>8} {'first ms':>9} "
             f"{'outputs':>8} {'CPU ms/call':>11} {'errors':>6}"]
    for (server, progress, client), rows in samples.items():
        first = [s for s in rows if s.first_s]
        lines.append(
            f"{server:8} {'on' if progress else 'off':8} {client:6} "
            f"{1000 * med(rows, lambda s: pct(s.latencies_s, 50)):8.1f} "
            f"{1000 * med(rows, lambda s: pct(s.latencies_s, 90)):8.1f} "
            f"{(1000 * med(first, lambda s: pct(s.first_s, 50)) if first else float('nan')):9.1f} "
            f"{med(rows, lambda s: s.outputs):8.2f} {med(rows, lambda s: s.cpu_ms):11.2f} "
            f"{sum(s.errors for s in rows):6d}")
    for server in opts.servers:
        for progress in (True, False):
            q, k = samples[(server, progress, "qbench")], samples[(server, progress, "sdk")]
            ratio = med(q, lambda s: pct(s.latencies_s, 50)) / med(k, lambda s: pct(s.latencies_s, 50))
            cpu = med(q, lambda s: s.cpu_ms) / med(k, lambda s: s.cpu_ms)
            lines.append(f"ratio {server} progress {'on ' if progress else 'off'}: p50 qbench / SDK "
                         f"{ratio:.3f}; CPU per call qbench / SDK {cpu:.2f}")
        for client in CLIENTS:
            on, off = samples[(server, True, client)], samples[(server, False, client)]
            cost = med(on, lambda s: pct(s.latencies_s, 50)) / med(off, lambda s: pct(s.latencies_s, 50))
            lines.append(f"ratio {server} {client}: p50 progress on / off {cost:.2f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=40, help="measured calls per client and round (40)")
    p.add_argument("--warmup", type=int, default=5, help="calls left out at the start of each (5)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    p.add_argument("--step-ms", type=float, default=10.0, help="the FastMCP tool's sleep per step (10)")
    p.add_argument("--servers", default=",".join(SERVERS), help="which servers (fastmcp,gradio)")
    a = p.parse_args(argv)
    servers = tuple(s.strip() for s in a.servers.split(",") if s.strip())
    if not servers or set(servers) - set(SERVERS):
        p.error(f"--servers: expected a comma list of {', '.join(SERVERS)}; got {a.servers!r}")
    if a.calls < 1 or a.warmup < 0 or a.rounds < 1:
        p.error("--calls and --rounds must be >= 1, --warmup >= 0")
    return Options(a.calls, a.warmup, a.rounds, a.step_ms, servers)


def require_peers(opts: Options) -> None:
    """The SDK client is what qbench is compared with; Gradio when --servers names it."""
    if importlib.util.find_spec("mcp") is None:
        raise SystemExit(
            "error: bench/mcp_vs_sdk.py compares qbench with the official MCP SDK client, which is not "
            f"installed in {sys.executable}; install the test extra: pip install -e '.[test]' "
            "(or pip install mcp)")
    if "gradio" in opts.servers and importlib.util.find_spec("gradio") is None:
        raise SystemExit(
            "error: bench/mcp_vs_sdk.py's gradio server needs Gradio, which is not installed in "
            f"{sys.executable}: pip install 'gradio[mcp]', or measure the SDK's server alone: "
            "--servers fastmcp")


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    require_peers(opts)
    with tempfile.TemporaryDirectory(prefix="mcp-vs-sdk-") as tmp, ExitStack() as stack:
        folder = Path(tmp)
        servers = [stack.enter_context(start_server(name, opts.step_ms, folder)) for name in opts.servers]
        samples = measure(servers, opts, folder)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end: {load} ({os.cpu_count()} cores)")
    print(render(samples, opts))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--sdk-client":
        url, tool, calls, progress = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
        print(json.dumps(asyncio.run(sdk_calls(url, tool, calls, progress))))
    else:
        raise SystemExit(main())
