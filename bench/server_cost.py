"""What a GPU server spends per image request outside its model, measured on the CPU stand-in.

The `image-ideal` workload (reference_server/workloads/ideal.py) keeps the image preset's request
path (upload, file read, decode, uint8 array, host staging of the batch) and replaces the device's
work with a GIL-free wait of a known length (5 ms per batch). Whatever a server spends beyond it is
its own cost. Served side by side, in one run, under the same closed-loop qbench load:

    baseline   the reference server at --baseline (a git ref; default: the commit that added the
               stand-in, before the per-request work left the main process), from a git worktree
    current    the reference server of this checkout, its HTTP in its own event loop (front_ends 0)
    fronts     the same with `launch.front_ends` HTTP front-end processes before its queue (--front-ends)
    gradio     a real Gradio 6 app (gr.Interface, batch=True, same max_batch_size) around the same
               stand-in, started with GRADIO_PROFILING=1

For each, over the whole qbench run (requests counted from its records, warm-up included):

    served/s     requests completed per second in the measured window (qbench's throughput)
    main ms      CPU time of the server's main process (every thread: event loop, workers) per request
    loop ms      CPU time of its main thread (the event loop) per request (not for Gradio, whose
                 event loop runs in a thread of its own)
    others ms    CPU time of its child processes (decode workers, front ends) per request
    total ms     main + others per request
    gen %        the qbench generator's CPU (100 = one core): near 100, the client is the limit

then the server's own phase medians (ms) from /gradio_api/profiling/summary: queue wait, preprocess
(read + decode), prepare, the batch call, its forward (the wait), postprocess, upload. Repeats give
medians. On a 2-core box the generator and the server share the cores: compare the CPU per request
(what the change is about), not the served rate.

    .venv/bin/python bench/server_cost.py                       # 3 repeats, 64 users, 12 s
    .venv/bin/python bench/server_cost.py --quick               # 1 repeat, 16 users, 4 s
    .venv/bin/python bench/server_cost.py --quick --requests 32 --duration 120   # each run 32 requests
    .venv/bin/python bench/server_cost.py --servers current,gradio --baseline HEAD~3
    .venv/bin/python bench/server_cost.py --servers baseline,fronts --baseline 59caf60 \
        --baseline-front-ends 1 --front-ends 1 --decode-workers 1 --interleave --quick --repeats 5

Exits non-zero when a server it needs cannot start (gradio not installed, a bad --baseline ref).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("baseline", "current", "fronts", "gradio")
DEFAULT_BASELINE = "a96e28a"  # the stand-in's own commit: every later change to the request path shows
PHASES = ("queue_wait", "preprocess", "prepare", "fn_call", "forward", "postprocess")


@dataclass(frozen=True)
class Options:
    servers: list[str]
    baseline: str
    users: int
    duration_s: float
    warmup_s: float
    repeats: int
    batch: int
    batch_ms: float
    decode_workers: int
    json_out: Path | None
    front_ends: int = 2
    baseline_dir: Path | None = None  # a checkout of the baseline already on disk (no git worktree)
    baseline_front_ends: int | None = None  # the baseline with decode workers and these front ends
    interleave: bool = False  # all servers up at once, measured in turn (repeat 1 of each, then 2, ...)
    requests: int | None = None  # a run stops after this many requests (no warm-up; duration: its cap)
    variants: int = 64  # distinct images a run sends (generated before it starts)


@dataclass
class Sample:
    served_rps: float
    requests: int
    main_cpu_s: float
    loop_cpu_s: float | None
    others_cpu_s: float
    generator_cpu_percent: float | None
    phases_ms: dict[str, float] = field(default_factory=dict)

    def per_request_ms(self, cpu_s: float | None) -> float | None:
        return None if cpu_s is None or not self.requests else cpu_s / self.requests * 1000


# ---------------------------------------------------------------- servers
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def settings_yaml(opts: Options, folder: Path, name: str) -> Path:
    function = {"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": opts.batch_ms},
                "batch": True, "max_batch_size": opts.batch, "concurrency_limit": 1}
    launch: dict[str, Any] = {"max_threads": 40}
    if name != "baseline" or opts.baseline_front_ends is not None:  # the stand-in's commit has no such keys
        launch["decode_workers"] = opts.decode_workers
        fronts = opts.front_ends if name == "fronts" else 0
        launch["front_ends"] = opts.baseline_front_ends if name == "baseline" else fronts
    path = folder / f"server-{name}.yaml"
    path.write_text(yaml.safe_dump({"functions": [function], "device": "cpu", "launch": launch}))
    return path


def wait_ready(url: str, proc: subprocess.Popen[str], path: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"error: the server at {url} exited ({proc.returncode}) before it was ready")
        try:
            if httpx.get(url + path, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"error: the server at {url} was not ready after {timeout_s:.0f} s")


def announced_url(log: Path, proc: subprocess.Popen[str], timeout_s: float = 120) -> str:
    """The URL a reference server started with --port 0 prints once it listens ("reference server ready
    on http://HOST:PORT"): the port its own socket got, never one picked before it started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("reference server ready on http://"):
                return line.split()[4]
        if proc.poll() is not None:
            raise SystemExit(f"error: the server ({log.name}) exited ({proc.returncode}) before it was ready")
        time.sleep(0.2)
    raise SystemExit(f"error: the server ({log.name}) was not ready after {timeout_s:.0f} s")


@contextmanager
def process(argv: list[str], cwd: Path, env: dict[str, str], url: str | None, ready: str,
            log: Path) -> Iterator[tuple[str, int]]:
    """`argv` started in a session of its own, output to `log`; (url, pid) once `url` + `ready` answers
    (url None: the reference server's announced URL, argv having --port 0)."""
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            url = url or announced_url(log, proc)
            wait_ready(url, proc, ready)
            yield url, proc.pid
        finally:
            signal_group(proc, signal.SIGTERM)  # its decode workers and front ends too: none is waited for
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=20)


def signal_group(proc: subprocess.Popen[str], signum: int) -> None:
    """`signum` to the process group `proc` leads (started with start_new_session)."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)


def child_env(tree: Path) -> dict[str, str]:
    """The parent's environment with `tree` first on PYTHONPATH (kept: carried wheels live there)."""
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "GRADIO_ANALYTICS_ENABLED": "False"}


@contextmanager
def baseline_tree(ref: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="server-cost-baseline-"))
    done = subprocess.run(["git", "worktree", "add", "--detach", str(folder), ref], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: --baseline {ref!r}: git worktree add failed: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True)


@contextmanager
def server(name: str, opts: Options, workdir: Path) -> Iterator[tuple[str, int]]:
    log = workdir / f"{name}.log"
    if name == "gradio":  # Gradio checks its own URL as it starts: its port is chosen here
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**child_env(ROOT), "GRADIO_PROFILING": "1"}
        spec = json.dumps({"port": port, "batch": opts.batch, "batch_ms": opts.batch_ms})
        argv = [sys.executable, __file__, "--serve-gradio", spec]
        with process(argv, ROOT, env, url, "/gradio_api/info", log) as running:
            yield running
        return
    config = settings_yaml(opts, workdir, name)
    # --port 0: the server's own socket gets a free port (one picked here could be taken before it binds)
    argv = [sys.executable, "-m", "reference_server", "--config", str(config), "--port", "0"]
    if name in ("current", "fronts"):
        with process(argv, ROOT, child_env(ROOT), None, "/healthz", log) as running:
            yield running
        return
    tree_context = nullcontext(opts.baseline_dir) if opts.baseline_dir else baseline_tree(opts.baseline)
    with tree_context as tree, process(argv, tree, child_env(tree), None, "/healthz", log) as running:
        yield running


def serve_gradio(spec_json: str) -> None:
    """The stand-in inside a real Gradio app, as a user would write it (this file, --serve-gradio)."""
    import gradio as gr

    from reference_server.workloads.registry import build_workload

    spec = json.loads(spec_json)
    workload = build_workload("image-ideal", {"batch_ms": spec["batch_ms"]})
    workload.warmup()

    def classify(images: list[Any]) -> list[list[dict[str, float]]]:
        rows = [workload.prepare_row([image])[0] for image in images]
        labels = workload.run_batch([rows])[0]
        return [[{c["label"]: c["confidence"] for c in label["confidences"]} for label in labels]]

    demo = gr.Interface(classify, gr.Image(type="pil"), gr.Label(), batch=True,
                        max_batch_size=spec["batch"], concurrency_limit=1, api_name="classify")
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name="127.0.0.1", server_port=spec["port"], prevent_thread_lock=True, quiet=True)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- measuring
def cpu_s(pid: int) -> tuple[float, float | None, float]:
    """(main process CPU, its main thread's CPU, its descendants' CPU), seconds."""
    proc = psutil.Process(pid)
    times = proc.cpu_times()
    loop = next((t.user_time + t.system_time for t in proc.threads() if t.id == pid), None)
    others = 0.0
    for child in proc.children(recursive=True):
        try:
            c = child.cpu_times()
            others += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return times.user + times.system, loop, others


def scenario(url: str, opts: Options) -> dict[str, Any]:
    return {
        "name": "server-cost", "target": url, "protocol": "gradio", "endpoint": {"api_name": "classify"},
        "payload": {"seed": 1, "variants": opts.variants,
                    "inputs": [{"image": {"width": 224, "height": 224, "format": "jpeg"}}]},
        "load": {"users": opts.users, "duration": opts.duration_s, "warmup": opts.warmup_s, "timeout": 60,
                 **({"requests": opts.requests} if opts.requests else {})},
    }


def phases(url: str) -> dict[str, float]:
    try:
        summary = httpx.get(f"{url}/gradio_api/profiling/summary", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return {}
    out = {name: float(p["p50"]) for name, p in summary.get("phases", {}).items() if name in PHASES}
    if "upload" in summary:
        out["upload"] = float(summary["upload"]["p50"])
    return out


def measure(url: str, pid: int, opts: Options, workdir: Path, gradio: bool = False) -> Sample:
    httpx.post(f"{url}/gradio_api/profiling/clear", timeout=10)
    path = workdir / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario(url, opts)))
    out = workdir / f"run-{time.time_ns()}"
    before = cpu_s(pid)
    done = subprocess.run([sys.executable, "-m", "qbench", "run", str(path), "--out", str(out), "--no-live"],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(ROOT))
    after = cpu_s(pid)
    if not (out / "summary.json").exists():
        raise SystemExit(f"error: qbench run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    import pandas as pd

    records = pd.read_parquet(out / "records.parquet")
    ok = int((records["outcome"] == "ok").sum())
    loop = None if before[1] is None or after[1] is None else after[1] - before[1]
    if gradio:
        loop = None  # Gradio runs uvicorn's loop in a thread of its own, not the main thread
    return Sample(
        served_rps=float(summary["throughput_rps"]), requests=ok, main_cpu_s=after[0] - before[0],
        loop_cpu_s=loop, others_cpu_s=after[2] - before[2],
        generator_cpu_percent=(summary.get("generator") or {}).get("cpu_percent"), phases_ms=phases(url),
    )


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row(name: str, samples: list[Sample]) -> dict[str, Any]:
    def per_request(attr: str) -> float | None:
        return median([s.per_request_ms(getattr(s, attr)) for s in samples])

    total = median([s.per_request_ms(s.main_cpu_s + s.others_cpu_s) for s in samples])
    names = sorted({k for s in samples for k in s.phases_ms}, key=lambda k: (*PHASES, "upload").index(k))
    return {
        "server": name, "served_rps": median([s.served_rps for s in samples]),
        "main_ms": per_request("main_cpu_s"), "loop_ms": per_request("loop_cpu_s"),
        "others_ms": per_request("others_cpu_s"), "total_ms": total,
        "generator_cpu_percent": median([s.generator_cpu_percent for s in samples]),
        "phases_ms": {k: median([s.phases_ms.get(k) for s in samples]) for k in names},
        "repeats": len(samples),
    }


def table(rows: list[dict[str, Any]], opts: Options) -> str:
    head = (f"{'server':9s} {'served/s':>8s} {'main ms':>7s} {'loop ms':>7s} {'others':>6s} {'total':>6s} "
            f"{'gen %':>5s}  server phases p50 (ms)")
    window = f"{opts.requests} requests" if opts.requests else f"{opts.duration_s:g} s"
    lines = [f"image-ideal: {opts.batch_ms:g} ms per batch, max_batch_size {opts.batch}, {opts.users} users, "
             f"{window}, {opts.repeats} repeats (medians), {os.cpu_count()} CPU cores; "
             f"CPU in ms per request", head, "-" * len(head)]
    base = next((r for r in rows if r["server"] == "baseline"), None)
    for r in rows:
        split = " ".join(f"{k} {v:.2f}" for k, v in r["phases_ms"].items() if v is not None)
        cpu = " ".join([fmt(r["main_ms"], "7.2f"), fmt(r["loop_ms"], "7.2f"), fmt(r["others_ms"], "6.2f"),
                        fmt(r["total_ms"], "6.2f")])
        lines.append(f"{r['server']:9s} {fmt(r['served_rps'], '8.1f')} {cpu} "
                     f"{fmt(r['generator_cpu_percent'], '5.0f')}  {split}")
    if base and base["main_ms"]:
        for r in rows:
            if r is not base and r["main_ms"] is not None and r["total_ms"] is not None:
                main, total = r["main_ms"] / base["main_ms"], r["total_ms"] / base["total_ms"]
                lines.append(f"{r['server']} / baseline: main CPU per request x{main:.2f}, "
                             f"total x{total:.2f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default=",".join(SERVERS), help=f"comma list of {', '.join(SERVERS)}")
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the baseline server")
    p.add_argument("--quick", action="store_true", help="1 repeat, 16 users, 4 s (the suite's dry run)")
    p.add_argument("--users", type=int, help="closed-loop users (default 64; quick 16)")
    p.add_argument("--duration", type=float, help="s per run (default 12; quick 4)")
    p.add_argument("--repeats", type=int, help="runs per server (default 3; quick 1)")
    p.add_argument("--requests", type=int,
                   help="end each run after this many requests, no warm-up (--duration: its cap)")
    p.add_argument("--variants", type=int, default=64, help="distinct images a run sends (default 64)")
    p.add_argument("--batch-size", type=int, default=32, help="max_batch_size (default 32)")
    p.add_argument("--batch-ms", type=float, default=5.0, help="the ideal device's wait per batch (ms)")
    p.add_argument("--baseline-dir", type=Path, help="the baseline checkout on disk (not --baseline)")
    p.add_argument("--decode-workers", type=int, default=os.cpu_count() or 2,
                   help="the current server's launch.decode_workers (default: one per core)")
    p.add_argument("--front-ends", type=int, default=2, help="launch.front_ends of `fronts` (default 2)")
    p.add_argument("--baseline-front-ends", type=int,
                   help="serve the baseline like `fronts` (its decode workers, this many front ends): for a "
                        "baseline that has launch.front_ends (default: the stand-in's commit's settings)")
    p.add_argument("--interleave", action="store_true",
                   help="start every server first, then measure them in turn, repeat by repeat (a busy "
                        "host's load falls on all of them alike)")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.add_argument("--serve-gradio", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve_gradio:
        serve_gradio(a.serve_gradio)
    servers = a.servers.split(",")
    if set(servers) - set(SERVERS):
        p.error(f"--servers: expected a comma list of {', '.join(SERVERS)}; got {a.servers!r}")
    duration = a.duration or (4.0 if a.quick else 12.0)
    return Options(servers=servers, baseline=a.baseline, users=a.users or (16 if a.quick else 64),
                   duration_s=duration, warmup_s=0.0 if a.requests else min(2.0, duration / 4),
                   repeats=a.repeats or (1 if a.quick else 3),
                   batch=a.batch_size, batch_ms=a.batch_ms, decode_workers=a.decode_workers,
                   json_out=a.json, baseline_dir=a.baseline_dir, front_ends=a.front_ends,
                   baseline_front_ends=a.baseline_front_ends, interleave=a.interleave, requests=a.requests,
                   variants=a.variants)


def one_by_one(opts: Options, workdir: Path) -> dict[str, list[Sample]]:
    samples = {}
    for name in opts.servers:
        with server(name, opts, workdir) as (url, pid):
            samples[name] = [measure(url, pid, opts, workdir, name == "gradio") for _ in range(opts.repeats)]
        print(f"{name}: done", flush=True)
    return samples


def interleaved(opts: Options, workdir: Path) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in opts.servers}
    with ExitStack() as stack:
        running = {name: stack.enter_context(server(name, opts, workdir)) for name in opts.servers}
        for i in range(opts.repeats):
            for name, (url, pid) in running.items():
                samples[name].append(measure(url, pid, opts, workdir, name == "gradio"))
            print(f"repeat {i + 1}: done", flush=True)
    return samples


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if "gradio" in opts.servers:
        import importlib.util

        if importlib.util.find_spec("gradio") is None:
            raise SystemExit("error: --servers gradio needs gradio installed (pip install gradio)")
    with tempfile.TemporaryDirectory(prefix="server-cost-") as tmp:
        workdir = Path(tmp)
        samples = interleaved(opts, workdir) if opts.interleave else one_by_one(opts, workdir)
    rows = [row(name, samples[name]) for name in opts.servers]
    print(table(rows, opts))
    if opts.json_out:
        opts.json_out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
