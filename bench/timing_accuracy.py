"""Timing accuracy: does qbench measure an injected latency to within 1 ms at moderate load?

Two servers, each in its own process, inject a known latency L:
  * plain HTTP (aiohttp, `await asyncio.sleep(L)`), driven with protocol http: the generator's own
    error, since nothing else sits between the sleep and the client;
  * the reference server's `sleep` workload (async, no jitter, unlimited concurrency), driven with
    protocol gradio: service time (process_starts -> process_completed) vs L, and the end-to-end
    latency, which adds Gradio's join + SSE + dispatch overhead.
Reports p50/p99 of (measured - L) in milliseconds, and the send lag.

Usage: .venv/bin/python bench/timing_accuracy.py [--latency-ms 50] [--rate 20] [--duration 10]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from qbench.run.control import wait_answering
from qbench.run.pipeline import run_scenario
from qbench.run.results.summary import Summary
from qbench.run.scenario.schema import parse_scenario
from qbench.tune.servers.server_process import free_port, reference_server_process

ROOT = Path(__file__).resolve().parents[1]

HTTP_SERVER = """
import asyncio, sys
from aiohttp import web
async def sleep(request):
    await asyncio.sleep(float(request.query["ms"]) / 1000)
    return web.json_response({"ok": True})
app = web.Application()
app.add_routes([web.get("/sleep", sleep)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""

REFERENCE_CONFIG = """
functions:
  - api_name: sleep
    workload: sleep
    params: {{base_ms: {ms}}}
    concurrency_limit: null
launch: {{max_threads: 1000}}
"""






def offsets_ms(values: list[float], latency_s: float) -> tuple[float, float]:
    arr = (np.asarray(values) - latency_s) * 1000
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 99))


async def bare_aiohttp(url: str, n: int) -> list[float]:
    """The floor: one request at a time with a plain aiohttp session, Poisson-ish gaps, no qbench."""
    import aiohttp

    rng = np.random.default_rng(0)
    out: list[float] = []
    async with aiohttp.ClientSession() as http:
        for _ in range(n):
            start = time.perf_counter()
            async with http.get(url) as resp:
                await resp.read()
            out.append(time.perf_counter() - start)
            await asyncio.sleep(float(rng.exponential(0.05)))
    return out[10:]


def row(label: str, summary: Summary, phase: str, latency_s: float, values: list[float]) -> str:
    p50, p99 = offsets_ms(values, latency_s)
    lag = summary.phase("send_lag_s").p99 or 0.0
    return f"{label:46} {phase:22} {p50:+9.2f} {p99:+9.2f} {lag * 1000:9.2f} {summary.completed_ok:6d}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args()
    lat = args.latency_ms / 1000
    tmp = Path(tempfile.mkdtemp(prefix="qbench-timing-"))
    load = {"rate": args.rate, "duration": args.duration, "arrival": "poisson", "warmup": 1, "timeout": 10}
    lines = []

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", HTTP_SERVER, str(port)])
    try:
        wait_answering(f"http://127.0.0.1:{port}/sleep?ms=0")
        spec = parse_scenario(
            {
                "name": "timing-http",
                "protocol": "http",
                "endpoint": {"method": "GET", "path": f"/sleep?ms={args.latency_ms}"},
                "load": load,
            }
        )
        result = run_scenario(spec, target=f"http://127.0.0.1:{port}", out_dir=tmp / "http", live=False)
        bare = asyncio.run(
            bare_aiohttp(f"http://127.0.0.1:{port}/sleep?ms={args.latency_ms}", len(result.records))
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    ok = [r for r in result.records if r.ok and not r.warmup]
    p50, p99 = offsets_ms(bare, lat)
    lines.append(
        f"{'plain HTTP, bare aiohttp loop (no qbench)':46} {'latency from send':22} {p50:+9.2f} {p99:+9.2f}"
    )
    lines.append(
        row(
            "plain HTTP, asyncio.sleep",
            result.summary,
            "latency from send",
            lat,
            [r.latency_from_send_s for r in ok if r.latency_from_send_s is not None],
        )
    )
    lines.append(
        row(
            "",
            result.summary,
            "latency from intended",
            lat,
            [r.latency_s for r in ok if r.latency_s is not None],
        )
    )

    config = tmp / "sleep.yaml"
    config.write_text(REFERENCE_CONFIG.format(ms=args.latency_ms))
    with reference_server_process(config, cwd=ROOT) as server:
        spec = parse_scenario(
            {
                "name": "timing-gradio",
                "endpoint": {"api_name": "sleep"},
                "payload": {"inputs": [{"text": {"words": [2, 5]}}]},
                "load": load,
            }
        )
        result = run_scenario(spec, target=server.base_url, out_dir=tmp / "gradio", live=False)
    ok = [r for r in result.records if r.ok and not r.warmup]
    label = "reference server, sleep workload"
    lines.append(row(label, result.summary, "service time", lat, [r.service_s for r in ok if r.service_s]))
    lines.append(
        row(
            "",
            result.summary,
            "server-reported duration",
            lat,
            [r.server_duration_s for r in ok if r.server_duration_s is not None],
        )
    )
    lines.append(
        row("", result.summary, "latency from intended", lat, [r.latency_s for r in ok if r.latency_s])
    )

    print(
        f"\nInjected latency {args.latency_ms:g} ms, Poisson arrivals at {args.rate:g}/s, {args.duration:g} s"
    )
    print(f"{'server':46} {'measured':22} {'p50 ms':>9} {'p99 ms':>9} {'lag p99':>9} {'ok':>6}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
