"""GPU serving: the share of a model's offline throughput the reference server serves over Gradio's protocol.

For each preset (image: ViT classifier; text: BERT classifier) and dtype, with one max_batch_size B:

    forward it/s      B / one forward pass on ready model inputs (captured from a real batch)
    +prep it/s        B / (decode + preprocess B requests on worker threads, then run_batch): the
                      same model and preprocessing as the server, without HTTP, queue or SSE
    served it/s       qbench (closed loop, --users, default 4*B, Gradio protocol: upload + join +
                      SSE) against `python -m reference_server` on the same device, --duration s
    GPU busy          mean NVML utilisation over the served window, from the server's /status
                      (absent on a CPU or without NVML: "-")
    efficiency        served / +prep (the issue's goal: >= 0.70 on one H100 with GPU busy >= 0.60);
                      served/fwd is also printed

Offline figures are medians of at least --repeats batches (and --min-timed s of them) after 2 warm-ups,
taken before and after the served runs and averaged; `drift` = after / before (+prep) shows a host
whose load changed meanwhile (on a shared machine, distrust rows with drift far from 1).
Images are qbench's photo-like 224x224 JPEGs (~13 KiB); texts 8-40 words. `--gradio` adds a row per
preset and dtype for the same workload inside a real Gradio 6 app (gr.Interface, batch=True,
max_batch_size=B), served the same way.

    .venv/bin/python bench/gpu_serving.py --device cuda                 # base size, B 32, 30 s windows
    .venv/bin/python bench/gpu_serving.py --device cpu --quick          # size small, B 8, 8 s windows
    .venv/bin/python bench/gpu_serving.py --presets image --dtypes bfloat16 --batch-size 64 --gradio

Exits non-zero naming what is missing: CUDA for --device cuda, gradio for --gradio.
"""

from __future__ import annotations

import argparse
import base64
import functools
import gc
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qbench.run.control import read_status  # noqa: E402
from qbench.run.scenario.input_specs import ImageSpec  # noqa: E402
from qbench.run.scenario.payloads import gen_image  # noqa: E402
from reference_server.io.components import FileStore, preprocess  # noqa: E402
from reference_server.settings import load_settings, preset_path  # noqa: E402
from reference_server.workloads.base import Workload  # noqa: E402
from reference_server.workloads.registry import build_workload  # noqa: E402

PRESETS = {"image": "classify", "text": "classify"}  # preset -> the batched function measured
MAX_REPEATS = 500
WORDS = ("the queue was short and the answer came back quickly while the model batched eight requests "
         "under load every user waited a little but the server kept the accelerator busy").split()


@dataclass(frozen=True)
class Options:
    device: str
    presets: list[str]
    dtypes: list[str]
    size: str
    batch_size: int
    users: int
    duration_s: float
    warmup_s: float
    repeats: int
    min_timed_s: float  # fast batches repeat for this long at least: a median robust to a busy host
    gradio: bool
    json_out: Path | None
    baseline_dir: Path | None = None  # another checkout of the project: its server gets a row too
    offline: bool = True  # measure forward/+prep offline (off: served rows only)
    front_ends: list[int] | None = None  # one reference row per launch.front_ends value (None: auto)
    requests: int | None = None  # a served run stops after this many requests (no warm-up; duration: a cap)
    variants: int = 64  # distinct inputs a served run sends (generated before it starts)


@dataclass
class Row:
    server: str  # reference | gradio
    preset: str
    dtype: str
    batch: int
    forward_ips: float | None = None
    prep_ips: float | None = None
    served_ips: float | None = None
    gpu_busy: float | None = None
    errors: int = 0
    drift: float | None = None  # offline +prep after the served runs / before them

    @property
    def efficiency(self) -> float | None:
        return self.served_ips / self.prep_ips if self.served_ips and self.prep_ips else None

    @property
    def of_forward(self) -> float | None:
        return self.served_ips / self.forward_ips if self.served_ips and self.forward_ips else None


# ---------------------------------------------------------------- inputs
def image_payloads(count: int) -> list[bytes]:
    spec = ImageSpec(width=224, height=224, format="jpeg", content="photo", quality=85)
    return [gen_image(spec, np.random.default_rng([1, i]), str(i)).data for i in range(count)]


def text_payloads(count: int) -> list[str]:
    rng = np.random.default_rng(1)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 41)))) for _ in range(count)]


def wire_values(preset: str, count: int) -> list[Any]:
    """What a client sends: a data: URL per image (decoded by the server's own preprocess), or text."""
    if preset == "image":
        return [f"data:image/jpeg;base64,{base64.b64encode(b).decode()}" for b in image_payloads(count)]
    return list(text_payloads(count))


# ---------------------------------------------------------------- offline
def function_params(preset: str, opts: Options, dtype: str) -> tuple[str, dict[str, Any]]:
    fn = next(f for f in load_settings(preset_path(preset)).functions if f.api_name == PRESETS[preset])
    return fn.workload, {**fn.params, "size": opts.size, "dtype": dtype}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def median_rate(call: Callable[[], object], items: int, repeats: int, device: str, min_s: float) -> float:
    for _ in range(2):
        call()
    times: list[float] = []
    deadline = time.perf_counter() + min_s
    while len(times) < repeats or (time.perf_counter() < deadline and len(times) < MAX_REPEATS):
        sync(device)
        start = time.perf_counter()
        call()
        sync(device)
        times.append(time.perf_counter() - start)
    return items / statistics.median(times)


def captured_forward(workload: Workload, columns: list[list[Any]]) -> Callable[[], object]:
    """A call of the model's forward pass on the exact inputs one run_batch gave it."""
    import torch

    model: torch.nn.Module = workload.model  # type: ignore[attr-defined]
    seen: dict[str, Any] = {}

    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.update(kwargs)

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        workload.run_batch(columns)
    finally:
        handle.remove()

    def forward() -> object:
        with torch.inference_mode():
            return model(**seen)

    return forward


def offline(preset: str, dtype: str, opts: Options, store: FileStore) -> tuple[float, float, str]:
    """(forward it/s, +prep it/s, the resolved dtype) of the preset's workload at batch B."""
    kind, params = function_params(preset, opts, dtype)
    workload = build_workload(kind, params)
    collecting = gc.isenabled()
    gc.disable()  # the first load imports torch + transformers: ~0.45 s less CPU without collections
    try:
        workload.load(opts.device)
        workload.warmup()
    finally:
        if collecting:
            gc.enable()
    comps = workload.inputs
    values = wire_values(preset, opts.batch_size)
    pool = ThreadPoolExecutor(max_workers=min(opts.batch_size, os.cpu_count() or 1))

    def prepared(value: Any) -> Any:
        return workload.prepare_row([preprocess(comps[0], value, store)])[0]

    def with_prep() -> object:
        return workload.run_batch([list(pool.map(prepared, values))])

    forward = captured_forward(workload, [list(pool.map(prepared, values))])
    try:
        rates = (median_rate(forward, opts.batch_size, opts.repeats, opts.device, opts.min_timed_s),
                 median_rate(with_prep, opts.batch_size, opts.repeats, opts.device, opts.min_timed_s))
    finally:
        pool.shutdown()
    return rates[0], rates[1], str(workload.describe().get("dtype", dtype))


# ---------------------------------------------------------------- served
def server_settings(preset: str, dtype: str, opts: Options, front_ends: int | None = None) -> dict[str, Any]:
    kind, params = function_params(preset, opts, dtype)
    function = {"api_name": PRESETS[preset], "workload": kind, "params": params, "batch": True,
                "max_batch_size": opts.batch_size, "concurrency_limit": 1}
    launch: dict[str, Any] = {"max_threads": 40}
    if front_ends is not None:
        launch["front_ends"] = front_ends
    return {"functions": [function], "device": opts.device, "launch": launch}


def scenario(preset: str, url: str, opts: Options) -> dict[str, Any]:
    inputs = ([{"image": {"width": 224, "height": 224, "format": "jpeg"}}] if preset == "image"
              else [{"text": {"words": [8, 40]}}])
    return {
        "name": f"gpu-serving-{preset}", "target": url, "protocol": "gradio",
        "endpoint": {"api_name": PRESETS[preset]},
        "payload": {"seed": 1, "variants": opts.variants, "inputs": inputs},
        "load": {"users": opts.users, "duration": opts.duration_s, "warmup": opts.warmup_s, "timeout": 120,
                 # one generator process caps near ~900 req/s (34% of a core at 300/s on the H100 box)
                 "processes": min(4, max(1, (os.cpu_count() or 1) // 4)),
                 **({"requests": opts.requests} if opts.requests else {})},
    }


def gpu_integrals(url: str) -> tuple[float, float] | None:
    """(busy_s, sampled_s) summed over the server's GPUs, or None when it reports no GPU."""
    status = read_status(url, timeout_s=30)
    gpus = status.get("gpu") if status else None  # Gradio has no /status
    if not gpus:
        return None
    return sum(g["busy_s"] for g in gpus), sum(g["sampled_s"] for g in gpus)


def qbench_run(scenario_path: Path, out: Path) -> tuple[int, str]:
    """`qbench run SCENARIO --out OUT` as a process (qbench's starter: in the test suite's dry runs a fork
    of its preloaded interpreter); its exit status and output."""
    from qbench.tune.servers.server_process import spawn, stop_process_group

    log = out.with_name(out.name + ".log")
    argv = [sys.executable, "-m", "qbench", "run", str(scenario_path), "--out", str(out), "--no-live"]
    process = spawn(argv, env=None, log_path=log, cwd=ROOT)
    try:
        code = process.wait()
    finally:
        stop_process_group(process)  # interrupted: the run (its own process group) stops with this one
    return code, log.read_text(errors="replace")


def served(url: str, preset: str, opts: Options, workdir: Path) -> tuple[float, float | None, int]:
    """(served it/s, GPU busy share or None, error count) of one closed-loop qbench run."""
    path = workdir / f"scenario-{preset}.yaml"
    path.write_text(yaml.safe_dump(scenario(preset, url, opts)))
    out = workdir / f"run-{preset}-{time.time_ns()}"
    before = gpu_integrals(url)
    code, log = qbench_run(path, out)
    after = gpu_integrals(url)
    summary_path = out / "summary.json"
    if not summary_path.exists():
        raise SystemExit(f"error: qbench run failed (exit {code}):\n{log[-2000:]}")
    summary = json.loads(summary_path.read_text())
    gen = summary.get("generator") or {}
    lag = (summary.get("latency") or {}).get("send_lag_s") or {}
    print(f"    generator: {gen.get('processes', 1)} process(es), CPU {gen.get('cpu_percent') or 0:.0f}% "
          f"(100 = a core), loop lag p99 {1000 * (gen.get('p99_loop_lag_s') or 0):.1f} ms, send lag p99 "
          f"{1000 * (lag.get('p99') or 0):.1f} ms", flush=True)
    busy = None
    if before and after and after[1] > before[1]:
        busy = (after[0] - before[0]) / (after[1] - before[1])
    return float(summary["throughput_rps"]), busy, int(summary["errors"])


@contextmanager
def reference(preset: str, dtype: str, opts: Options, front_ends: int | None = None) -> Iterator[str]:
    from qbench.tune.servers.server_process import start_reference_server

    settings = server_settings(preset, dtype, opts, front_ends)
    with start_reference_server(settings, ready_timeout_s=900) as url:
        yield url


def reference_servers(opts: Options) -> list[tuple[str, Callable[..., Any]]]:
    """("reference", its starter), or one row per --front-ends value ("ref fe4": launch.front_ends 4)."""
    if opts.front_ends is None:
        return [("reference", reference)]
    return [(f"ref fe{n}", functools.partial(reference, front_ends=n)) for n in opts.front_ends]


@contextmanager
def gradio_app(preset: str, dtype: str, opts: Options) -> Iterator[str]:
    """The same workload inside a real Gradio app, in a child process (this file, --serve-gradio)."""
    spec = json.dumps({"preset": preset, "dtype": dtype, "size": opts.size, "batch": opts.batch_size,
                       "device": opts.device})
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": python_path(ROOT)}
    proc = subprocess.Popen([sys.executable, __file__, "--serve-gradio", spec], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            if line.startswith("READY "):
                yield line.split()[1]
                return
            lines.append(line)
        tail = "".join(lines[-30:])
        raise SystemExit(f"error: the Gradio app exited ({proc.wait()}) before it was ready:\n{tail}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def python_path(tree: Path) -> str:
    """`tree` first on PYTHONPATH, the rest kept (on the GPU machine the carried wheels live there)."""
    return os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)


@contextmanager
def baseline(preset: str, dtype: str, opts: Options) -> Iterator[str]:
    """The same settings served by the reference server of another checkout (--baseline-dir)."""
    assert opts.baseline_dir is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(server_settings(preset, dtype, opts), f)
    env = {**os.environ, "PYTHONPATH": python_path(opts.baseline_dir)}
    argv = [sys.executable, "-m", "reference_server", "--config", f.name, "--port", str(port)]
    log = open(f"{f.name}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, cwd=opts.baseline_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while read_status(url, timeout_s=2) is None or not read_status(url, timeout_s=2).get("ready"):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = Path(f"{f.name}.log").read_text()[-3000:]
                raise SystemExit(f"error: the baseline server ({opts.baseline_dir}) did not start:\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def serve_gradio(spec_json: str) -> None:
    import gradio as gr

    spec = json.loads(spec_json)
    opts = Options(spec["device"], [], [], spec["size"], spec["batch"], 0, 0, 0, 0, 0, False, None)
    kind, params = function_params(spec["preset"], opts, spec["dtype"])
    workload = build_workload(kind, params)
    workload.load(spec["device"])
    workload.warmup()

    def classify(values: list[Any]) -> list[list[dict[str, float]]]:
        rows = [workload.prepare_row([v])[0] for v in values]
        labels = workload.run_batch([rows])[0]
        return [[{c["label"]: c["confidence"] for c in label["confidences"]} for label in labels]]

    component = gr.Image(type="pil") if spec["preset"] == "image" else gr.Textbox()
    demo = gr.Interface(classify, component, gr.Label(), batch=True, max_batch_size=spec["batch"],
                        concurrency_limit=1, api_name=PRESETS[spec["preset"]])
    demo.queue(default_concurrency_limit=1)
    with socket.socket() as probe:  # Gradio checks its own URL after start, so port 0 will not do
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    print(f"READY {url.rstrip('/')}", flush=True)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- main
def measure(opts: Options) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu-serving-") as tmp:
        workdir, store = Path(tmp), FileStore(Path(tmp) / "store")
        for preset in opts.presets:
            for dtype in opts.dtypes:
                rows.extend(measure_one(preset, dtype, opts, workdir, store))
    return rows


def timed_offline(preset: str, dtype: str, opts: Options, store: FileStore) -> tuple[float, float, str]:
    rates = offline(preset, dtype, opts, store)
    free_cuda(opts.device)  # the offline model is freed before a server loads its own
    print(f"{preset} {rates[2]}: offline forward {rates[0]:.1f}/s, +prep {rates[1]:.1f}/s", flush=True)
    return rates


def measure_one(preset: str, dtype: str, opts: Options, workdir: Path, store: FileStore) -> list[Row]:
    """Offline, then each server, then offline again: the offline figures are the means of the two
    (`drift` is after / before of +prep: far from 1, the host's load changed during the measurement)."""
    before = timed_offline(preset, dtype, opts, store) if opts.offline else None
    servers = reference_servers(opts)
    if opts.baseline_dir is not None:
        servers.append(("baseline", baseline))
    if opts.gradio:
        servers.append(("gradio 6", gradio_app))
    rows = []
    for name, start in servers:
        with start(preset, dtype, opts) as url:
            ips, busy, errors = served(url, preset, opts, workdir)
        resolved = before[2] if before else dtype
        rows.append(Row(name, preset, resolved, opts.batch_size, served_ips=ips, gpu_busy=busy,
                        errors=errors))
        note = f", {errors} errors" if errors else ""
        busy_note = f", GPU busy {busy:.0%}" if busy is not None else ""
        print(f"  {name}: served {ips:.1f}/s{busy_note}{note}", flush=True)
    if before is None:
        return rows
    after = timed_offline(preset, dtype, opts, store)
    for row in rows:
        row.forward_ips, row.prep_ips = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
        row.drift = after[1] / before[1]
    return rows


def free_cuda(device: str) -> None:
    if device.startswith("cuda"):
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[Row], opts: Options) -> str:
    head = (f"{'server':10s} {'preset':6s} {'dtype':9s} {'B':>3s} {'forward/s':>10s} {'+prep/s':>9s} "
            f"{'served/s':>9s} {'GPU busy':>8s} {'eff':>5s} {'of fwd':>6s} {'drift':>5s}")
    window = f"{opts.requests} requests a run" if opts.requests else f"{opts.duration_s:g} s windows"
    lines = [f"device {opts.device}, size {opts.size}, {opts.users} users, {window}, "
             f"{os.cpu_count()} CPU cores", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.server:10s} {r.preset:6s} {r.dtype:9s} {r.batch:3d} {fmt(r.forward_ips, '10.1f')} "
            f"{fmt(r.prep_ips, '9.1f')} {fmt(r.served_ips, '9.1f')} {fmt(r.gpu_busy, '8.0%')} "
            f"{fmt(r.efficiency, '5.2f')} {fmt(r.of_forward, '6.2f')} {fmt(r.drift, '5.2f')}"
            + (f"  ({r.errors} errors)" if r.errors else "")
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    p.add_argument("--quick", action="store_true", help="size small, B 8, 8 s windows, 3 repeats")
    p.add_argument("--presets", default="image,text", help="comma list of image, text")
    p.add_argument("--dtypes", default="float32,bfloat16", help="comma list of float32, bfloat16, auto")
    p.add_argument("--size", choices=["base", "small", "tiny"], help="model size (default base; quick small)")
    p.add_argument("--batch-size", type=int, help="max_batch_size B (default 32; quick 8)")
    p.add_argument("--users", type=int, help="closed-loop qbench users (default 4*B)")
    p.add_argument("--duration", type=float, help="served window in s (default 30; quick 8)")
    p.add_argument("--requests", type=int,
                   help="end each served run after this many requests, no warm-up (--duration: its cap)")
    p.add_argument("--variants", type=int, default=64, help="distinct inputs a served run sends (default 64)")
    p.add_argument("--repeats", type=int, help="offline batches timed (default 10; quick 3)")
    p.add_argument("--min-timed", type=float, default=2.0, help="offline timing lasts at least this long (s)")
    p.add_argument("--gradio", action="store_true", help="add a real Gradio 6 row per preset and dtype")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.add_argument("--baseline-dir", type=Path,
                   help="another checkout of the project (e.g. an older commit): its server gets a row too")
    p.add_argument("--no-offline", action="store_true", help="served rows only (no forward/+prep figures)")
    p.add_argument("--front-ends", help="comma list of launch.front_ends values: one reference row each "
                                        "(default: one row, the settings' auto)")
    a = p.parse_args(argv)
    presets, dtypes = a.presets.split(","), a.dtypes.split(",")
    if set(presets) - set(PRESETS):
        p.error(f"--presets: expected a comma list of {', '.join(PRESETS)}; got {a.presets!r}")
    if set(dtypes) - {"float32", "bfloat16", "float16", "auto"}:
        p.error(f"--dtypes: expected a comma list of float32, bfloat16, float16, auto; got {a.dtypes!r}")
    batch = a.batch_size or (8 if a.quick else 32)
    duration = a.duration or (8.0 if a.quick else 30.0)
    if batch < 1:
        p.error(f"--batch-size: expected an integer >= 1, got {batch}")
    for name, value in (("--requests", a.requests), ("--variants", a.variants)):
        if value is not None and value < 1:
            p.error(f"{name}: expected an integer >= 1, got {value}")
    return Options(
        device=a.device or default_device(), presets=presets, dtypes=dtypes,
        size=a.size or ("small" if a.quick else "base"), batch_size=batch, users=a.users or 4 * batch,
        duration_s=duration, warmup_s=0.0 if a.requests else min(2.0 if a.quick else 5.0, duration / 4),
        repeats=a.repeats or (3 if a.quick else 10), min_timed_s=a.min_timed, gradio=a.gradio,
        json_out=a.json, baseline_dir=a.baseline_dir, offline=not a.no_offline,
        front_ends=front_ends_list(p, a.front_ends), requests=a.requests, variants=a.variants,
    )


def front_ends_list(p: argparse.ArgumentParser, raw: str | None) -> list[int] | None:
    if raw is None:
        return None
    try:
        values = [int(v) for v in raw.split(",")]
    except ValueError:
        values = [-1]
    if any(v < 0 for v in values):
        p.error(f"--front-ends: expected a comma list of integers >= 0, got {raw!r}")
    return values


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def require(opts: Options) -> None:
    """Exit non-zero, naming what is missing, before anything starts."""
    import torch

    if opts.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"error: --device cuda, but CUDA is not available to torch {torch.__version__} "
                         "on this machine; run with --device cpu, or install a CUDA build of torch")
    if opts.gradio and importlib.util.find_spec("gradio") is None:
        raise SystemExit("error: --gradio compares with a real Gradio 6 app, but gradio is not installed; "
                         "pip install 'gradio>=6' (or pip install -e '.[test]'), or leave out --gradio")


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    require(opts)
    rows = measure(opts)
    print(table(rows, opts))
    if opts.json_out is not None:
        records = [{**vars(r), "efficiency": r.efficiency} for r in rows]
        opts.json_out.write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-gradio":
        serve_gradio(sys.argv[2])
    else:
        sys.exit(main())
