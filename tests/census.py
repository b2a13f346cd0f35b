"""Where the suite's CPU goes, process by process: every process's CPU as the kernel accounted it at its
exit (BSD process accounting, `accton`, package `acct`; root only), named by its command line from `ps`
snapshots taken while it ran. Unlike QBENCH_TEST_CPU_LOG (tests/timing.py), which sees only the children
a test waited for, it counts every server, app, Ray daemon and pytest worker, however it ended:

    touch /tmp/pacct && accton /tmp/pacct
    (while :; do ps -eo pid=,ppid=,args= >> /tmp/ps.log; sleep 0.5; done) & make test; kill %1
    accton off && dump-acct /tmp/pacct > /tmp/acct.txt
    .venv/bin/python -m tests.census /tmp/acct.txt /tmp/ps.log   # CPU seconds by kind, the top processes

A process that lived under half a second may have no command line (it is counted under its accounting
name, `python`, `ps`).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    name: str  # the accounting name (the command's first 15 characters)
    cpu_s: float  # user + system
    wall_s: float
    pid: int


#: (a pattern of the command line, the kind), the first match wins
KINDS: tuple[tuple[str, str], ...] = (
    (r"import sys;exec\(eval", "pytest worker"),
    (r"-m pytest", "pytest"),
    (r"-m reference_server", "reference server"),
    (r"-m qbench (\w+)", r"qbench \1"),
    (r"ray/|raylet|gcs_server", "Ray"),
    (r"bentoml", "BentoML"),
    (r"-m (mypy|pip|ruff|compileall)", r"\1"),
    (r"(\w+/[\w.-]+\.py)\b", r"script \1"),
)


def parse_accounting(text: str) -> list[Process]:
    """`dump-acct`'s lines (name|version|user|system|elapsed|uid|gid|memory|io|pid|ppid|...; times in
    ticks of 10 ms) as processes."""
    found = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 11:
            continue
        try:
            user, system, elapsed, pid = float(fields[2]), float(fields[3]), float(fields[4]), int(fields[9])
        except ValueError:
            continue
        found.append(Process(fields[0], (user + system) / 100, elapsed / 100, pid))
    return found


def command_lines(lines: Iterable[str]) -> dict[int, str]:
    """pid -> the longest command line `ps -eo pid=,ppid=,args=` showed for it (a process may exec)."""
    seen: dict[int, str] = {}
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit() and len(parts[2]) > len(seen.get(int(parts[0]), "")):
            seen[int(parts[0])] = parts[2].strip()
    return seen


def kind(args: str, name: str) -> str:
    """What a process was, from its command line (KINDS), else its accounting name."""
    for pattern, label in KINDS:
        match = re.search(pattern, args)
        if match:
            return match.expand(label)
    return name if not args else args.split()[0].rsplit("/", 1)[-1]


def census(processes: Sequence[Process], commands: dict[int, str]) -> Counter[str]:
    """CPU seconds by kind."""
    total: Counter[str] = Counter()
    for process in processes:
        total[kind(commands.get(process.pid, ""), process.name)] += process.cpu_s
    return total


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    processes = parse_accounting(Path(argv[0]).read_text(errors="replace"))
    commands = command_lines(Path(argv[1]).read_text(errors="replace").splitlines())
    by_kind = census(processes, commands)
    print(f"{sum(by_kind.values()):8.1f} s of CPU in {len(processes)} processes")
    for name, seconds in by_kind.most_common(30):
        print(f"{seconds:8.1f}  {name}")
    print("\nthe top processes (CPU s, wall s, command):")
    for process in sorted(processes, key=lambda p: -p.cpu_s)[:20]:
        print(f"{process.cpu_s:8.1f} {process.wall_s:7.1f}  {commands.get(process.pid, process.name)[:140]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
