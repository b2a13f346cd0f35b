"""qbench against Gradio's own load tester, hf-perftest: same apps, same load, one run.

    .venv/bin/python bench/vs_hf_perftest.py [--apps echo_text,streaming_chat,image_to_image,file_heavy]
        [--tiers 1,4] [--rounds 40] [--repeats 3] [--interval 0.3] [--explain] [--json FILE]
        [--qbench-dir DIR]

hf-perftest (PyPI) is Gradio's team's tester built on Gradio's per-event profiling traces
(GRADIO_PROFILING=1 -> /gradio_api/profiling/traces and /summary). It needs its own venv with
Gradio 6.31 (`--setup` builds it with uv):

    .venv/bin/uv venv .bench-envs/hf-perftest
    .venv/bin/uv pip install --python .bench-envs/hf-perftest/bin/python hf-perftest==0.4.0 gradio==6.31.0

The bench exits non-zero, naming that command, when that venv is missing.

For each of hf-perftest's own sample apps (its `apps/` folder) and each repeat, one app process serves
both tools:

  hf-perftest  `hf-perftest run --app APP --tiers 1,4 --requests-per-user ROUNDS` as shipped: it
               launches the app (GRADIO_PROFILING=1, concurrency limit 1), warms up with 2 users x 3
               rounds, then per tier fires ROUNDS bursts of `tier` users, each round on a fresh httpx
               client, and reports client p50/p99 and the traces' summary. Patched at run time (its
               installed files untouched): its start syncs sample inputs from the Hugging Face Hub
               (`runner.sync_bucket`), skipped here (the bench writes the one sample image into
               `sample-inputs/image/`); and beside each of its tiers, qbench runs (below).
  qbench       `qbench run` on that app, beside each hf-perftest tier (before it, or after it on odd
               repeats: a Gradio app slows as it serves events): a warm-up (2 users, 6 requests) on
               the first tier, then 1 user in a closed loop (ROUNDS requests), or bursts of `tier`
               users every --interval s (ROUNDS bursts); hf-perftest's inputs (its text; its sample
               image, uploaded); output files not fetched (hf-perftest does not fetch them). The
               traces are cleared before and their summary read after, as hf-perftest does.
               `--qbench-dir DIR` runs the qbench package found in DIR (another checkout).

Printed, per app and tier, medians over the repeats: client p50 and p99 (ms, from the send) and the
client's CPU per request of both tools, with the ratio qbench / hf-perftest; then the server's phases
at p50 (queue_wait, preprocess, fn_call, postprocess, streaming_diff, upload, total): hf-perftest's
figure (the traces' summary of its tier), qbench's per-record figure (records.parquet `server_*_s`
columns, read with pandas when the records carry them, else "qbench records carry no server phases
yet"), the ratio, `agree` when within 5% or 1 ms, and the traces' summary of qbench's tier (what Gradio
saw of qbench's load; qbench's records must match it).

`--explain` adds, per app, after the 1-user tier: hf-perftest's own client (`runner.run_httpx_tier`,
1 user) patched at run time to keep one httpx client for every round, and that with Python's cyclic
GC paused (qbench pauses it during a run): client p50/p99, CPU per request, the server's phases under
each client, and (httpx event hooks) the join's round trip and the stream's opening: where the
client-side difference goes (bench/RESULTS.md, docs/measurement.md).

Numbers on a shared 2-core machine are noisy: compare ratios within one run, repeat, quote medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from qbench.tune.servers.server_process import free_port

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
HF_ENV = ROOT / ".bench-envs" / "hf-perftest"
HF_VERSION = "0.4.0"
GRADIO_VERSION = "6.31.0"
APPS = ("echo_text", "streaming_chat", "image_to_image", "file_heavy")
#: Gradio's trace phases (hf-perftest's names) and the qbench record column that carries each.
PHASES = (
    ("queue_wait", "server_queue_wait_s"),
    ("preprocess", "server_preprocess_s"),
    ("fn_call", "server_fn_s"),
    ("postprocess", "server_postprocess_s"),
    ("streaming_diff", "server_streaming_diff_s"),
    ("upload", "server_upload_s"),
    ("total", "server_total_s"),
)
NO_PHASES = "qbench records carry no server phases yet"
TEXT = "hello from user 0 req 0"  # hf-perftest sends f"hello from user {u} req {r}"

#: Runs hf-perftest's CLI in its venv, patched at run time (its installed files untouched): the Hub sync
#: of sample inputs is skipped, and beside each of its measured tiers qbench runs the same tier on the app
#: hf-perftest launched (the bench's `--qbench-tier`: it clears the traces, runs, reads their summary),
#: before or after hf-perftest's own tier (alternating by repeat: a Gradio server slows as it serves
#: events). hf-perftest's traces are read right after its tier. With --explain, after the 1-user tier,
#: hf-perftest's client runs patched: one httpx client for every round, and that with Python's cyclic
#: GC paused; httpx's event hooks time the join and the stream's opening.
HF_DRIVER = """
import asyncio, gc, json, os, subprocess, sys, time
import numpy as np
import hf_perftest.runner as runner

peer = json.loads(os.environ["QBENCH_PEER"])
runner.sync_bucket = lambda *a, **k: print("sample-inputs: Hub sync skipped (offline); local folder used")
shipped_tier, shipped_httpx = runner.run_httpx_tier, runner.httpx
shipped_fetch = runner.fetch_profiling_data


class Kept:
    def __init__(self, client):
        self.client = client

    async def __aenter__(self):
        return self.client

    async def __aexit__(self, *exc):
        return False


async def patched(url, rounds, kw, gc_off):
    marks = []  # (path, "request" | "response", monotonic): httpx's event hooks, response = headers in

    async def on_request(request):
        marks.append((request.url.path, "request", time.monotonic()))

    async def on_response(response):
        marks.append((response.request.url.path, "response", time.monotonic()))

    hooks = {"request": [on_request], "response": [on_response]}
    shared = shipped_httpx.AsyncClient(event_hooks=hooks)
    runner.httpx = type("httpx", (), {"AsyncClient": staticmethod(lambda *a, **k: Kept(shared))})
    if gc_off:
        gc.collect()
        gc.disable()
    await runner.clear_profiling_data(url)
    cpu = time.process_time()
    try:
        results = await shipped_tier(url, 1, rounds, **kw)
        cpu = time.process_time() - cpu
    finally:
        runner.httpx = shipped_httpx
        gc.enable()
        await shared.aclose()
    ms = [r["latency_ms"] for r in results if r.get("success")]
    _, summary = await shipped_fetch(url)
    server = {name: phase["p50"] for name, phase in summary.get("phases", {}).items()}
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "cpu_ms": cpu / len(results) * 1000, "server": server, **splits(marks)}


def splits(marks):
    # median ms: the join's round trip (sent -> response headers), join answered -> stream requested,
    # stream requested -> its headers
    join, gap, stream = [], [], []
    for i in range(len(marks) - 3):
        (p0, k0, t0), (p1, k1, t1), (p2, k2, t2), (p3, k3, t3) = marks[i:i + 4]
        if p0.endswith("/queue/join") and k0 == "request" and k1 == "response" and p2.endswith("/queue/data"):
            join.append(t1 - t0)
            gap.append(t2 - t1)
            stream.append(t3 - t2)
    med = lambda v: float(np.median(v) * 1000) if v else None
    return {"join_ms": med(join), "join_to_stream_ms": med(gap), "stream_headers_ms": med(stream)}


async def qbench_tier(url, users):
    argv = [*peer["qbench"], "--qbench-tier", url, str(users)]
    done = await asyncio.to_thread(subprocess.run, argv)
    if done.returncode != 0:
        sys.exit(f"qbench's tier failed: {argv}")


async def hf_tier(url, users, rounds, kw):
    await runner.clear_profiling_data(url)
    cpu = time.process_time()
    results = await shipped_tier(url, users, rounds, **kw)
    with open(os.path.join(peer["out"], f"hf-cpu-{users}.json"), "w") as f:
        json.dump((time.process_time() - cpu) / len(results) * 1000, f)
    stash.append(await shipped_fetch(url))  # its traces, before qbench's or the patched client's
    return results


async def tier(url, users, rounds, **kw):
    if kw.get("on_round_complete") is None:  # hf-perftest's warm-up
        return await shipped_tier(url, users, rounds, **kw)
    if peer["hf_first"]:
        results = await hf_tier(url, users, rounds, kw)
        await qbench_tier(url, users)
    else:
        await qbench_tier(url, users)
        results = await hf_tier(url, users, rounds, kw)
    if peer["explain"] and users == 1:
        same = {k: kw[k] for k in ("fn_index", "data_template", "mode", "prompts")}
        found = {"one-client": await patched(url, rounds, same, False),
                 "one-client-gc-off": await patched(url, rounds, same, True)}
        with open(os.path.join(peer["out"], "explain.json"), "w") as f:
            json.dump(found, f)
    return results


async def fetch(url):
    return stash.pop() if stash else await shipped_fetch(url)


stash = []
runner.fetch_profiling_data = fetch
runner.run_httpx_tier = tier
sys.argv = ["hf-perftest", *sys.argv[1:]]
runner.main()
"""

SCENARIO = """
name: {app}
protocol: gradio
endpoint: {{api_name: {api}}}
fetch_outputs: false
payload:
  inputs:
    - {input}
load:
  {load}
  requests: {requests}
  timeout: 60
"""


@dataclass
class Figures:
    """One tool's figures for one app and tier (ms; None where not measured)."""

    client_p50: float
    client_p99: float
    phases: dict[str, float | None]  # p50 per phase: hf-perftest's from its traces, qbench's from its records
    traces: dict[str, float | None] = field(default_factory=dict)  # qbench's run as the app's traces saw it
    requests: int = 0
    join_p50: float | None = None  # qbench: send -> join answered (uploads included)
    cpu_ms: float | None = None  # the client's CPU per request (hf-perftest: its whole process)
    interval_s: float | None = None  # qbench: seconds between bursts (users > 1)


@dataclass
class Pair:
    """One app, one repeat: both tools' figures per tier (users), and --explain's patched client (1 user)."""

    hf: dict[int, Figures] = field(default_factory=dict)
    qbench: dict[int, Figures] = field(default_factory=dict)
    explain: dict[str, dict[str, float]] = field(default_factory=dict)  # variant -> {p50, p99}


@dataclass
class Row:
    app: str
    users: int
    hf: Figures
    qbench: Figures


# ---------------------------------------------------------------- the peer


def hf_python(env: Path) -> Path:
    return env / "bin" / "python"


def install_command(env: Path) -> str:
    uv = ROOT / ".venv" / "bin" / "uv"
    return (f"{uv} venv {env} && {uv} pip install --python {hf_python(env)} "
            f"hf-perftest=={HF_VERSION} gradio=={GRADIO_VERSION}")


def require_peer(env: Path) -> Path:
    """hf-perftest is what this benchmark compares with: without its venv there is nothing to report."""
    python = hf_python(env)
    problem = "" if python.exists() else f"{python} does not exist"
    if not problem:
        probe = "import hf_perftest.runner, gradio; print(gradio.__version__)"
        check = subprocess.run([str(python), "-c", probe],
                               capture_output=True, text=True, timeout=120)
        problem = "" if check.returncode == 0 else check.stderr.strip().splitlines()[-1]
    if problem:
        raise SystemExit(
            "error: bench/vs_hf_perftest.py compares qbench with hf-perftest, which is not installed in its "
            f"venv ({problem}); build it (or run with --setup): {install_command(env)}"
        )
    return python


def setup_peer(env: Path) -> None:
    done = subprocess.run(install_command(env), shell=True)
    if done.returncode != 0:
        raise SystemExit(f"error: building {env} failed (exit {done.returncode})")


def app_file(python: Path, name: str) -> Path:
    probe = "import hf_perftest, os; print(os.path.dirname(hf_perftest.__file__))"
    found = subprocess.run([str(python), "-c", probe],
                           capture_output=True, text=True, check=True)
    path = Path(found.stdout.strip()) / "apps" / f"{name}.py"
    if not path.is_file():
        raise SystemExit(f"error: hf-perftest has no sample app {name} ({path})")
    return path


def write_sample_inputs(work: Path) -> Path:
    """The sample image both tools upload (hf-perftest picks from sample-inputs/<component type>/)."""
    import numpy as np
    from PIL import Image

    folder = work / "sample-inputs" / "image"
    folder.mkdir(parents=True, exist_ok=True)
    y, x = np.mgrid[0:256, 0:256]
    noise = np.random.default_rng(0).integers(0, 16, (256, 256, 3), dtype=np.uint8)
    pixels = np.stack([x, y, (x + y) // 2], -1).astype(np.uint8) + noise
    Image.fromarray(pixels).save(folder / "sample.png")
    return folder


def run_hf_perftest(python: Path, app: Path, args: argparse.Namespace, work: Path, hf_first: bool) -> Pair:
    """hf-perftest's whole run (it launches the app), qbench run on its app beside each of its tiers
    (after it when `hf_first`, else before it)."""
    out = Path(tempfile.mkdtemp(prefix=f"{app.stem}-", dir=work))
    qbench = [PY, str(Path(__file__).resolve()), "--apps", app.stem, "--rounds", str(args.rounds),
              "--interval", str(args.interval), "--tier-out", str(out), "--qbench-dir", str(args.qbench_dir)]
    peer = {"qbench": qbench, "explain": args.explain, "out": str(out), "hf_first": hf_first}
    argv = [str(python), "-c", HF_DRIVER, "--app", str(app), "--tiers", args.tiers,
            "--requests-per-user", str(args.rounds), "--port", str(free_port()), "--output-dir", str(out)]
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "QBENCH_PEER": json.dumps(peer)}
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    summaries = sorted(out.glob("*/summary.json"))
    if done.returncode != 0 or not summaries:
        raise SystemExit(f"error: hf-perftest on {app.stem} failed (exit {done.returncode}):\n"
                         f"{(done.stdout + done.stderr)[-3000:]}")
    pair = Pair()
    for tier in json.loads(summaries[-1].read_text())["tiers"]:
        client, server, users = tier["client_summary"], tier["server_summary"], int(tier["tier"])
        if not client.get("success_count"):
            raise SystemExit(f"error: hf-perftest on {app.stem}, {users} user(s): no request succeeded")
        cpu = json.loads((out / f"hf-cpu-{users}.json").read_text())
        pair.hf[users] = Figures(client["p50"], client["p99"], trace_phases(server),
                                 requests=int(client["count"]), cpu_ms=cpu)
        pair.qbench[users] = Figures(**json.loads((out / f"qbench-{users}.json").read_text()))
    if (out / "explain.json").exists():
        pair.explain = json.loads((out / "explain.json").read_text())
    return pair


def trace_phases(summary: dict[str, Any]) -> dict[str, float | None]:
    """p50 per phase (ms) from Gradio's /profiling/summary, as hf-perftest reports it."""
    phases = summary.get("phases", {})
    found: dict[str, float | None] = {name: phases.get(name, {}).get("p50") for name, _ in PHASES}
    found["upload"] = summary.get("upload", {}).get("p50")  # separate traces, one per POST /upload
    return found


# ---------------------------------------------------------------- qbench


def endpoint(url: str) -> str:
    """The first named endpoint, the one hf-perftest picks."""
    named = httpx.get(f"{url}/gradio_api/info", timeout=10).json()["named_endpoints"]
    return str(next(iter(named))).lstrip("/")


def scenario(app: str, api: str, users: int, rounds: int, interval: float, images: Path) -> str:
    value = f"files: {{dir: {images}}}" if "image_to" in app else f'value: "{TEXT}"'
    load = "users: 1"
    if users > 1:
        load = f"burst: {users}\n  interval: {interval}\n  duration: {rounds * interval:g}"
    return SCENARIO.format(app=app, api=api, input=value, load=load, requests=users * rounds)


def run_qbench(url: str, text: str, out: Path, qbench_dir: Path = ROOT) -> Path:
    """`qbench run` of the package in `qbench_dir` (run from there: `python -m` puts it first)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.with_suffix(".yaml")
    path.write_text(text)
    argv = [PY, "-m", "qbench", "run", str(path), "--target", url, "--no-live", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(qbench_dir)}
    done = subprocess.run(argv, cwd=qbench_dir, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 3) or not (out / "records.parquet").exists():  # 3: an SLO missed
        raise SystemExit(f"error: qbench run {path} failed (exit {done.returncode}):\n"
                         f"{(done.stdout + done.stderr)[-3000:]}")
    return out / "records.parquet"


def profiling(url: str, action: str) -> Any:
    if action == "clear":
        return httpx.post(f"{url}/gradio_api/profiling/clear", timeout=10).json()
    return httpx.get(f"{url}/gradio_api/profiling/{action}", timeout=10).json()


def record_figures(records: Path) -> Figures:
    """Client p50/p99 from the records (latency from the send: a closed-loop tool's figure) and the
    server phases the records carry, when they carry them."""
    import numpy as np
    import pandas as pd

    frame = pd.read_parquet(records)
    frame = frame[(frame["outcome"] == "ok") & ~frame["warmup"]]
    if frame.empty:
        raise SystemExit(f"error: {records}: qbench completed no request")
    ms = (frame["completed_at_s"] - frame["sent_at_s"]).to_numpy() * 1000
    phases: dict[str, float | None] = {}
    for name, column in PHASES:
        values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
        phases[name] = float(np.percentile(values * 1000, 50)) if len(values) else None
    join = (frame["joined_at_s"] - frame["sent_at_s"]).dropna().to_numpy() * 1000
    return Figures(float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), phases, requests=len(frame),
                   join_p50=float(np.median(join)) if len(join) else None)


def qbench_tier(url: str, users: int, args: argparse.Namespace) -> None:
    """One tier of qbench on the app hf-perftest launched (called from its run, see HF_DRIVER): a warm-up
    first (2 users, 6 requests) on the first tier, the traces cleared, the run, their summary read."""
    out: Path = args.tier_out
    app, images = args.apps, out.parent / "sample-inputs" / "image"
    api = endpoint(url)
    if not (out / "q-warmup").exists():
        run_qbench(url, scenario(app, api, 2, 3, 0.05, images), out / "q-warmup" / "run", args.qbench_dir)
    interval = args.interval
    if users > 1 and (out / "qbench-1.json").exists():  # room for a whole burst at 1 user's pace, 3 times
        one_user = json.loads((out / "qbench-1.json").read_text())["client_p50"] / 1000
        interval = round(max(interval, 3 * users * one_user), 2)
    profiling(url, "clear")
    text = scenario(app, api, users, args.rounds, interval, images)
    records = run_qbench(url, text, out / f"q-{users}" / "run", args.qbench_dir)
    figures = record_figures(records)
    figures.traces = trace_phases(profiling(url, "summary"))
    summary = json.loads((records.parent / "summary.json").read_text())
    figures.cpu_ms = summary["generator"]["cpu_s"] / summary["sent"] * 1000
    figures.interval_s = interval if users > 1 else None
    (out / f"qbench-{users}.json").write_text(json.dumps(asdict(figures)))


# ---------------------------------------------------------------- table


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def median_figures(runs: list[Figures]) -> Figures:
    phases = {name: median([r.phases.get(name) for r in runs]) for name, _ in PHASES}
    traces = {name: median([r.traces.get(name) for r in runs]) for name, _ in PHASES}
    return Figures(statistics.median(r.client_p50 for r in runs),
                   statistics.median(r.client_p99 for r in runs),
                   phases, traces, sum(r.requests for r in runs), median([r.join_p50 for r in runs]),
                   median([r.cpu_ms for r in runs]), median([r.interval_s for r in runs]))


def agree(mine: float, theirs: float) -> bool:
    """Within 5% or 1 ms (the issue's bar for the per-phase p50s)."""
    return abs(mine - theirs) <= max(0.05 * abs(theirs), 1.0)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: list[Row]) -> str:
    """Client figures of both tools, then per phase: hf-perftest's figure (its events), qbench's (its
    records), their ratio, hf-perftest's way of reading the traces applied to qbench's own events, and
    whether qbench's records agree with that (5% or 1 ms)."""
    lines = [f"{'app':<15} {'users':>5}  {'figure (ms)':<16} {'hf-perftest':>11} {'qbench':>9} {'q/hf':>6}"
             f"   {'traces of qbench events':>23}  records vs those"]
    for row in rows:
        lines.append("")
        head = f"{row.app:<15} {row.users:>5}  "
        for label, mine, theirs in (("client p50", row.qbench.client_p50, row.hf.client_p50),
                                    ("client p99", row.qbench.client_p99, row.hf.client_p99),
                                    ("client CPU/req", row.qbench.cpu_ms, row.hf.cpu_ms)):
            lines.append(f"{head}{label:<16} {ms(theirs):>11} {ms(mine):>9} {ratio(mine, theirs)}")
            head = " " * len(head)
        theirs, mine = client_only(row.hf.client_p50, row.hf.phases), client_only(row.qbench.client_p50,
                                                                                  row.qbench.traces)
        lines.append(f"{head}{'client-only p50':<16} {ms(theirs):>11} {ms(mine):>9} {ratio(mine, theirs)}")
        for name, _ in PHASES:
            theirs, mine = row.hf.phases.get(name), row.qbench.phases.get(name)
            seen = row.qbench.traces.get(name)
            if theirs is None and seen is None:
                continue
            label = f"{name} p50"
            if mine is None:
                carried = any(v is not None for v in row.qbench.phases.values())
                why = "not in qbench's records" if carried else NO_PHASES
                lines.append(f"{head}{label:<16} {ms(theirs):>11} {why}  (traces: {ms(seen)})")
                continue
            verdict = "-" if seen is None else "agree" if agree(mine, seen) else "DIFFER"
            lines.append(f"{head}{label:<16} {ms(theirs):>11} {ms(mine):>9} {ratio(mine, theirs)}"
                         f"   {ms(seen):>23}  {verdict}")
        if row.qbench.interval_s is not None:
            lines.append(f"{head}(qbench's bursts every {row.qbench.interval_s:g} s)")
    return "\n".join(lines)


def client_only(client_p50: float, phases: dict[str, float | None]) -> float | None:
    """Client p50 less the server's queue wait and processing p50 (its traces): the client's side (its
    HTTP work, connections, uploads as the client sees them, message delivery), approximately."""
    wait, total = phases.get("queue_wait"), phases.get("total")
    return None if wait is None or total is None else client_p50 - wait - total


def ratio(mine: float | None, theirs: float | None) -> str:
    return f"{mine / theirs:>6.2f}" if mine is not None and theirs else f"{'-':>6}"


EXPLAINED = ("hf-perftest as shipped", "one httpx client", "+ GC paused", "qbench")
SERVER_SEEN = ("queue_wait", "preprocess", "postprocess", "total")


def explain_table(found: dict[str, dict[str, float | None]]) -> str:
    """Client p50 / p99 (ms), 1 user, one app process, per app (medians over the repeats), the client's
    CPU per request, the server's phases under each client (its traces); then the join's round trip and
    the stream's opening as hf-perftest's client (one httpx client, event hooks) and qbench (send ->
    join answered) see them."""
    lines = [f"{'client p50 / p99 (ms), 1 user':<30}" + "".join(f"{v:>24}" for v in EXPLAINED)]
    for app, figures in found.items():
        cells = [f"{ms(figures[v + ' p50'])} / {ms(figures[v + ' p99'])}" for v in EXPLAINED]
        lines.append(f"{app:<30}" + "".join(f"{c:>24}" for c in cells))
    lines.append(f"{'client CPU per request (ms)':<30}")
    for app, figures in found.items():
        lines.append(f"{app:<30}" + "".join(f"{ms(figures[v + ' cpu']):>24}" for v in EXPLAINED))
    for phase in SERVER_SEEN:
        lines.append(f"{'server ' + phase + ' p50 (traces)':<30}")
        for app, figures in found.items():
            lines.append(f"{app:<30}" + "".join(f"{ms(figures[f'{v} {phase}']):>24}" for v in EXPLAINED))
    lines += ["", f"{'p50 (ms), 1 user':<30}{'hf join (httpx)':>24}{'hf join->stream GET':>24}"
              f"{'hf stream headers':>24}{'qbench send->joined':>24}"]
    for app, figures in found.items():
        cells = [figures[k] for k in ("join_ms", "join_to_stream_ms", "stream_headers_ms", "qbench join")]
        lines.append(f"{app:<30}" + "".join(f"{ms(c):>24}" for c in cells))
    return "\n".join(lines)


def explain_figures(pair: Pair) -> dict[str, float | None]:
    hf, mine = pair.hf[1], pair.qbench[1]
    found: dict[str, float | None] = {
        "hf-perftest as shipped p50": hf.client_p50, "hf-perftest as shipped p99": hf.client_p99,
        "qbench p50": mine.client_p50, "qbench p99": mine.client_p99, "qbench join": mine.join_p50,
        "hf-perftest as shipped cpu": hf.cpu_ms, "qbench cpu": mine.cpu_ms}
    for variant, label in (("one-client", "one httpx client"), ("one-client-gc-off", "+ GC paused")):
        for figure in ("p50", "p99", "cpu"):
            found[f"{label} {figure}"] = pair.explain[variant]["cpu_ms" if figure == "cpu" else figure]
    for key in ("join_ms", "join_to_stream_ms", "stream_headers_ms"):
        found[key] = pair.explain["one-client"][key]
    for phase in SERVER_SEEN:  # what the app's traces saw of each client's requests
        found[f"hf-perftest as shipped {phase}"] = hf.phases.get(phase)
        found[f"qbench {phase}"] = mine.traces.get(phase)
        for variant, label in (("one-client", "one httpx client"), ("one-client-gc-off", "+ GC paused")):
            found[f"{label} {phase}"] = pair.explain[variant]["server"].get(phase)
    return found


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", default=",".join(APPS), help="hf-perftest sample apps (its apps/ folder)")
    parser.add_argument("--tiers", default="1,4",
                        help="users: 1 in a loop, more in bursts (hf-perftest's tiers)")
    parser.add_argument("--rounds", type=int, default=40, help="requests per user (hf-perftest's rounds)")
    parser.add_argument("--repeats", type=int, default=3, help="whole runs; the table shows medians")
    parser.add_argument("--interval", type=float, default=0.3, help="s between qbench's bursts (users > 1)")
    parser.add_argument("--explain", action="store_true", help="also time hf-perftest's client patched")
    parser.add_argument("--hf-env", type=Path, default=HF_ENV, help="hf-perftest's venv")
    parser.add_argument("--setup", action="store_true", help="build hf-perftest's venv first (uv, PyPI)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument("--qbench-dir", type=Path, default=ROOT,
                        help="a folder holding the qbench package to run (another checkout)")
    parser.add_argument("--qbench-tier", nargs=2, metavar=("URL", "USERS"), help=argparse.SUPPRESS)
    parser.add_argument("--tier-out", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.qbench_tier:  # called back from hf-perftest's run (HF_DRIVER)
        qbench_tier(args.qbench_tier[0], int(args.qbench_tier[1]), args)
        return 0
    if args.setup and not hf_python(args.hf_env).exists():
        setup_peer(args.hf_env)
    python = require_peer(args.hf_env)
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    tiers = [int(t) for t in args.tiers.split(",")]
    if args.explain and 1 not in tiers:
        raise SystemExit("error: --explain needs the 1-user tier in --tiers")
    work = Path(tempfile.mkdtemp(prefix="qbench-vs-hf-"))
    write_sample_inputs(work)
    pairs: dict[str, list[Pair]] = {app: [] for app in apps}
    started = time.monotonic()
    for repeat in range(args.repeats):
        for app in apps:
            hf_first = repeat % 2 == 1  # the server slows as it serves events (Gradio's analytics)
            pairs[app].append(run_hf_perftest(python, app_file(python, app), args, work, hf_first))
            print(f"repeat {repeat + 1}/{args.repeats} {app}: done ({time.monotonic() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    rows = [Row(app, users, median_figures([p.hf[users] for p in pairs[app]]),
                median_figures([p.qbench[users] for p in pairs[app]])) for app in apps for users in tiers]
    print(f"qbench vs hf-perftest {HF_VERSION} on its apps, Gradio {GRADIO_VERSION}, concurrency_limit 1, "
          f"{args.rounds} rounds, medians of {args.repeats} repeat(s); 1 user: closed loop, more: bursts")
    print(table(rows))
    explained = {app: [explain_figures(p) for p in found] for app, found in pairs.items() if args.explain}
    medians = {app: {k: median([f[k] for f in runs]) for k in runs[0]} for app, runs in explained.items()}
    if medians:
        print()
        print(explain_table(medians))
    if args.json is not None:
        raw = {app: [asdict(p) for p in found] for app, found in pairs.items()}
        figures = {"rows": [asdict(r) for r in rows], "explain": medians, "raw": raw}
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
