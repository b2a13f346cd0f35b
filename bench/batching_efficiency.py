"""Batching efficiency: served throughput of a batched model vs its offline batched calls.

For each model and each max_batch_size B, the reference server (in-process, `serve_in_thread`)
serves one function with batch=True, max_batch_size=B, concurrency_limit=1. A saturating burst of
N = k*B requests (aiohttp: upload, queue/join, SSE per request) is sent at once, after an unmeasured
warm-up burst. A spy on the workload's run_batch records the batch sizes the queue realised.
Then, on the same loaded model with the server idle, each realised batch size is timed offline
(`run_batch` on the same Python values: preprocessing + one forward pass; median of --repeats).

    served items/s      N / (last completion - first send)
    offline@B items/s   B / offline time of one batch of B
    offline-equivalent  N / sum(offline time of each realised batch)   (same batch sizes as served)
    efficiency          served / offline-equivalent      (target >= 0.90)

The gap is the server's own cost: HTTP, upload and image/WAV decoding, queue dispatch, postprocessing,
SSE. Gradio batches greedily without waiting, so the first batch of a burst is small; the realised
mean batch size is printed. The load generator shares this 2-core machine (and the other engineers'
jobs): numbers are noisy, compare the ratios within one run.

Usage:
    .venv/bin/python bench/batching_efficiency.py          # quick: size small, B in 1 4 16 (~3 min)
    .venv/bin/python bench/batching_efficiency.py --full   # size base, B in 1 2 4 8 16 (~15 min)
    .venv/bin/python bench/batching_efficiency.py --models image --size base --batch-sizes 1 16
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import time
import uuid
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_server.settings import parse_settings  # noqa: E402
from reference_server.testing import serve_in_thread  # noqa: E402
from reference_server.workloads.base import Workload  # noqa: E402

KINDS = {"image": "image-classification", "text": "text-classification", "embed": "embeddings",
         "audio": "audio-classification"}
TEXT_POOL = [
    "The queue was short and the answer came back quickly.",
    "Batching lets one forward pass answer several requests at once, which matters on a GPU.",
    "Terrible latency.",
    "I waited in line for a long time, but the model's answer was worth it in the end, mostly.",
]


@dataclass(frozen=True)
class Payload:
    value: Any  # what the workload receives (offline)
    upload: bytes | None  # the file a client uploads (image / audio), None for text
    suffix: str = ""


@dataclass
class Row:
    model: str
    max_batch: int
    requests: int
    served_s: float
    batch_sizes: list[int]
    offline_s: dict[int, float]

    def cells(self) -> list[str]:
        offline_at_b = self.max_batch / self.offline_s[self.max_batch]
        served = self.requests / self.served_s
        equivalent = self.requests / sum(self.offline_s[b] for b in self.batch_sizes)
        mean_batch = statistics.fmean(self.batch_sizes)
        return [self.model, str(self.max_batch), str(self.requests), f"{mean_batch:.1f}",
                f"{offline_at_b:.1f}", f"{served:.1f}", f"{equivalent:.1f}", f"{served / equivalent:.2f}"]


HEADER = ["model", "B", "N", "mean batch", "offline@B it/s", "served it/s", "offline-eq it/s", "efficiency"]


def payloads(model: str, count: int) -> list[Payload]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(count):
        if model in ("text", "embed"):
            out.append(Payload(TEXT_POOL[i % len(TEXT_POOL)], None))
        elif model == "image":
            img = Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8))
            buf = io.BytesIO()
            img.save(buf, format="PNG")
            out.append(Payload(img, buf.getvalue(), ".png"))
        else:
            samples = (0.1 * rng.standard_normal(16000)).astype(np.float32)
            pcm = (np.clip(samples, -1, 1) * 32767).astype(np.int16)
            buf = io.BytesIO()
            with wave.open(buf, "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(16000)
                w.writeframes(pcm.tobytes())
            out.append(Payload((16000, pcm.astype(np.float32) / 32768), buf.getvalue(), ".wav"))
    return out


async def wire_values(http: aiohttp.ClientSession, api: str, items: list[Payload]) -> list[Any]:
    """Upload file inputs (before the clock starts); text goes as is."""
    values = []
    for i, item in enumerate(items):
        if item.upload is None:
            values.append(item.value)
            continue
        form = aiohttp.FormData()
        form.add_field("files", item.upload, filename=f"in{i}{item.suffix}")
        async with http.post(f"{api}/upload", data=form) as resp:
            path = (await resp.json())[0]
        values.append({"path": path, "meta": {"_type": "gradio.FileData"}})
    return values


async def one_request(http: aiohttp.ClientSession, api: str, value: Any) -> float:
    """Join the queue, read this session's SSE stream to process_completed; its completion time."""
    session = uuid.uuid4().hex
    body = {"data": [value], "fn_index": 0, "session_hash": session, "event_data": None, "trigger_id": None}
    async with http.post(f"{api}/queue/join", json=body) as resp:
        resp.raise_for_status()
    async with http.get(f"{api}/queue/data", params={"session_hash": session}) as stream:
        async for raw in stream.content:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            msg = orjson.loads(line[5:])
            if msg.get("msg") == "process_completed":
                if not msg.get("success"):
                    raise RuntimeError(f"request failed: {msg.get('output')}")
                return time.perf_counter()
    raise RuntimeError("stream closed before process_completed")


async def burst(url: str, items: list[Payload]) -> float:
    """Send all requests at once; seconds from the first send to the last completion."""
    api = url + "/gradio_api"
    timeout = aiohttp.ClientTimeout(total=1800)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
        values = await wire_values(http, api, items)
        start = time.perf_counter()
        done = await asyncio.gather(*(one_request(http, api, v) for v in values))
    return max(done) - start


def spy_batch_sizes(workload: Workload) -> list[int]:
    sizes: list[int] = []
    real = workload.run_batch

    def recording(columns: list[list[Any]]) -> list[list[Any]]:
        sizes.append(len(columns[0]))
        return real(columns)

    workload.run_batch = recording  # type: ignore[method-assign]
    return sizes


def offline_times(workload: Workload, values: list[Any], sizes: set[int], repeats: int) -> dict[int, float]:
    """Median seconds of one run_batch call per batch size (one unmeasured call first)."""
    times = {}
    for size in sorted(sizes):
        batch = [values[i % len(values)] for i in range(size)]
        workload.run_batch([batch])
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            workload.run_batch([batch])
            samples.append(time.perf_counter() - start)
        times[size] = statistics.median(samples)
    return times


def measure(model: str, size: str, max_batch: int, batches: int, repeats: int) -> Row:
    function = {"api_name": "predict", "workload": KINDS[model], "params": {"size": size},
                "batch": True, "max_batch_size": max_batch, "concurrency_limit": 1}
    settings = parse_settings({"functions": [function], "device": "cpu"}, "<batching_efficiency>")
    items = payloads(model, max(batches * max_batch, 8))
    with serve_in_thread(settings, startup_timeout_s=300) as server:
        workload = server.state.functions[0].workload
        sizes = spy_batch_sizes(workload)
        asyncio.run(burst(server.url, items[: 2 * max_batch]))  # warm-up: not measured
        sizes.clear()
        served_s = asyncio.run(burst(server.url, items))
        realised = list(sizes)
        offline = offline_times(workload, [p.value for p in items], {*realised, max_batch}, repeats)
    return Row(model, max_batch, len(items), served_s, realised, offline)


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    for row in [HEADER, *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="size base, batch sizes 1 2 4 8 16")
    parser.add_argument("--models", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    parser.add_argument("--size", choices=["base", "small", "tiny"], help="model size (quick: small)")
    parser.add_argument("--batch-sizes", nargs="+", type=int, help="max_batch_size values (quick: 1 4 16)")
    parser.add_argument("--batches", type=int, default=4, help="burst size in full batches (N = k*B)")
    parser.add_argument("--repeats", type=int, default=3, help="offline timings per batch size")
    args = parser.parse_args()
    size = args.size or ("base" if args.full else "small")
    batch_sizes = args.batch_sizes or ([1, 2, 4, 8, 16] if args.full else [1, 4, 16])
    print(f"model size {size}; batch sizes {batch_sizes}; burst {args.batches} x B requests; CPU", flush=True)
    rows = []
    for model in args.models:
        for max_batch in batch_sizes:
            rows.append(measure(model, size, max_batch, args.batches, args.repeats).cells())
            print(f"  done {model} B={max_batch}: efficiency {rows[-1][-1]}", file=sys.stderr, flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
