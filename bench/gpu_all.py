"""The GPU session's whole measurement list in two commands: every table, profile and log in one folder.

On the bare GPU machine (see ../shared/gpu/README.md; carry `.gpu-wheels`, which
`bench/gpu_wheels.sh` fills), each part fits one 10-minute device command:

    bash bench/gpu_all.sh --part 1 --out $OUT
    bash bench/gpu_all.sh --part 2 --out $OUT
    bash bench/gpu_all.sh --part 4 --out $OUT    # decode: device and cuda_graphs (issue 46)

Part 1: machine facts, the CUDA tests, gpu_serving.py (image and text, float32 and bfloat16, with the
Gradio rows) and its B 64 bfloat16 image row. Part 2: batching efficiency, a py-spy profile of the
server at saturation, eager vs `--compile`, a sweep that separates batch sizes, and the limit
diagnosis of a real Gradio app serving the same model. Part 3: the ceiling table of issue 35. Part 4:
the device-side work of issue 46, each against the same server without it: the CUDA tests of
`decode: device` and `cuda_graphs`, bench/device_work.py (decode on the host workers vs the device,
forward eager vs graphs, at B 8/32/64, offline), then the image preset at saturation four ways
(baseline, decode: device, cuda_graphs: 8, both); `decode: device` is skipped, saying why, where
torchvision does not load with the machine's torch.

Here, on the CPU, the same steps run at toy size so the script cannot rot: tiny models, each served run
sized in requests (DRY_REQUESTS: every run completes, however busy the machine), a sweep of one batch
size, only the tests named for CUDA in each pytest step (their CUDA cases skip), and the eager step on
the profile step's server (SHARED):

    .venv/bin/python bench/gpu_all.py --device cpu --dry-run --out /tmp/gpu-all

Each step runs as its own process with its log (`<step>.log`), started as qbench starts servers
(qbench.tune.servers.server_process.spawn: in the test suite's dry runs, a fork of its preloaded
interpreter, which has imported torch and transformers once); a step that fails or times out is
recorded and the next one runs. A step whose tool is missing (py-spy, gradio, nvidia-smi) is
`skipped` with the reason. At the end `summary.md` lists every step (status, seconds, the lines that
matter) and, because the device tool brings back at most 8 files, everything else is packed into
`gpu-all-part<N>.tar.gz` beside it. Exit status: 0 when no step failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qbench.tune.servers.preloaded import Process

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


@dataclass
class Options:
    part: str  # "1", "2" or "all"
    out: Path  # where summary.md and the archive go
    device: str  # cuda | cpu
    dry_run: bool  # toy sizes (the CPU test of this script)
    steps: list[str] = field(default_factory=list)  # the steps to run ([]: the part's)
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpu-all-")))
    # a dry run's server, up until a step that does not share it is over (main, SHARED): its key, url, pid
    servers: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    kept: tuple[Any, str, int] | None = None

    def stop_servers(self) -> None:
        self.servers.close()
        self.kept = None

    @property
    def size(self) -> str:
        return "tiny" if self.dry_run else "base"

    def seconds(self, full: float) -> float:
        return 2.0 if self.dry_run else full

    @property
    def requests(self) -> int | None:
        """A dry run's served runs stop after this many requests (no warm-up): every run completes some
        however slow the machine, and no run waits out a window; None: runs of `seconds`."""
        return DRY_REQUESTS if self.dry_run else None


DRY_REQUESTS = 32  # 4 per user of a dry run's 8: a fraction of a second on the 2-core CPU box (Gradio: ~2 s)
DRY_CAP_S = 120.0  # the longest a dry run's request-sized run may take (load.duration)
DRY_VARIANTS = 8  # distinct images a dry run's run sends (each a photo-like JPEG made before it starts)


@dataclass
class Outcome:
    name: str
    status: str  # ok | failed | skipped | timeout
    seconds: float
    detail: str = ""  # the reason (skipped, failed) or the lines that matter (ok)


# ---------------------------------------------------------------- running steps


def run_logged(argv: list[str], log: Path, timeout_s: float, env: dict[str, str] | None = None) -> int:
    """Run `argv` from the project root in its own process group, stdout and stderr into `log`; 124 on a
    time-out. (qbench's process starter: a Python step is forked from the preloaded interpreter that
    QBENCH_PRELOADED names, where there is one, as in the test suite's dry runs.)"""
    from qbench.tune.servers.server_process import spawn

    with log.open("a", encoding="utf-8") as sink:
        sink.write(f"$ {' '.join(argv)}\n")
    proc = spawn(argv, env=env, log_path=log, cwd=ROOT)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"\n[gpu_all] timed out after {timeout_s:.0f} s\n")
        return 124


def stop_group(proc: Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)


def table_lines(log: Path, pattern: str = r"^(model |image |text ) ") -> str:
    """The lines of a benchmark's printed table (kept in summary.md)."""
    if not log.exists():
        return ""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(line for line in lines if re.match(pattern, line))


def image_settings(opts: Options, params: dict[str, Any] | None = None,
                   launch: dict[str, Any] | None = None, name: str = "image-settings") -> Path:
    """The image preset's settings on the device (its model at the `tiny` size in a dry run), with
    `params` over its function's and `launch` over its launch keys."""
    import yaml

    settings = yaml.safe_load(
        (ROOT / "reference_server" / "presets" / "image.yaml").read_text(encoding="utf-8")
    )
    settings["device"] = opts.device
    for fn in settings["functions"]:
        tiny = {"size": "tiny"} if opts.dry_run else {}
        fn["params"] = {**fn.get("params", {}), **(params or {}), **tiny}
    settings["launch"] = {**settings.get("launch", {}), **(launch or {})}
    path = opts.work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


@contextlib.contextmanager
def reference_server(opts: Options, log: Path, *extra: str,
                     settings: Path | None = None) -> Iterator[tuple[str, int]]:
    """`python -m reference_server` with the image preset (or `settings`) on the device: (url, pid) once
    /config answers; its output appended to `log` (qbench's one subprocess starter,
    qbench.tune.servers.server_process). In a dry run the server stays up for the next step when that
    step shares it (SHARED), which then gets the same one."""
    from qbench.tune.servers.server_process import reference_server_process

    settings, args = settings or image_settings(opts), ["--log-level", "warning", *extra]
    key = (settings.read_text(encoding="utf-8"), args)
    if opts.kept is not None and opts.kept[0] == key:
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"[gpu_all] dry run: the step before's server, the same settings ({opts.kept[1]})\n")
        yield opts.kept[1], opts.kept[2]
        return
    opts.stop_servers()
    with log.open("a", encoding="utf-8") as sink:
        sink.write(f"$ python -m reference_server --config {settings} --port 0 {' '.join(args)}\n")
    server = reference_server_process(settings, args=args, cwd=ROOT, log_path=log,
                                      work_dir=opts.work, ready_timeout_s=900)
    if opts.dry_run:
        handle = opts.servers.enter_context(server)
        assert handle.pid is not None
        opts.kept = (key, handle.base_url, handle.pid)
        yield handle.base_url, handle.pid
        return
    with server as handle:
        assert handle.pid is not None
        yield handle.base_url, handle.pid


def qbench_run(opts: Options, url: str, name: str, log: Path, users: int, duration_s: float,
               requests: int | None = None) -> Path:
    """`qbench run scenarios/image.yaml` against `url`, closed loop, for `duration_s` (past a warm-up of
    WARM_UP_S) or, given `requests`, until that many were sent (no warm-up); returns the run folder."""
    out = opts.work / f"run-{name}"
    window = [f"load.duration={duration_s:g}", f"load.warmup={WARM_UP_S:g}"]
    if requests is not None:
        window = [f"load.requests={requests}", f"load.duration={DRY_CAP_S:g}", "load.warmup=0"]
        duration_s = DRY_CAP_S
    if opts.dry_run:
        window.append(f"payload.variants={DRY_VARIANTS}")
    argv = [
        PY,
        "-m",
        "qbench",
        "run",
        "scenarios/image.yaml",
        "--target",
        url,
        "--out",
        str(out),
        "--set",
        f"load.users={users}",
        *(arg for setting in window for arg in ("--set", setting)),
        "--no-live",
    ]
    code = run_logged(argv, log, timeout_s=duration_s + 240)
    if not (out / "summary.json").exists():
        raise RuntimeError(f"qbench run wrote no summary (exit {code})")
    return out


def served_line(run_dir: Path) -> str:
    """Served rate, errors, latency, the device's figures and the limit diagnosis of a run folder."""
    from qbench.run.results.summary import Summary

    data = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    summary = Summary.from_dict(data)
    latency = summary.phase("latency_s")
    parts = [
        f"served {summary.throughput_rps:.1f} req/s",
        f"errors {summary.errors}",
        f"p50 {latency.p50 or 0:.3f} s",
        f"p95 {latency.p95 or 0:.3f} s",
    ]
    if summary.device is not None and summary.device.line():
        parts.append(summary.device.line())  # the forward passes beside the served rate, GPU busy
    parts += [f"limit ({f['kind']}): {f['message']}" for f in data.get("diagnosis", [])]
    return ", ".join(parts)


def status_usage(url: str) -> str:
    """The server's own CPU and GPU figures from /status (the reference server's)."""
    from qbench.run.control import read_status

    status = read_status(url)
    if status is None:
        return ""
    gpus = status.get("gpu") or []
    gpu = ", ".join(
        f"GPU{i} busy {g['busy_s'] / max(g['sampled_s'], 1e-9):.0%}"
        for i, g in enumerate(gpus)
        if g.get("sampled_s")
    )
    loop_s = status.get("event_loop_cpu_s", 0)
    cpu = f"server CPU {status.get('cpu_s', 0):.1f} s (event loop {loop_s:.1f} s)"
    return "; ".join(filter(None, [cpu, gpu]))


# ---------------------------------------------------------------- the steps


def step_facts(opts: Options, log: Path) -> str:
    if shutil.which("nvidia-smi"):
        run_logged(["nvidia-smi"], log, timeout_s=60)
    code = (
        "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, "
        "'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() "
        "else 'no GPU'); import os; print('cpus', os.cpu_count())"
    )
    run_logged([PY, "-c", code], log, timeout_s=120)
    return table_lines(log, r"^(python |cpus )")


def only_cuda(opts: Options) -> list[str]:
    """A dry run's pytest keeps the tests named for CUDA (test_cuda_*: their CUDA cases skip on a CPU,
    the rest pass); the files' other tests are the suite's own, already run on the CPU."""
    return ["-k", "cuda"] if opts.dry_run else []


def step_cuda_tests(opts: Options, log: Path) -> str:
    tests = ["tests/models/test_pixels.py", "tests/server/queue/test_jobs.py",
             "tests/server/io/test_uploads.py"]
    argv = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", *only_cuda(opts), *tests]
    code = run_logged(argv, log, timeout_s=480)
    if code not in (0, 124):
        raise RuntimeError(f"pytest exit {code}")
    if code == 124:
        raise TimeoutError
    return table_lines(log, r".*\b(passed|failed|skipped)\b")


def gpu_serving(opts: Options, log: Path, *args: str) -> str:
    base = [PY, "bench/gpu_serving.py", "--device", opts.device, "--size", opts.size]
    if opts.dry_run:
        base += [
            "--batch-size",
            "4",
            "--users",
            "8",
            "--requests",
            str(opts.requests),
            "--duration",
            f"{DRY_CAP_S:g}",
            "--variants",
            str(DRY_VARIANTS),
            "--repeats",
            "2",
            "--min-timed",
            "0.05",
        ]
    if "--gradio" in args and importlib.util.find_spec("gradio") is None:
        args = tuple(a for a in args if a != "--gradio")
        with log.open("a") as sink:
            sink.write(
                "[gpu_all] gradio is not installed: no Gradio rows (carry its wheels: bench/gpu_wheels.sh)\n"
            )
    code = run_logged([*base, *args], log, timeout_s=540 if not opts.dry_run else 300)
    if code != 0:
        raise RuntimeError(f"gpu_serving.py exit {code}")
    return table_lines(log, r"^(server |reference |ref fe|baseline |gradio |    generator)")


def step_serving(opts: Options, log: Path) -> str:
    presets, dtypes = ("image", "float32") if opts.dry_run else ("image,text", "float32,bfloat16")
    return gpu_serving(
        opts,
        log,
        "--presets",
        presets,
        "--dtypes",
        dtypes,
        "--gradio",
        "--json",
        str(opts.work / "gpu_serving.json"),
    )


def step_serving_b64(opts: Options, log: Path) -> str:
    if opts.dry_run:  # the served bfloat16 row: serving's dry run already times the offline figures
        return gpu_serving(opts, log, "--presets", "image", "--dtypes", "bfloat16", "--no-offline")
    return gpu_serving(
        opts,
        log,
        "--presets",
        "image",
        "--dtypes",
        "bfloat16",
        "--batch-size",
        "64",
        "--json",
        str(opts.work / "gpu_serving_b64.json"),
    )


def step_batching(opts: Options, log: Path) -> str:
    argv = [
        PY,
        "bench/batching_efficiency.py",
        "--models",
        "image",
        "--size",
        opts.size,
        "--device",
        opts.device,
    ]
    argv += (
        ["--batch-sizes", "2", "--batches", "1", "--rounds", "1", "--repeats", "1"]
        if opts.dry_run
        else ["--batch-sizes", "8", "32"]
    )
    code = run_logged(argv, log, timeout_s=300)
    if code != 0:
        raise RuntimeError(f"batching_efficiency.py exit {code}")
    return table_lines(log)


def saturated(
    opts: Options,
    log: Path,
    name: str,
    *server_args: str,
    during: Callable[[int, str, threading.Event], None] | None = None,
    duration_s: float | None = None,
    settings: Path | None = None,
) -> str:
    """The image preset (or `settings`) at saturation (128 users on a GPU): served rate, server CPU and
    GPU busy. `during(pid, url, done)` runs beside the load in a thread; `done` is set when the run has
    ended."""
    users, duration = (8, opts.seconds(20)) if opts.dry_run else (128, 20.0)
    duration, requests = (duration_s, None) if duration_s else (duration, opts.requests)
    with reference_server(opts, log, *server_args, settings=settings) as (url, pid):
        if during is None:
            run_dir = qbench_run(opts, url, name, log, users, duration, requests)
        else:
            with background(lambda done: during(pid, url, done)):
                run_dir = qbench_run(opts, url, name, log, users, duration, requests)
        return f"{served_line(run_dir)}; {status_usage(url)}"


@contextlib.contextmanager
def background(action: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run `action(done)` in a thread while the block runs; `done` is set when the block ends."""
    done = threading.Event()
    thread = threading.Thread(target=action, args=(done,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=60)


def wait_for_load(url: str, done: threading.Event, limit_s: float = 300.0) -> bool:
    """Wait until the server has completed a job (the run's load reached it); False if the run ended
    first. A fixed sleep is not enough: under a busy machine qbench's own start-up takes seconds."""
    from qbench.run.control import read_status

    deadline = time.monotonic() + limit_s
    while not done.is_set() and time.monotonic() < deadline:
        status = read_status(url) or {}
        if int(status.get("jobs_completed") or 0) > 0:
            return True
        done.wait(0.1)
    return False


WARM_UP_S = 1.0  # qbench_run's load.warmup
PROFILE_HZ = 40  # py-spy's default 100 Hz fell a minute behind on the 17-thread server (2026-11-26)


def step_profile(opts: Options, log: Path) -> str:
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(PY).parent))
    if spy is None:
        raise LookupError("py-spy is not installed (carry its wheel: bench/gpu_wheels.sh)")
    raw = opts.work / "spy.txt"

    recorded_s = 0.0

    def record(pid: int, url: str, done: threading.Event) -> None:
        """py-spy from the load's start (past its warm-up) until the run ends: the window is the run's
        loaded span, however late a busy machine starts it."""
        nonlocal recorded_s
        if not wait_for_load(url, done):
            return
        done.wait(WARM_UP_S)  # past the run's warm-up (load.warmup)
        if done.is_set():
            return
        argv = [spy, "record", "-p", str(pid), "-d", "600", "-f", "raw", "--threads",
                "-r", str(PROFILE_HZ), "-o", str(raw), "--nonblocking"]
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"$ {' '.join(argv)}\n")
            sink.flush()
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            began = time.monotonic()
            done.wait()
            recorded_s = time.monotonic() - began
            proc.send_signal(signal.SIGINT)  # py-spy writes its profile on Ctrl-C
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stop_group(proc)

    # a dry run's profile is a window in seconds, not a count of requests: py-spy attaches once the load
    # has reached the server and then needs a second or two of it
    line = saturated(opts, log, "profile", during=record, duration_s=3.0 if opts.dry_run else None)
    if not raw.exists():
        return f"{line}\n(py-spy wrote no profile: see the log)"
    return f"{line}\n{thread_load(raw, recorded_s, PROFILE_HZ)}\n{top_frames(raw)}"


def stacks(raw: Path) -> Iterator[tuple[list[str], int]]:
    """(frames, samples) per line of a py-spy raw (collapsed stacks) file; frames[0] is the thread."""
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, samples = line.rpartition(" ")
        if stack and samples.isdigit():
            yield stack.split(";"), int(samples)


def thread_load(raw: Path, seconds: float, rate_hz: int = 100) -> str:
    """How busy each kind of thread was (py-spy samples only active threads, `rate_hz` a second):
    the event loop's share of the window is the question the profile answers."""
    samples: dict[str, int] = {}
    threads: dict[str, set[str]] = {}
    for frames, count in stacks(raw):
        ident, _, name = frames[0].partition(": ")
        kind = name or "unnamed"
        samples[kind] = samples.get(kind, 0) + count
        threads.setdefault(kind, set()).add(ident)
    window = max(seconds * rate_hz, 1.0)
    return "\n".join(
        f"{kind} ({len(threads[kind])} thread(s)): {n / window:.2f} cores busy"
        for kind, n in sorted(samples.items(), key=lambda kv: -kv[1])
    )


def top_frames(raw: Path, count: int = 12) -> str:
    """The functions with the most samples (self time) in a py-spy raw file."""
    totals: dict[str, int] = {}
    for frames, samples in stacks(raw):
        totals[frames[-1]] = totals.get(frames[-1], 0) + samples
    every = max(sum(totals.values()), 1)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:count]
    return "\n".join(f"{n / every:6.1%}  {leaf}" for leaf, n in ranked)


def step_eager(opts: Options, log: Path) -> str:
    return saturated(opts, log, "eager")


def step_compile(opts: Options, log: Path) -> str:
    """The model under torch.compile (inductor); the CPU dry run captures the graph with aot_eager and
    generates no code (inductor's C++ build of the toy model took ~25-60 s of the dry run's CPU, and what
    the GPU runs is Triton, not that)."""
    backend = ("--compile-backend", "aot_eager") if opts.dry_run and opts.device == "cpu" else ("--compile",)
    return saturated(opts, log, "compile", *backend)


def step_sweep(opts: Options, log: Path) -> str:
    """A sweep that separates batch sizes: the image preset at max_batch_size 8, 32, 64 on the device."""
    import yaml

    scenario = yaml.safe_load((ROOT / "scenarios" / "image.yaml").read_text(encoding="utf-8"))
    scenario["load"] = {
        "users": 8 if opts.dry_run else 128,
        "duration": opts.seconds(20),
        "warmup": 1,
        "timeout": 120,
    }
    if opts.dry_run:  # one point: the relaunch, the run, the ranking and the winner, once
        scenario["load"].update(requests=opts.requests, duration=DRY_CAP_S, warmup=0)
        scenario["payload"]["variants"] = DRY_VARIANTS
    scenario_path = opts.work / "sweep-scenario.yaml"
    scenario_path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    sizes = "4" if opts.dry_run else "8,32,64"
    argv = [
        PY,
        "-m",
        "qbench",
        "sweep",
        str(scenario_path),
        "--server-config",
        str(image_settings(opts)),
        "--grid",
        f"max_batch_size={sizes}",
        "--objective",
        "latency",
        "--capacity-trials",
        "0",
        "--out",
        str(opts.work / "sweep"),
    ]
    code = run_logged(argv, log, timeout_s=540)
    if code not in (0, 3):
        raise RuntimeError(f"qbench sweep exit {code}")
    return table_lines(log, r"^(?!\$).*(max_batch_size|winner|b\d+:).*")[-2000:]


def step_gradio_diagnosis(opts: Options, log: Path) -> str:
    """The limit diagnosis of a real Gradio 6 app serving the image model on the device."""
    if importlib.util.find_spec("gradio") is None:
        raise LookupError("gradio is not installed (carry its wheels: bench/gpu_wheels.sh --gradio)")
    spec = json.dumps(
        {
            "preset": "image",
            "dtype": "auto",
            "size": opts.size,
            "batch": 8 if opts.dry_run else 32,
            "device": opts.device,
        }
    )
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(ROOT)}
    with log.open("a", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            [PY, "bench/gpu_serving.py", "--serve-gradio", spec],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=sink,
            start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            if line.startswith("READY "):
                url = line.split()[1]
                break
        if not url:
            raise RuntimeError(f"the Gradio app exited ({proc.wait()}) before it was ready")
        users = 8 if opts.dry_run else 128
        run_dir = qbench_run(opts, url, "gradio", log, users, opts.seconds(20), opts.requests)
        return served_line(run_dir)
    finally:
        stop_group(proc)


# ---------------------------------------------------------------- part 3: the ceiling (issue 35)
BASELINES = ROOT / ".gpu-baseline"  # carried checkouts: today/ (8a17640), standin/ (the stand-in's commit)


def step_ceiling_cost(opts: Options, log: Path) -> str:
    """The CPU stand-in on this machine's cores: main-process CPU per image request, baseline vs now."""
    argv = [PY, "bench/server_cost.py", "--servers", "baseline,current,fronts", "--json",
            str(opts.work / "server_cost.json"), "--front-ends", "2" if opts.dry_run else "4"]
    if (BASELINES / "standin").is_dir():
        argv += ["--baseline-dir", str(BASELINES / "standin")]
    argv += ["--quick", "--requests", str(opts.requests), "--duration", f"{DRY_CAP_S:g}", "--users", "8",
             "--variants", str(DRY_VARIANTS), "--decode-workers", "1"] if opts.dry_run else [
        "--users", "128", "--duration", "10", "--repeats", "1"]
    code = run_logged(argv, log, timeout_s=240)
    if code != 0:
        raise RuntimeError(f"server_cost.py exit {code}")
    return table_lines(log, r"^(image-ideal|server |baseline |current |fronts |gradio |\S+ / baseline)")


def step_ceiling_serving(opts: Options, log: Path) -> str:
    """The issue's table: image preset, B 32, float32 and bfloat16: forward, +prep, served by this
    checkout's server without and with HTTP front-end processes (`ref fe0`, `ref fe4`), GPU busy. The
    server before the issue (8a17640: 308 and 271 img/s, bench/RESULTS.md) gets a row only with
    QBENCH_CEILING_BASELINE=1 and .gpu-baseline/today carried: a third server per dtype does not fit in
    one device command beside the rest of part 3."""
    args = ["--presets", "image", "--dtypes", "float32" if opts.dry_run else "float32,bfloat16",
            "--json", str(opts.work / "ceiling_serving.json"),
            "--front-ends", "0,2" if opts.dry_run else "0,4"]
    if not opts.dry_run:
        args += ["--batch-size", "32", "--users", "128", "--duration", "15", "--repeats", "5",
                 "--min-timed", "1"]
    if (BASELINES / "today").is_dir() and os.environ.get("QBENCH_CEILING_BASELINE") == "1":
        args += ["--baseline-dir", str(BASELINES / "today")]
    return gpu_serving(opts, log, *args)


def step_ceiling_batch(opts: Options, log: Path) -> str:
    """Served rate against max_batch_size (bfloat16): it should rise with B once the server keeps up."""
    lines = []
    for batch in ("8",) if opts.dry_run else ("8", "64"):
        args = ["--presets", "image", "--dtypes", "bfloat16", "--no-offline", "--batch-size", batch]
        if not opts.dry_run:
            args += ["--users", str(4 * int(batch)), "--duration", "12"]
        lines.append(gpu_serving(opts, log, *args))
    return "\n".join(lines)


# ---------------------------------------------------------------- part 4: device-side work (issue 46)
def step_device_tests(opts: Options, log: Path) -> str:
    """The CUDA tests of `decode: device` and `cuda_graphs` (skipped on a CPU, or without torchvision)."""
    tests = ["tests/models/test_jpeg.py", "tests/models/test_graphs.py"]
    argv = [PY, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *only_cuda(opts), *tests]
    code = run_logged(argv, log, timeout_s=300)
    if code == 124:
        raise TimeoutError
    if code != 0:
        raise RuntimeError(f"pytest exit {code}")
    return table_lines(log, r".*\b(passed|failed|SKIPPED)\b")


def step_device_work(opts: Options, log: Path) -> str:
    """bench/device_work.py: decode on the host (the decode workers) vs the device, and the forward eager
    vs CUDA graphs, at the same batch sizes, offline."""
    argv = [PY, "bench/device_work.py", "--device", opts.device, "--size", opts.size,
            "--json", str(opts.work / "device_work.json")]
    argv += ["--quick"] if opts.dry_run else ["--batch-sizes", "8,32,64"]
    code = run_logged(argv, log, timeout_s=300)
    if code != 0:
        raise RuntimeError(f"device_work.py exit {code}")
    return table_lines(log, r"^(device |decode |forward )")


GRAPH_LARGEST = {"cuda": 8, "cpu": 8}  # graphs paid only up to B 8 offline (bench/RESULTS.md, H200)


def serving_with(params: dict[str, Any]) -> Callable[[Options, Path], str]:
    """A step: the image preset at saturation with `params` over its function's (`decode`, `cuda_graphs`);
    in a dry run behind one decode worker (a CPU server has none by default; decode: device needs one)."""

    def step(opts: Options, log: Path) -> str:
        chosen = {k: (GRAPH_LARGEST[opts.device] if k == "cuda_graphs" else v) for k, v in params.items()}
        if chosen.get("decode") == "device" and opts.device == "cuda":
            from reference_server.workloads.models.jpeg import torchvision_error

            problem = torchvision_error()
            if problem is not None:
                raise LookupError(f"decode: device needs torchvision on CUDA: {problem}")
        launch = {"decode_workers": 1} if opts.dry_run else {}
        name = "-".join(f"{k}-{v}" for k, v in chosen.items()) or "baseline"
        settings = image_settings(opts, chosen, launch, name=f"image-{name}")
        return f"{chosen or 'decode: cpu, no graphs'}: {saturated(opts, log, name, settings=settings)}"

    return step


# a dry run's step -> the step after it that measures the same server (the same settings): the server
# stays up for it (on the GPU each step starts its own: eager without py-spy's sampling)
SHARED = {"profile": "eager"}

STEPS: dict[str, tuple[str, Callable[[Options, Path], str]]] = {
    # name: (part, function); the order is the order they run in
    "facts": ("1", step_facts),
    "cuda-tests": ("1", step_cuda_tests),
    "serving": ("1", step_serving),
    "serving-b64": ("1", step_serving_b64),
    "batching": ("2", step_batching),
    "profile": ("2", step_profile),
    "eager": ("2", step_eager),
    "compile": ("2", step_compile),
    "sweep": ("2", step_sweep),
    "gradio-diagnosis": ("2", step_gradio_diagnosis),
    "ceiling-cost": ("3", step_ceiling_cost),
    "ceiling-serving": ("3", step_ceiling_serving),
    "ceiling-batch": ("3", step_ceiling_batch),
    "device-tests": ("4", step_device_tests),
    "device-work": ("4", step_device_work),
    "serve-baseline": ("4", serving_with({})),
    "serve-decode-device": ("4", serving_with({"decode": "device"})),
    "serve-cuda-graphs": ("4", serving_with({"cuda_graphs": True})),
    "serve-both": ("4", serving_with({"decode": "device", "cuda_graphs": True})),
}


def run_step(name: str, function: Callable[[Options, Path], str], opts: Options) -> Outcome:
    log = opts.work / f"{name}.log"
    log.touch()
    started = time.monotonic()
    print(f"[gpu_all] {name} ...", flush=True)
    try:
        detail, status = function(opts, log), "ok"
    except LookupError as missing:
        detail, status = str(missing).strip("'\""), "skipped"
    except TimeoutError:
        detail, status = "timed out", "timeout"
    except Exception as error:  # noqa: BLE001 - a failed step is recorded, the next one runs
        detail, status = f"{type(error).__name__}: {error}", "failed"
    outcome = Outcome(name, status, time.monotonic() - started, detail)
    print(f"[gpu_all] {name}: {status} in {outcome.seconds:.0f} s", flush=True)
    return outcome


def summary_md(opts: Options, outcomes: list[Outcome]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# bench/gpu_all.py part {opts.part} ({stamp}, device {opts.device}"
        f"{', dry run' if opts.dry_run else ''})",
        "",
        "| step | status | seconds |",
        "|---|---|---|",
    ]
    lines += [f"| {o.name} | {o.status} | {o.seconds:.0f} |" for o in outcomes]
    for o in outcomes:
        lines += ["", f"## {o.name}: {o.status}", "", "```", o.detail or "(nothing printed)", "```"]
    return "\n".join(lines) + "\n"


def pack(opts: Options, outcomes: list[Outcome]) -> Path:
    opts.out.mkdir(parents=True, exist_ok=True)
    text = summary_md(opts, outcomes)
    (opts.work / "summary.md").write_text(text, encoding="utf-8")
    (opts.out / f"gpu-all-part{opts.part}-summary.md").write_text(text, encoding="utf-8")
    archive = opts.out / f"gpu-all-part{opts.part}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(opts.work, arcname=f"gpu-all-part{opts.part}")
    return archive


def torchvision_wheel(folder: Path, torch_version: str) -> Path | None:
    """The torchvision wheel in `folder` whose METADATA pins `torch_version` (local tag ignored): a
    torchvision built for another torch fails to load, and then breaks transformers' image imports."""
    import zipfile

    want = torch_version.split("+")[0]
    for wheel in sorted(folder.glob("torchvision-*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            meta = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = archive.read(meta).decode("utf-8", "replace") if meta else ""
        pin = re.search(r"^Requires-Dist: torch \(?==([0-9.]+)", text, re.M)
        if pin is not None and pin.group(1) == want:
            return wheel
    return None


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--part", choices=["1", "2", "3", "4", "all"], default="all",
        help="which part of the list (default all; 3: the ceiling table of issue 35; 4: decode on the "
             "device and CUDA graphs, issue 46)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT", "reports/gpu-all")),
        help="folder for summary.md and the archive (default $OUT, else reports/gpu-all)",
    )
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument(
        "--dry-run", action="store_true", help="toy sizes, 2 s windows: the CPU check of this script"
    )
    p.add_argument("--steps", help="comma list of steps to run (default: the part's); " + ", ".join(STEPS))
    a = p.parse_args(argv)
    opts = Options(a.part, a.out, a.device, a.dry_run)
    if a.steps:
        unknown = set(a.steps.split(",")) - STEPS.keys()
        if unknown:
            p.error(f"unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")
        opts.steps = a.steps.split(",")
    return opts


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--torchvision-wheel"]:  # gpu_all.sh's question, before any step
        import torch

        wheel = torchvision_wheel(Path(sys.argv[2]), torch.__version__)
        print(wheel or "")
        return 0
    opts = parse_args(argv)
    chosen = opts.steps or [n for n, (part, _) in STEPS.items() if opts.part in (part, "all")]
    outcomes = []
    try:
        for i, name in enumerate(chosen):
            outcomes.append(run_step(name, STEPS[name][1], opts))
            if SHARED.get(name) not in chosen[i + 1:i + 2]:
                opts.stop_servers()
    finally:
        opts.stop_servers()
    archive = pack(opts, outcomes)
    print((opts.out / f"gpu-all-part{opts.part}-summary.md").read_text(encoding="utf-8"))
    print(f"[gpu_all] everything: {archive}")
    return 1 if any(o.status in ("failed", "timeout") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
