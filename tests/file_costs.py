"""Rewrite tests/file_costs.tsv (seconds per test file, heaviest first) from a run's JUnit XML:

    PYTEST_ADDOPTS=--junitxml=/tmp/suite.xml make test && .venv/bin/python tests/file_costs.py /tmp/suite.xml

tests/conftest.py starts the heaviest files first, so that the suite's long end-to-end files do not end
it alone on one worker while the others sit idle."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

COSTS = Path(__file__).with_name("file_costs.tsv")


def file_costs(junit: Path) -> Counter[str]:
    """Seconds per test file (setup, call and teardown of each of its tests)."""
    costs: Counter[str] = Counter()
    for case in ET.parse(junit).iter("testcase"):
        costs[case.get("classname", "").replace(".", "/") + ".py"] += float(case.get("time") or 0)
    return costs


def read_costs(path: Path = COSTS) -> dict[str, float]:
    """The stored seconds per file ({} when the file is missing)."""
    if not path.exists():
        return {}
    rows = (line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {name: float(seconds) for seconds, name in rows}


def main(junit: str) -> None:
    costs = file_costs(Path(junit))
    lines = [f"{seconds:.1f}\t{name}" for name, seconds in costs.most_common() if seconds >= 0.5]
    COSTS.write_text("# seconds\ttest file (tests/file_costs.py writes it from a run's JUnit XML)\n"
                     + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
