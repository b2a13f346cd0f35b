"""Device-side work of the image model, offline (no server): decode on the host vs on the device, and the
forward pass eager vs over CUDA-graph buckets, at the same batch sizes.

    decode  JPEGs (scenarios/image.yaml's: photo-like 224x224, q85) -> the model's pixel_values on the
            device, per batch of B, two ways:
              cpu     the decode workers (reference_server/io/decode_pool.py, `--workers` processes)
                      decode every JPEG in parallel, the batch is stacked and copied (what serves today)
              device  the workers only check each JPEG's header and return its bytes; the batch is
                      decoded on the device in one call (models/jpeg.py: nvJPEG through torchvision)
            img/s is B / the median wall time of one batch, from the bytes to pixel_values on the device
    forward the image-classification workload's forward pass on the batch, eager vs `cuda_graphs`
            (models/graphs.py), at B and at B - 1 (a padded bucket); img/s from the median of
            `--repeats` timed batches after warm-up

    python bench/device_work.py --device cuda                    # ViT-B/16, bfloat16, B 8 32 64
    python bench/device_work.py --device cpu --size tiny --quick # the CPU check (tests/test_bench.py)

Prints one line per measurement (`decode cpu B 32: ...`, `forward graphs B 31: ...`) and writes them to
`--json`. Without torchvision the device decode runs with PIL on a CPU and is skipped on CUDA (said so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reference_server.io.decode_pool import DecodePool, PixelPrep, decode_image, worker_count  # noqa: E402
from reference_server.workloads import build_workload  # noqa: E402
from reference_server.workloads.models.jpeg import JpegDecoder, torchvision_error  # noqa: E402
from reference_server.workloads.models.pixels import Pixels, pixel_batch  # noqa: E402
from reference_server.workloads.models.vision import ImageClassification  # noqa: E402


def jpegs(count: int) -> list[bytes]:
    """`count` distinct JPEGs as the image scenario sends them."""
    import numpy as np

    from qbench.run.scenario.input_specs import ImageSpec
    from qbench.run.scenario.payloads import gen_image

    spec = ImageSpec(width=224, height=224, format="jpeg")
    rng = np.random.default_rng(1)
    return [gen_image(spec, rng, str(i)).data for i in range(count)]


def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_s(run: Callable[[], object], repeats: int, device: Any) -> float:
    run()  # warm-up
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


LOOP = asyncio.new_event_loop()  # one loop for every call: the pool's sockets are connected on it


def decode_rows(pool: DecodePool, raws: list[bytes], prep: PixelPrep) -> list[Pixels]:
    """What the workers return for `raws`, all in flight at once (as a batch's uploads are)."""
    async def all_rows() -> list[Any]:
        return list(await asyncio.gather(*(pool.run(decode_image, raw, "image", prep) for raw in raws)))

    return [Pixels(decoded.array) for decoded in LOOP.run_until_complete(all_rows())]


def measure_decode(workload: ImageClassification, pool: DecodePool, raws: list[bytes], batch: int,
                   repeats: int) -> list[dict[str, Any]]:
    spec, device, dtype = workload._spec, workload.device, workload.dtype
    assert spec is not None
    host_prep = PixelPrep(None if device.type == "cuda" else (spec.width, spec.height), spec.resample)
    rows: list[dict[str, Any]] = []
    chunk = raws[:batch]

    def cpu() -> object:
        return pixel_batch(decode_rows(pool, chunk, host_prep), spec, device, dtype)

    rows.append({"part": "decode", "way": "cpu", "batch": batch, "s": median_s(cpu, repeats, device)})
    problem = torchvision_error()
    if problem is not None and device.type == "cuda":
        print(f"decode device B {batch}: skipped ({problem})", flush=True)
        return rows
    decoder = JpegDecoder(device)
    encoded = PixelPrep(None, spec.resample, encoded=True)

    def on_device() -> object:
        return pixel_batch(decode_rows(pool, chunk, encoded), spec, device, dtype, decoder=decoder)

    rows.append({"part": "decode", "way": "device", "batch": batch, "s": median_s(on_device, repeats, device),
                 "decoder": decoder.name})
    return rows


def measure_forward(eager: ImageClassification, graphed: ImageClassification, batch: int,
                    repeats: int) -> list[dict[str, Any]]:
    import torch

    assert graphed._buckets is not None
    rows = []
    side = int(getattr(eager.config, "image_size", 224))
    for size in sorted({batch, max(1, batch - 1)}):
        x = torch.randn(size, 3, side, side, device=eager.device, dtype=eager.dtype)
        with torch.inference_mode():
            for way, forward in (("eager", eager._forward), ("graphs", graphed._buckets)):
                rows.append({"part": "forward", "way": way, "batch": size,
                             "s": median_s(lambda f=forward, x=x: f(x), repeats, eager.device)})
    return rows


def line(row: dict[str, Any]) -> str:
    rate = row["batch"] / row["s"]
    extra = f" ({row['decoder']})" if "decoder" in row else ""
    what = f"{row['part']} {row['way']:6} B {row['batch']:3}"
    return f"{what}: {rate:8.1f} img/s, {row['s'] * 1000:7.2f} ms a batch{extra}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="base", help="image-classification size (tiny for the CPU check)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--batch-sizes", default="8,32,64")
    p.add_argument("--workers", default="auto", help="decode worker processes (auto: as the server picks)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="B 4, 3 repeats: the CPU check")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    sizes = [4] if a.quick else [int(b) for b in a.batch_sizes.split(",")]
    repeats = 3 if a.quick else a.repeats
    params: dict[str, Any] = {"size": a.size, "dtype": a.dtype}
    if a.quick:
        params["threads"] = 1  # a 2-core box shared with other work: two intra-op threads stall
    eager = build_workload("image-classification", params)
    graphed = build_workload("image-classification", {**params, "cuda_graphs": max(sizes)})
    assert isinstance(eager, ImageClassification) and isinstance(graphed, ImageClassification)
    for workload in (eager, graphed):
        workload.load(a.device)
        workload.warmup()
    workers = worker_count(a.workers if a.workers == "auto" else int(a.workers), "cuda") or 1
    print(f"device {eager.device}, dtype {eager.dtype}, {workers} decode workers, "
          f"graphs: {graphed.describe().get('cuda_graphs')}", flush=True)
    pool = DecodePool(workers)
    pool.start()
    rows: list[dict[str, Any]] = []
    try:
        raws = jpegs(max(sizes))
        for batch in sizes:
            for row in measure_decode(eager, pool, raws, batch, repeats) + measure_forward(
                    eager, graphed, batch, repeats):
                print(line(row), flush=True)
                rows.append(row)
    finally:
        pool.close()
        LOOP.run_until_complete(asyncio.sleep(0))  # let the cancelled reader tasks finish
        LOOP.close()
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
