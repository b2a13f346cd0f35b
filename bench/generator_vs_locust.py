"""Load-generator cost: qbench (protocol http, open and closed loop) vs Locust FastHttpUser vs HttpUser.

All generators hit the SAME plain HTTP echo server (aiohttp, its own process) in one run. Each
generator runs as its own process; after a warm-up we sample, over a fixed window, the generator's
CPU time (psutil, user+system) and the server's request counter, which gives for every tool alike:

    achieved req/s            server-counted requests in the window / window
    CPU s per 1,000 requests  generator CPU in the window / requests * 1000

Unpaced rows (Locust's users with no wait, qbench's closed loop) compare with unpaced FastHttpUser;
each open-loop rate compares with FastHttpUser paced to the same rate (`constant_throughput`), since
CPU per request grows as the rate falls (fewer requests share each loop wake-up) for every tool.

Usage:  .venv/bin/python bench/generator_vs_locust.py [--users 50] [--rates 1000 5000] [--window 8]
                                                     [--repeats 1] [--baseline DIR] [--uvloop]
(needs the bench extra: `pip install -e '.[bench]'`, i.e. locust). `--baseline DIR` also runs the
open-loop rates with the qbench package found in DIR (e.g. an older commit:
`git archive OLD qbench | tar -x -C DIR`), for a before/after in the same run. Numbers on a shared
2-core machine are noisy; compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from qbench.tune.servers.server_process import free_port

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

SERVER = """
import sys
from aiohttp import web
count = 0
async def echo(request):
    global count
    count += 1
    return web.Response(body=await request.read(), content_type="application/json")
async def get_count(request):
    return web.json_response({"count": count})
app = web.Application()
app.add_routes([web.post("/echo", echo), web.get("/count", get_count)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""

LOCUSTFILE = """
import os
from locust import HttpUser, FastHttpUser, task, constant, constant_throughput
BODY = '{"prompt": "the quick brown fox", "n": 1}'
HEADERS = {"Content-Type": "application/json"}
class Fast(FastHttpUser):
    wait_time = constant(0)
    @task
    def echo(self):
        self.client.post("/echo", data=BODY, headers=HEADERS)
class Paced(FastHttpUser):  # open-loop-like: each user paced to PACE tasks/s (rate / users)
    wait_time = constant_throughput(float(os.environ.get("PACE", "1")))
    @task
    def echo(self):
        self.client.post("/echo", data=BODY, headers=HEADERS)
class Slow(HttpUser):
    wait_time = constant(0)
    @task
    def echo(self):
        self.client.post("/echo", data=BODY, headers=HEADERS)
"""

SCENARIO = """
name: bench
protocol: http
endpoint: {{method: POST, path: /echo, body: {{prompt: "$0", n: 1}}}}
payload: {{inputs: [{{value: "the quick brown fox"}}]}}
load: {load}
"""


@dataclass
class Result:
    name: str
    rps: float
    cpu_per_1k: float
    cpu_percent: float
    ref: str = ""  # the row this one's CPU per request is compared with (set by main)




def server_count(port: int) -> int:
    import httpx

    return int(httpx.get(f"http://127.0.0.1:{port}/count", timeout=5).json()["count"])


def require_peers() -> None:
    """Locust is what this benchmark compares with: without it there is nothing to report."""
    if importlib.util.find_spec("locust") is None:
        raise SystemExit(
            "error: bench/generator_vs_locust.py compares qbench with Locust, which is not installed in "
            f"{PY}; install the bench extra: pip install -e '.[bench]' (or pip install locust)"
        )


def measure(name: str, cmd: list[str], port: int, warmup: float, window: float,
            env: dict[str, str] | None = None, cwd: Path = ROOT) -> Result:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    try:
        ps = psutil.Process(proc.pid)
        time.sleep(warmup)
        cpu0, n0, t0 = _cpu(ps), server_count(port), time.perf_counter()
        time.sleep(window)
        cpu1, n1, t1 = _cpu(ps), server_count(port), time.perf_counter()
        if n1 == n0:  # a generator that crashed or never connected: no figure to compare
            raise SystemExit(
                f"error: {name} sent no request in {window:g} s (exit code {proc.poll()}): {shlex.join(cmd)}"
            )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    requests = n1 - n0
    cpu = cpu1 - cpu0
    return Result(name, requests / (t1 - t0), cpu / requests * 1000, 100 * cpu / (t1 - t0))


def _cpu(ps: psutil.Process) -> float:
    """CPU seconds of the process and its children (locust may fork workers)."""
    total = 0.0
    for p in [ps, *ps.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=50, help="concurrent users / connections")
    parser.add_argument("--rates", type=float, nargs="+", default=[1000.0, 5000.0],
                        help="qbench open-loop rates (req/s)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a folder holding another qbench package: its open loop runs too (before/after)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the whole sequence this many times; the table shows each row's median")
    parser.add_argument("--uvloop", action="store_true", help="also run qbench's open loop on uvloop")
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--window", type=float, default=8.0)
    args = parser.parse_args(argv)
    require_peers()
    if args.baseline is not None and not (args.baseline / "qbench" / "__main__.py").is_file():
        raise SystemExit(f"error: --baseline {args.baseline}: expected a folder holding qbench/__main__.py")
    port = free_port()
    target = f"http://127.0.0.1:{port}"
    run_s = args.warmup + args.window + 5
    tmp = Path(tempfile.mkdtemp(prefix="qbench-bench-"))
    (tmp / "locustfile.py").write_text(LOCUSTFILE)
    closed_load = f"{{users: {args.users}, duration: {run_s}, max_connections: {args.users}, timeout: 10}}"
    (tmp / "closed.yaml").write_text(SCENARIO.format(load=closed_load))

    def qbench(name: str, tag: str = "") -> list[str]:
        return [
            PY,
            "-m",
            "qbench",
            "run",
            str(tmp / name),
            "--target",
            target,
            "--no-live",
            "--out",
            str(tmp / f"run-{name}{tag}"),
        ]

    def locust(user: str) -> list[str]:
        return [
            PY,
            "-m",
            "locust",
            "-f",
            str(tmp / "locustfile.py"),
            user,
            "--headless",
            "-u",
            str(args.users),
            "-r",
            str(args.users * 10),
            "-t",
            f"{run_s:.0f}s",
            "-H",
            target,
            "--only-summary",
            "--loglevel",
            "ERROR",
        ]

    def run(name: str, cmd: list[str], env: dict[str, str] | None = None, ref: str = "",
            cwd: Path = ROOT) -> Result:
        result = measure(name, cmd, port, args.warmup, args.window, env, cwd)
        result.ref = ref or name
        return result

    fast = f"Locust FastHttpUser ({args.users} users)"
    cap = args.users  # in-flight cap = connections: a hiccup queues in the schedule, not in aiohttp
    variants: list[tuple[str, dict[str, str], Path]] = [("qbench", dict(os.environ), ROOT)]
    if args.uvloop:
        variants.append(("qbench uvloop", {**os.environ, "QBENCH_LOOP": "uvloop"}, ROOT))
    if args.baseline is not None:  # run from its folder: `python -m` puts the working folder first
        base = args.baseline.resolve()
        variants.insert(0, ("qbench baseline", {**os.environ, "PYTHONPATH": str(base)}, base))
    server = subprocess.Popen([PY, "-c", SERVER, str(port)], env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        _wait_ready(port)
        rounds = []
        for _ in range(args.repeats):
            results = [run(fast, locust("Fast"))]
            results.append(run(f"Locust HttpUser ({args.users} users)", locust("Slow"), ref=fast))
            results.append(run(f"qbench closed loop ({args.users} users)", qbench("closed.yaml"), ref=fast))
            for rate in args.rates:
                # the same rate from Locust (each user paced to rate/users per second) and qbench's open loop
                paced = f"Locust FastHttpUser paced at {rate:g} req/s"
                pace_env = {**os.environ, "PACE": f"{rate / args.users:g}"}
                results.append(run(paced, locust("Paced"), pace_env))
                load = f"{{rate: {rate}, duration: {run_s}, max_connections: {cap}, max_in_flight: {cap}}}"
                (tmp / f"open{rate:g}.yaml").write_text(SCENARIO.format(load=load))
                for label, env, cwd in variants:
                    tag = label.removeprefix("qbench").strip().replace(" ", "-")
                    cmd = qbench(f"open{rate:g}.yaml", tag)
                    results.append(run(f"{label} open loop ({rate:g} req/s)", cmd, env, paced, cwd))
            rounds.append(results)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print_table(median_rows(rounds))


def median_rows(rounds: list[list[Result]]) -> list[Result]:
    """Each row's median over the repeats (CPU per request and req/s separately)."""
    out = []
    for rows in zip(*rounds, strict=True):
        first = rows[0]
        out.append(Result(first.name, statistics.median(r.rps for r in rows),
                          statistics.median(r.cpu_per_1k for r in rows),
                          statistics.median(r.cpu_percent for r in rows), first.ref))
    return out


def _wait_ready(port: int) -> None:
    import httpx

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            server_count(port)
            return
        except (OSError, httpx.TransportError):  # connection refused until the server listens
            time.sleep(0.1)
    raise RuntimeError("echo server did not start")


def print_table(results: list[Result]) -> None:
    """One row per generator; the last column compares CPU per request with the row named in `ref`
    (unpaced rows with unpaced FastHttpUser, open-loop rows with FastHttpUser paced at the same rate)."""
    by_name = {r.name: r for r in results}
    print(
        textwrap.dedent(f"""
        Generator cost against one aiohttp echo server ({os.cpu_count()} cores, shared machine; medians)
        {"generator":44} {"req/s":>9} {"CPU s/1k req":>13} {"CPU %":>7} {"CPU/req vs FastHttpUser":>24}""")
    )
    for r in results:
        ref = by_name.get(r.ref, r)
        ratio = r.cpu_per_1k / ref.cpu_per_1k if ref.cpu_per_1k else float("nan")
        print(f"{r.name:44} {r.rps:9.0f} {r.cpu_per_1k:13.3f} {r.cpu_percent:7.0f} {ratio:24.2f}")
    print("open-loop rows compare with FastHttpUser paced at the same rate; the others with it unpaced")


if __name__ == "__main__":
    main()
