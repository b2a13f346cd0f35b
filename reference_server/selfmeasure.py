"""Quick self-measure of queue overhead: closed-loop aiohttp clients doing join + SSE against echo.

    python -m reference_server.selfmeasure [--clients 1 32] [--seconds 5] [--procs 2] [--url URL]

Without --url it starts the `echo` preset (concurrency_limit null) in a thread. Each client loops:
POST /queue/join, GET /queue/data, read until close_stream. Prints jobs/s and latency percentiles
(the single-client median is the queue + protocol overhead per request).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from contextlib import nullcontext
from typing import Any

import aiohttp

from reference_server.settings import load_preset
from reference_server.testing import serve_in_thread


async def _one(http: aiohttp.ClientSession, url: str, session: str) -> float:
    start = time.perf_counter()
    body = {"data": ["hello"], "fn_index": 0, "session_hash": session}
    async with http.post(f"{url}/gradio_api/queue/join", json=body) as resp:
        resp.raise_for_status()
        await resp.read()
    async with http.get(f"{url}/gradio_api/queue/data", params={"session_hash": session}) as resp:
        async for line in resp.content:
            if line.startswith(b'data: {"msg":"close_stream"'):
                break
    return time.perf_counter() - start


async def _client(http: aiohttp.ClientSession, url: str, until: float, out: list[float]) -> None:
    session = uuid.uuid4().hex
    while time.perf_counter() < until:
        out.append(await _one(http, url, session))


async def measure(url: str, clients: int, seconds: float) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        await _one(http, url, "warmup")
        latencies: list[float] = []
        start = time.perf_counter()
        await asyncio.gather(*(_client(http, url, start + seconds, latencies) for _ in range(clients)))
        elapsed = time.perf_counter() - start
    qs = statistics.quantiles(latencies, n=100)
    return {"clients": clients, "jobs": len(latencies), "jobs_per_s": len(latencies) / elapsed,
            "p50_ms": qs[49] * 1000, "p99_ms": qs[98] * 1000}


def _measure_in_process(args: tuple[str, int, float]) -> dict[str, Any]:
    return asyncio.run(measure(*args))


def measure_procs(url: str, clients: int, seconds: float, procs: int) -> dict[str, Any]:
    """Split `clients` over `procs` client processes (one Python client process saturates early)."""
    if procs <= 1:
        return asyncio.run(measure(url, clients, seconds))
    import multiprocessing

    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        parts = pool.map(_measure_in_process, [(url, n, seconds) for n in shares if n])
    return {"clients": clients, "jobs": sum(p["jobs"] for p in parts),
            "jobs_per_s": sum(p["jobs_per_s"] for p in parts),
            "p50_ms": statistics.median(p["p50_ms"] for p in parts),
            "p99_ms": max(p["p99_ms"] for p in parts)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--url", default=None)
    p.add_argument("--procs", type=int, default=1, help="client processes")
    args = p.parse_args()
    ctx = nullcontext(None) if args.url else serve_in_thread(load_preset("echo"))
    with ctx as server:
        url = args.url or server.url  # type: ignore[union-attr]
        for n in args.clients:
            r = measure_procs(url, n, args.seconds, args.procs)
            print(f"clients={r['clients']:3d} jobs={r['jobs']:6d} jobs/s={r['jobs_per_s']:8.1f} "
                  f"p50={r['p50_ms']:.2f} ms p99={r['p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
