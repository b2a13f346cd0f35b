"""The suite's own clock: which test files take longest, so that the slowest start first.

`make test` runs files on several workers (`--dist loadfile`: a file stays on one worker, its module
fixtures shared). A worker that draws a 150 s file last keeps the run going alone, so the files start in
the order of the seconds they took (FILE_SECONDS, measured), unmeasured ones after. To measure again:

    QBENCH_TEST_CPU_LOG=/tmp/tests.tsv .venv/bin/python -m pytest -n 3 --dist loadfile
    .venv/bin/python -m tests.timing /tmp/tests.tsv      # rewrites tests/file_seconds.json
    .venv/bin/python -m tests.timing /tmp/tests.tsv --slowest 20   # prints docs/development.md's table

The log has one line per test: its CPU seconds (its worker's and the child processes it waited for), its
wall seconds, its node id and when it started (Unix time): on a 2-core box the suite's time is as much
waiting (load at a rate, a server's sleeps) as CPU, and the log says which.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def log_line(cpu_s: float, wall_s: float, nodeid: str, started: float | None = None) -> str:
    """A log's line: CPU and wall seconds, the node id, and when it started (Unix time: which tests ran
    beside which, when one failed)."""
    at = "" if started is None else f"\t{started:.2f}"
    return f"{cpu_s:.2f}\t{wall_s:.2f}\t{nodeid}{at}\n"


def entries(lines: Iterable[str]) -> Iterator[tuple[float, float, str]]:
    """(CPU seconds, wall seconds, node id) of each of a log's lines (others skipped)."""
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) in (3, 4):
            yield float(parts[0]), float(parts[1]), parts[2]


def file_seconds(lines: Iterable[str]) -> dict[str, float]:
    """Wall seconds per test file from a log's lines, slowest first."""
    total: Counter[str] = Counter()
    for _, wall, nodeid in entries(lines):
        total[nodeid.split("::")[0]] += wall
    return {name: round(seconds, 1) for name, seconds in total.most_common()}


def slowest_table(lines: Iterable[str], count: int) -> str:
    """The `count` slowest tests of a log by wall seconds, as a Markdown table (wall and CPU seconds)."""
    rows = sorted(entries(lines), key=lambda entry: -entry[1])
    body = [f"| {wall:.0f} | {cpu:.0f} | `{nodeid}` |" for cpu, wall, nodeid in rows[:count]]
    return "\n".join(["| s | CPU s | test |", "| --- | --- | --- |", *body]) + "\n"


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


def main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[1] == "--slowest" and argv[2].isdigit():
        print(slowest_table(Path(argv[0]).read_text().splitlines(), int(argv[2])), end="")
        return 0
    if len(argv) != 1:
        print("usage: python -m tests.timing LOG [--slowest N]  (LOG: a QBENCH_TEST_CPU_LOG file; --slowest: "
              "print its N slowest tests as a table, else rewrite tests/file_seconds.json)", file=sys.stderr)
        return 2
    measured = file_seconds(Path(argv[0]).read_text().splitlines())
    FILE_SECONDS.write_text(json.dumps(measured, indent=0) + "\n")
    print(f"{FILE_SECONDS}: {len(measured)} files, {sum(measured.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
