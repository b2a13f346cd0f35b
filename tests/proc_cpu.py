"""Where the suite's CPU goes, process by process (Linux process accounting, as root).

tests/timing.py charges each test its worker's CPU and the children it waited for; a server a session
fixture starts, or one killed rather than waited for, is missed or charged to whoever reaps it. This
counts every process that exits: the kernel's accounting file gives each one's CPU, and a `.pth` file
in each virtualenv logs every Python start's command line, so the two join by pid and start time.

    apt-get install acct                                  # accton, dump-acct
    .venv/bin/python -m tests.proc_cpu install .venv      # and each ~/.cache/qbench/gradio-envs/*/
    touch /tmp/pacct && accton /tmp/pacct
    QBENCH_PROC_START_LOG=/tmp/starts make test            # or test-busy
    accton off
    .venv/bin/python -m tests.proc_cpu report /tmp/pacct /tmp/starts
    .venv/bin/python -m tests.proc_cpu uninstall .venv

The report sums CPU seconds by command line (temporary paths and numbers folded), the largest first.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

MODULE = "_qbench_proc_start"
SOURCE = '''import os, time
_LOG = os.environ.get("QBENCH_PROC_START_LOG")
if _LOG:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmd = f.read().replace(bytes(1), b" ").decode(errors="replace")[:300]
        with open(_LOG, "a") as f:
            f.write(f"{time.time():.2f}\\t{os.getpid()}\\t{cmd}\\n")
    except OSError:
        pass
'''


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SystemExit(f"{venv}: no lib/python3*/site-packages")
    return found[0]


def install(venv: Path) -> None:
    target = site_packages(venv)
    (target / f"{MODULE}.py").write_text(SOURCE, encoding="utf-8")
    (target / f"{MODULE}.pth").write_text(f"import {MODULE}\n", encoding="utf-8")


def uninstall(venv: Path) -> None:
    for suffix in (".py", ".pth"):
        (site_packages(venv) / f"{MODULE}{suffix}").unlink(missing_ok=True)


def fold(command: str) -> str:
    """A command line with its temporary paths, its interpreter's path and its numbers folded."""
    folded = re.sub(r"/tmp/\S+", "TMP", command)
    folded = re.sub(r"\S*/bin/python3?(\.\d+)?\b", "python", folded)
    return re.sub(r"\b\d{2,}\b", "N", folded)[:110]


def report(pacct: Path, starts: Path) -> list[tuple[float, int, str]]:
    """(CPU seconds, processes, command) by folded command line, the largest first."""
    started: dict[int, list[tuple[float, str]]] = {}
    for line in starts.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3:
            started.setdefault(int(parts[1]), []).append((float(parts[0]), parts[2]))
    dump = subprocess.run(["dump-acct", str(pacct)], capture_output=True, text=True, check=True).stdout
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for line in dump.splitlines():
        f = [x.strip() for x in line.split("|")]
        comm, ticks, pid = f[0], float(f[2]) + float(f[3]), int(f[9])
        began = datetime.strptime(f[14], "%a %b %d %H:%M:%S %Y").timestamp()
        near = sorted((abs(at - began - 0.5), command) for at, command in started.get(pid, [])
                      if abs(at - began - 0.5) < 2)  # pids wrap: the start nearest the process's
        key = fold(near[0][1]) if near else comm
        cpu[key] += ticks / 100
        count[key] += 1
    return sorted(((seconds, count[key], key) for key, seconds in cpu.items()), reverse=True)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] in ("install", "uninstall"):
        (install if argv[0] == "install" else uninstall)(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "report":
        rows = report(Path(argv[1]), Path(argv[2]))
        print(f"processes {sum(n for _, n, _ in rows)}, CPU {sum(s for s, _, _ in rows):.0f} s")
        for seconds, n, command in rows[:45]:
            print(f"{seconds:8.1f} {n:5d}  {command}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
