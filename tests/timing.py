"""The suite's own clock: which test files take longest, so that the slowest start first.

`make test` runs files on several workers (`--dist loadfile`: a file stays on one worker, its module
fixtures shared). A worker that draws a 150 s file last keeps the run going alone, so the files start in
the order of the seconds they took (FILE_SECONDS, measured), unmeasured ones after. To measure again:

    QBENCH_TEST_CPU_LOG=/tmp/tests.tsv .venv/bin/python -m pytest -n 3 --dist loadfile
    .venv/bin/python -m tests.timing /tmp/tests.tsv      # rewrites tests/file_seconds.json

How many workers (`python -m tests.timing --workers`, what `make test` runs with unless PYTEST_WORKERS is
given): 6 on a quiet box that runs a reference loop at full speed, 3 on one slower per core or busy.
Six workers keep two cores busy (the suite waits on sleeping servers more than it computes) and halve a
quiet run; on a box already short of CPU they pile ten runnable processes on its cores, and tests that
time a server then read the box, not the server (a busy run at six failed 5 and 8 such tests, at three
0 to 4).

The log has one line per test: its CPU seconds (its worker's and the child processes it waited for), its
wall seconds and its node id: on a 2-core box the suite's time is as much waiting (load at a rate, a
server's sleeps) as CPU, and the log says which.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
LOOP = 2_000_000  # multiply-adds of the reference loop: ~0.095 s on the 2-core box the suite is tuned on
FULL_SPEED_S = 0.15  # at most this long: 6 workers (4 busy loops beside it, or a box 2.5 x slower: ~0.24 s)
WORKERS_FAST, WORKERS_SLOW = 6, 3


def log_line(cpu_s: float, wall_s: float, nodeid: str) -> str:
    return f"{cpu_s:.2f}\t{wall_s:.2f}\t{nodeid}\n"


def file_seconds(lines: Iterable[str]) -> dict[str, float]:
    """Wall seconds per test file from a log's lines, slowest first."""
    total: Counter[str] = Counter()
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3:
            total[parts[2].split("::")[0]] += float(parts[1])
    return {name: round(seconds, 1) for name, seconds in total.most_common()}


def known_seconds(path: Path = FILE_SECONDS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def slowest_first(nodeids: Sequence[str], seconds: dict[str, float]) -> list[int]:
    """The order (indices into `nodeids`) that starts the slowest files first; a file's own tests keep
    their order, and files never measured keep theirs, after the measured ones."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(nodeid.split("::")[0], i)

    def key(i: int) -> tuple[float, int, int]:
        name = nodeids[i].split("::")[0]
        return (-seconds.get(name, 0.0), first_seen[name], i)

    return sorted(range(len(nodeids)), key=key)


def reference_loop_s() -> tuple[float, float]:
    """(wall, CPU) seconds of LOOP pure-Python multiply-adds, the median of three each: the CPU time says
    how fast a core is, the wall time how much of one this process gets now."""
    walls, cpus = [], []
    for _ in range(3):
        wall, cpu, x = time.perf_counter(), time.process_time(), 0.0
        for _ in range(LOOP):
            x = x * 0.5 + 1.0
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return sorted(walls)[1], sorted(cpus)[1]


def others_running(samples: int = 5, every_s: float = 0.1) -> float:
    """How many other processes are running or ready to run, now: the median over `samples` reads of
    /proc/loadavg's runnable count, less this one (0 where there is no /proc: not Linux)."""
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return 0.0
        if i < samples - 1:
            time.sleep(every_s)
    return float(sorted(counts)[len(counts) // 2])


def workers(wall_s: float, cpu_s: float, others: float, cores: int) -> int:
    """WORKERS_FAST where a core is fast (the loop's CPU time), this process has one to itself (its wall
    time) and no more than half the cores are busy with other work now (a run of the loop can be lucky
    between busy processes); WORKERS_SLOW otherwise."""
    quiet = wall_s <= FULL_SPEED_S and cpu_s <= FULL_SPEED_S and others <= 0.5 * cores
    return WORKERS_FAST if quiet else WORKERS_SLOW


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["--workers"]:
        print(workers(*reference_loop_s(), others_running(), os.cpu_count() or 1))
        return 0
    if len(argv) != 1:
        print("usage: python -m tests.timing LOG  (a QBENCH_TEST_CPU_LOG file) | --workers", file=sys.stderr)
        return 2
    measured = file_seconds(Path(argv[0]).read_text().splitlines())
    FILE_SECONDS.write_text(json.dumps(measured, indent=0) + "\n")
    print(f"{FILE_SECONDS}: {len(measured)} files, {sum(measured.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
