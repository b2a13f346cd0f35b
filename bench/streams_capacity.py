"""How many concurrent waiting Gradio streams does one qbench process hold?

The reference server (its own process) serves a slow async function (`sleep`, default 20 s, unlimited
concurrency), so every request keeps its queue/data SSE stream open while it waits. qbench ramps to
N concurrent requests (rate N/ramp for `ramp` seconds, one session and one stream per request) and
we sample the generator's resident memory while they wait. Reports: requests ok, peak in flight,
peak RSS and RSS per stream, generator CPU.

Usage: .venv/bin/python bench/streams_capacity.py [--streams 10000] [--ramp 10] [--sleep-s 20]
(needs ~2 file descriptors per stream across the two processes: check `ulimit -n`).
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

from qbench.runner import RunResult, run_scenario
from qbench.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]

CONFIG = """
functions:
  - api_name: wait
    workload: sleep
    params: {{base_ms: {ms}}}
    concurrency_limit: null
launch: {{max_threads: {threads}}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--ramp", type=float, default=10.0)
    parser.add_argument("--sleep-s", type=float, default=20.0)
    parser.add_argument(
        "--sessions",
        type=int,
        default=1000,
        help="session pool size (0 = one session per request; Gradio keeps at most 2000 sessions' message "
        "queues, so more concurrent sessions than that get 'session not found')",
    )
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = Path(tempfile.mkdtemp(prefix="qbench-streams-"))
    config = tmp / "wait.yaml"
    config.write_text(CONFIG.format(ms=args.sleep_s * 1000, threads=args.streams * 2))
    port = free_port()
    cmd = [sys.executable, "-m", "qbench", "serve", "--config", str(config), "--port", str(port)]
    server = subprocess.Popen(cmd, cwd=ROOT)
    me = psutil.Process()
    rss0 = me.memory_info().rss
    peak = [rss0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            peak[0] = max(peak[0], me.memory_info().rss)

    try:
        wait_http(f"http://127.0.0.1:{port}/config")
        spec = parse_scenario(
            {
                "name": "streams",
                "endpoint": {"api_name": "wait"},
                "payload": {"inputs": [{"value": "x"}]},
                "load": {
                    "rate": args.streams / args.ramp,
                    "requests": args.streams,
                    "timeout": args.sleep_s + args.ramp + 60,
                    "connect_timeout": 60,
                },
            }
        )
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        result: RunResult = run_scenario(
            spec, target=f"http://127.0.0.1:{port}", out_dir=tmp / "run", live=False
        )
    finally:
        done.set()
        server.terminate()
        server.wait(timeout=30)
    s, g = result.summary, result.summary.generator
    held = g.max_in_flight or 0
    pool = f"{args.sessions} sessions" if args.sessions else "one session per request"
    print(
        f"\n{args.streams} requests ({pool}) ramped over {args.ramp:g} s, {args.sleep_s:g} s function"
    )
    print(f"  ok {s.completed_ok}, errors {s.errors_by_kind or 'none'}")
    print(f"  peak concurrent streams (in flight): {held}")
    print(
        f"  generator RSS: start {rss0 / 2**20:.0f} MiB, peak {peak[0] / 2**20:.0f} MiB, "
        f"{(peak[0] - rss0) / max(held, 1) / 1024:.1f} KiB per stream"
    )
    lag = (s.phase("send_lag_s").p99 or 0) * 1000
    print(
        f"  generator CPU {g.cpu_s:.1f} s ({g.cpu_percent:.0f}% of a core), max loop lag "
        f"{(g.max_loop_lag_s or 0) * 1000:.0f} ms, send lag p99 {lag:.1f} ms"
    )


if __name__ == "__main__":
    main()
