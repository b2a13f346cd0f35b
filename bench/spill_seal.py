"""How much does writing records.parquet during a run cost, and what is left of it at the end?

Two measurements (issue 47, "A day of load in constant memory"):

    seal    A big run's records as the load generator now leaves them: a Parquet spill in the order they
            finished (each 50,000-record chunk of a finished run's records.parquet sorted by completion,
            as bench/end_of_run.py generates them; `--copies K`: K copies end to end, request ids
            shifted, so 400 k records make 3.6 M), written as the generator writes it (batches of
            `--batch` records, a tick's worth, as the lines records.jsonl got; the microseconds per
            record on the event loop and in the spill's thread are printed: the cost moved into the
            run). Then, in a fresh process,
            `seal` (qbench.run.records.spill) turns the spill into records.parquet: its seconds and
            peak RSS (that child's VmHWM) are the end of run's share of writing the records.
    live    `qbench run` of a plain-HTTP scenario (scenarios/http.yaml, `--rate`, `--duration`) against
            a reference server (`qbench serve --preset echo`, started here), once per `--code` folder
            (the qbench checkout whose code runs: e.g. the main checkout before a change and a
            worktree after it): the driver's peak RSS during the load (VmRSS sampled every 0.25 s
            until the last record was written), its peak overall (ru_maxrss), and the end of run's
            seconds (the process's exit minus the last append to records.jsonl).

Usage:
    .venv/bin/python bench/spill_seal.py seal --run /work/runs/400k-a --copies 1 9
    .venv/bin/python bench/spill_seal.py live --rate 600 --duration 60 --code /work/main --code .
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHUNK = 50_000  # bench/end_of_run.py's generator sorts each chunk of this many by completion


# ---------------------------------------------------------------- seal


def make_spill(run: Path, folder: Path, copies: int, batch: int) -> dict[str, float]:
    """The spill of `copies` copies of `run`'s records, in finishing order; what the spill costs the
    run per record: the event loop's share (the lines records.jsonl got handed over, in batches of
    `batch`) and its thread's (lines parsed into a row group), timed on the first 100,000 records."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qbench.run.records.schema import read_parquet
    from qbench.run.records.spill import RecordSpill, lines_table

    source = pq.ParquetFile(run / "records.parquet")
    n = source.metadata.num_rows
    loop_s, thread_s, timed = 0.0, 0.0, 0
    with RecordSpill(folder) as spill:
        for copy in range(copies):
            for first in range(0, n, CHUNK):
                table = _chunk(source, first, min(CHUNK, n - first))
                ids = pa.compute.add(table.column("request_id"), copy * n)
                table = table.set_column(table.schema.get_field_index("request_id"), "request_id", ids)
                if copy == 0 and first < 2 * CHUNK:  # as the generator hands them over: records.jsonl lines
                    records = _records(table, folder, read_parquet)
                    for k in range(0, len(records), batch):
                        data = b"".join(orjson.dumps(r) + b"\n" for r in records[k:k + batch])
                        start = time.perf_counter()
                        spill.write_lines(data, len(records[k:k + batch]))
                        loop_s += time.perf_counter() - start
                    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
                    start = time.perf_counter()
                    lines_table(data)
                    thread_s += time.perf_counter() - start
                    timed += len(records)
                else:
                    for k in range(0, table.num_rows, batch):
                        spill.write_table(table.slice(k, batch))
    return {"records": copies * n, "loop_us_per_record": 1e6 * loop_s / max(timed, 1),
            "thread_us_per_record": 1e6 * thread_s / max(timed, 1)}


def _chunk(source: Any, first: int, n: int) -> Any:
    """Rows first..first+n-1 of a records.parquet, sorted as they finished (completion, else intended)."""
    import pyarrow as pa

    table = source.read().slice(first, n) if source.metadata.num_rows <= CHUNK else _rows(source, first, n)
    done = table.column("completed_at_s").to_numpy(zero_copy_only=False)
    intended = table.column("intended_at_s").to_numpy(zero_copy_only=False)
    key = np.where(np.isnan(done), intended, done)
    return table.take(pa.array(np.argsort(key, kind="stable")))


def _rows(source: Any, first: int, n: int) -> Any:
    import pyarrow as pa

    pieces, start = [], 0
    for g in range(source.metadata.num_row_groups):
        size = source.metadata.row_group(g).num_rows
        if start + size > first and start < first + n:
            group = source.read_row_group(g)
            lo, hi = max(first - start, 0), min(first + n - start, size)
            pieces.append(group.slice(lo, hi - lo))
        start += size
    return pa.concat_tables(pieces)


def _records(table: Any, folder: Path, read_parquet: Any) -> Any:
    import pyarrow.parquet as pq

    tmp = folder / "chunk.parquet.tmp"
    pq.write_table(table, tmp)
    records = read_parquet(tmp)
    tmp.unlink()
    return records


def sealed(folder: Path) -> dict[str, float]:
    """`seal` in a fresh process: its seconds and that child's peak RSS (VmHWM, MiB: read in the child,
    as ru_maxrss after a fork counts the forking parent's pages)."""
    code = ("import sys, time; from pathlib import Path; "
            "from qbench.run.records.spill import RowOrder, seal; "
            "t = time.perf_counter(); seal(Path(sys.argv[1]), RowOrder()); s = time.perf_counter() - t; "
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]; "
            "print(s, int(hwm) / 1024)")
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    if done.returncode != 0:
        raise SystemExit(f"seal failed: {done.stderr[-2000:]}")
    seconds, peak = done.stdout.split()
    return {"seal_s": float(seconds), "seal_peak_mib": float(peak)}


def seal_bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for copies in args.copies:
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            folder = Path(tmp)
            row: dict[str, Any] = make_spill(args.run, folder, copies, args.batch)
            row |= sealed(folder)
            row["parquet_mib"] = (folder / "records.parquet").stat().st_size / 2**20
            if args.keep is not None:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.move(folder / "records.parquet", args.keep / f"records-{copies}.parquet")
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


# ---------------------------------------------------------------- live


def serve(port: int, code: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "qbench", "serve", "--preset", "echo", "--port", str(port)]
    server = subprocess.Popen(cmd, cwd=code, env={**os.environ, "PYTHONPATH": str(code)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/config", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the reference server did not start")


def live_run(code: Path, url: str, rate: float, duration: float, out: Path) -> dict[str, Any]:
    """One `qbench run` with `code`'s qbench: its driver's memory and its end of run."""
    cmd = [sys.executable, "-m", "qbench", "run", str(ROOT / "scenarios" / "http.yaml"), "--target", url,
           "--out", str(out), "--no-live", "--set", f"load.rate={rate}", "--set", f"load.duration={duration}",
           "--set", "load.max_connections=200"]
    child = subprocess.Popen(cmd, cwd=code, env={**os.environ, "PYTHONPATH": str(code)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples: list[tuple[float, float]] = []  # (time, VmRSS MiB)
    stop = threading.Event()

    def sample() -> None:
        status = Path(f"/proc/{child.pid}/status")
        while not stop.is_set():
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        samples.append((time.time(), int(line.split()[1]) / 1024))
            except OSError:
                return
            time.sleep(0.25)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, status, usage = os.wait4(child.pid, 0)
    ended = time.time()
    stop.set()
    thread.join()
    if not (out / "summary.json").exists():  # an SLO missed still writes the run (exit code 2)
        raise SystemExit(f"qbench run failed: {child.stderr.read().decode()[-2000:] if child.stderr else ''}")
    last_record = (out / "records.jsonl").stat().st_mtime
    summary = json.loads((out / "summary.json").read_text())
    load = [mib for t, mib in samples if t <= last_record]
    return {
        "code": str(code), "exit": os.waitstatus_to_exitcode(status), "records": summary["requests"],
        "ok": summary["completed_ok"], "throughput_rps": summary.get("throughput_rps"),
        "p99_send_lag_s": summary.get("latency", {}).get("send_lag_s", {}).get("p99"),
        "load_peak_rss_mib": max(load, default=float("nan")),
        "peak_rss_mib": usage.ru_maxrss / 1024, "end_of_run_s": ended - last_record,
    }


def live_bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    from qbench.tune.servers.server_process import free_port

    port = free_port()
    server = serve(port, ROOT)
    rows = []
    try:
        for repeat in range(args.repeat):
            for code in args.code:
                with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
                    row = live_run(code.resolve(), f"http://127.0.0.1:{port}", args.rate, args.duration,
                                   Path(tmp) / "run")
                row["repeat"] = repeat
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    seal = sub.add_parser("seal", help="records.parquet sealed from a big spill")
    seal.add_argument("--run", type=Path, required=True, help="a finished run folder (records.parquet)")
    seal.add_argument("--copies", type=int, nargs="+", default=[1])
    seal.add_argument("--batch", type=int, default=250, help="records a hand-over (a tick's worth)")
    seal.add_argument("--tmp", type=Path, default=None, help="where the spill is made (default: TMPDIR)")
    seal.add_argument("--keep", type=Path, default=None, help="keep each sealed records.parquet here")
    live = sub.add_parser("live", help="a plain-HTTP run's driver memory and end of run")
    live.add_argument("--rate", type=float, default=500)
    live.add_argument("--duration", type=float, default=60)
    live.add_argument("--code", type=Path, action="append", default=None,
                      help="a qbench checkout to run (repeat; default: this one)")
    live.add_argument("--repeat", type=int, default=1)
    live.add_argument("--tmp", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.what == "seal":
        seal_bench(args)
    else:
        args.code = args.code or [ROOT]
        live_bench(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
