"""How many concurrent waiting Gradio streams does one qbench process hold?

qbench ramps to N concurrent Gradio requests (rate N/ramp for `ramp` seconds) against a function that
answers only after `hold` seconds, so every request keeps waiting on its queue/data SSE stream. We
sample the generator's resident memory while they wait. Reports: ok / errors, peak in flight, peak
RSS and RSS per stream, generator CPU and loop lag.

Servers (each in its own process):
  * `stub` (default): a minimal Gradio-protocol server (aiohttp) that holds each stream and then
    completes it: it isolates the generator, which is what this bench measures;
  * `reference`: the reference server with a `sleep` workload; it keeps at most 2000 sessions'
    message queues, like Gradio, so past 2000 use `--sessions` (a pool of browser-tab-like sessions).

Usage: .venv/bin/python bench/streams_capacity.py [--streams 10000] [--ramp 10] [--hold-s 20]
       [--server stub|reference] [--sessions 0]
(~2 file descriptors per stream across the two processes: check `ulimit -n`).
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from qbench.run.control import wait_answering
from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.scenario.schema import parse_scenario
from qbench.tune.servers.server_process import free_port, reference_server_process

ROOT = Path(__file__).resolve().parents[1]

REFERENCE_CONFIG = """
functions:
  - api_name: wait
    workload: sleep
    params: {{base_ms: {ms}}}
    concurrency_limit: null
launch: {{max_threads: {threads}}}
"""

STUB_SERVER = """
import asyncio, json, sys, uuid
from aiohttp import web
HOLD = float(sys.argv[2])
CONFIG = {"protocol": "sse_v3", "api_prefix": "/gradio_api", "version": "6.31.0",
          "components": [{"id": 1, "type": "textbox"}, {"id": 2, "type": "textbox"}],
          "dependencies": [{"id": 0, "api_name": "wait", "inputs": [1], "outputs": [2]}]}
sessions = {}
def frame(msg):
    return b"data: " + json.dumps(msg).encode() + b"\\n\\n"
async def config(request):
    return web.json_response(CONFIG)
async def info(request):
    return web.json_response({"named_endpoints": {"/wait": {"parameters": [{}]}}})
async def join(request):
    body = await request.json()
    event_id = uuid.uuid4().hex
    sessions.setdefault(body["session_hash"], []).append(event_id)
    return web.json_response({"event_id": event_id})
async def data(request):
    events = sessions.pop(request.query["session_hash"], [])
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for e in events:
        est = {"msg": "estimation", "event_id": e, "rank": 0, "queue_size": 1, "rank_eta": HOLD}
        await resp.write(frame(est))
        await resp.write(frame({"msg": "process_starts", "event_id": e, "eta": HOLD}))
    await asyncio.sleep(HOLD)
    for e in events:
        out = {"data": ["done"], "is_generating": False, "duration": HOLD}
        await resp.write(frame({"msg": "process_completed", "event_id": e, "output": out, "success": True}))
    await resp.write(frame({"msg": "close_stream", "event_id": None}))
    return resp
app = web.Application()
app.add_routes([web.get("/config", config), web.get("/gradio_api/info", info),
                web.post("/gradio_api/queue/join", join), web.get("/gradio_api/queue/data", data)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None, backlog=4096)
"""






@contextlib.contextmanager
def start_server(kind: str, hold_s: float, streams: int, tmp: Path) -> Iterator[str]:
    """The server under test, ready: the stub on a free port, or the reference server (qbench's one
    subprocess starter); yields its base URL and stops it after."""
    if kind == "reference":
        config = tmp / "wait.yaml"
        config.write_text(REFERENCE_CONFIG.format(ms=hold_s * 1000, threads=streams * 2))
        with reference_server_process(config, cwd=ROOT) as server:
            yield server.base_url
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", STUB_SERVER, str(port), str(hold_s)])
    try:
        wait_answering(f"http://127.0.0.1:{port}/config")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--ramp", type=float, default=10.0)
    parser.add_argument("--hold-s", type=float, default=20.0)
    parser.add_argument("--server", choices=["stub", "reference"], default="stub")
    parser.add_argument("--sessions", type=int, default=0, help="session pool size (0 = one per request)")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = Path(tempfile.mkdtemp(prefix="qbench-streams-"))
    me = psutil.Process()
    rss0 = me.memory_info().rss
    peak = [rss0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            peak[0] = max(peak[0], me.memory_info().rss)

    load: dict[str, Any] = {
        "rate": args.streams / args.ramp,
        "requests": args.streams,
        "timeout": args.hold_s + args.ramp + 60,
        "connect_timeout": 60,
        "sessions": args.sessions or "per_request",
    }
    spec = parse_scenario(
        {
            "name": "streams",
            "endpoint": {"api_name": "wait"},
            "payload": {"inputs": [{"value": "x"}]},
            "load": load,
        }
    )
    with start_server(args.server, args.hold_s, args.streams, tmp) as url:
        threading.Thread(target=sample, daemon=True).start()
        try:
            result: RunResult = run_scenario(spec, target=url, out_dir=tmp / "run", live=False)
        finally:
            done.set()
    report(args, result, rss0, peak[0])


def report(args: argparse.Namespace, result: RunResult, rss0: int, peak: int) -> None:
    s, g = result.summary, result.summary.generator
    held = g.max_in_flight or 0
    pool = f"{args.sessions} sessions" if args.sessions else "one session per request"
    print(
        f"\n{args.server} server: {args.streams} requests, {pool}, ramp {args.ramp:g} s, "
        f"hold {args.hold_s:g} s"
    )
    print(f"  ok {s.completed_ok}, errors {s.errors_by_kind or 'none'}")
    print(f"  peak concurrent waiting streams (in flight): {held}")
    per_stream = (peak - rss0) / max(held, 1) / 1024
    print(
        f"  generator RSS: start {rss0 / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, "
        f"{per_stream:.1f} KiB/stream"
    )
    lag = (s.phase("send_lag_s").p99 or 0) * 1000
    print(
        f"  generator CPU {g.cpu_s:.1f} s ({g.cpu_percent:.0f}% of a core), max loop lag "
        f"{(g.max_loop_lag_s or 0) * 1000:.0f} ms, send lag p99 {lag:.1f} ms"
    )


if __name__ == "__main__":
    main()
