"""How long, and in how much memory, does qbench diagnose a big finished run from its columns?

The diagnosis part of the end of a run (qbench.run.pipeline._finish) and of `qbench report`: the
findings (qbench.run.diagnose.per_endpoint.diagnose_run: the limit, steadiness, the server's phases,
each endpoint of a mix), the app notes (qbench.run.diagnose.app_errors.explain) and the mix's
"alongside" comparison (qbench.run.results.alongside), read from a finished run folder's
records.parquet with `Columns.read` (a few columns in memory at a time) and its summary.json.

Each measurement runs in a fresh Python process (the imports included); the child prints each step's
seconds and its peak RSS after the step (VmHWM), the parent the child's whole peak RSS (`os.wait4`).
Reading a first column from Parquet costs ~50 MiB of its own (Arrow's reader and memory pool), the
imports ~70 MiB: the slope between two sizes is what the diagnosis needs per record.

Usage:
    .venv/bin/python bench/diagnose_columns.py RUN [RUN ...]            # e.g. /work/runs/400k-a
    .venv/bin/python bench/diagnose_columns.py RUN --repeat 3           # median of three fresh processes

RUN: a run folder (run.json, summary.json, records.parquet), such as bench/end_of_run.py leaves with
`--keep`. Prints one line per run: records, seconds per step and in all, peak RSS MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
STEPS = ("read", "diagnosis", "app_notes", "alongside")


def child(run: Path) -> dict[str, Any]:
    """The steps in this process: {"records": n, step: [seconds, VmHWM MiB after it]}."""
    sys.path.insert(0, str(ROOT))
    from qbench.run.diagnose.app_errors import explain
    from qbench.run.diagnose.limits import host_cpus
    from qbench.run.diagnose.per_endpoint import diagnose_run
    from qbench.run.records.columns import Columns
    from qbench.run.results.alongside import alongside
    from qbench.run.results.summary import Summary
    from qbench.run.scenario.schema import parse_scenario

    out: dict[str, Any] = {}
    info = json.loads((run / "run.json").read_text())
    summary = Summary.from_dict(json.loads((run / "summary.json").read_text()))
    scenario = parse_scenario(info["scenario"])
    server = info.get("server") or None
    t = time.perf_counter()

    def step(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        out[name] = [now - t, _hwm_mib()]
        t = now

    data = Columns.read(run)
    out["records"] = len(data)
    step("read")
    diagnose_run(data, summary, server, cpus=host_cpus(info.get("host"), info.get("target")))
    step("diagnosis")
    explain(data, scenario, server)
    step("app_notes")
    half = (scenario.load.duration or 0.0) / 2  # the mix as if embed had joined halfway
    alongside(data, {"chat": 0.0, "embed": half}, scenario.load.duration)
    step("alongside")
    return out


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(run: Path) -> tuple[dict[str, Any], float, float]:
    """(the child's steps, its wall seconds, its peak RSS MiB) in a fresh process."""
    argv = [sys.executable, __file__, str(run), "--child"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{run}: the child failed ({status})")
    return json.loads(output), time.perf_counter() - start, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes per run; medians printed")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.runs[0])))
        return
    print(f"{'run':24} {'records':>9} " + " ".join(f"{s + ' s':>12}" for s in STEPS)
          + f" {'process s':>10} {'peak MiB':>9}")
    for run in args.runs:
        trials = [measure(run) for _ in range(args.repeat)]
        steps = {s: statistics.median(t[0][s][0] for t in trials) for s in STEPS}
        wall = statistics.median(t[1] for t in trials)
        peak = statistics.median(t[2] for t in trials)
        print(f"{run.name:24} {trials[0][0]['records']:>9} " + " ".join(f"{steps[s]:>12.2f}" for s in STEPS)
              + f" {wall:>10.1f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
