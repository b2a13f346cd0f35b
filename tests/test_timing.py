"""The suite's own ordering (tests/timing.py): the slowest files start first, each file's tests in their
own order, unmeasured files after the measured ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timing import (
    file_seconds,
    known_seconds,
    log_line,
    main,
    slowest_first,
)


def test_slowest_files_first_each_in_its_own_order() -> None:
    nodeids = ["a.py::t1", "a.py::t2", "b.py::t1", "new.py::t1", "c.py::t1", "b.py::t2"]
    seconds = {"a.py": 5.0, "b.py": 40.0, "c.py": 10.0}
    order = [nodeids[i] for i in slowest_first(nodeids, seconds)]
    assert order == ["b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2", "new.py::t1"]


def test_a_log_sums_each_files_wall_seconds(tmp_path: Path) -> None:
    lines = [log_line(0.5, 2.0, "a.py::t1", 1764748800.25), log_line(0.1, 1.25, "a.py::t2[x]"),
             log_line(3.0, 4.0, "b.py::t")]  # a line with its start time, lines without (older logs)
    assert lines[0] == "0.50\t2.00\ta.py::t1\t1764748800.25\n"
    assert file_seconds("".join(lines).splitlines()) == {"b.py": 4.0, "a.py": 3.2}  # 3.25, rounded half-even
    path = tmp_path / "seconds.json"
    path.write_text('{"b.py": 4.0}')
    assert known_seconds(path) == {"b.py": 4.0} and known_seconds(tmp_path / "absent.json") == {}


def test_the_committed_times_name_files_that_exist() -> None:
    root = Path(__file__).parent.parent
    missing = [name for name in known_seconds() if not (root / name).is_file()]
    assert known_seconds() and not missing, missing



def test_the_documented_command_prints_the_slowest_tests(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """docs/development.md's `.venv/bin/python -m tests.timing /tmp/tests.tsv --slowest 20`: slowest by wall
    first, wall and CPU seconds rounded, lines of older logs (no start time) read too."""
    log = tmp_path / "tests.tsv"
    log.write_text(log_line(0.5, 2.0, "a.py::t1", 1764748800.25) + log_line(9.4, 30.6, "b.py::t[x]")
                   + log_line(0.0, 0.1, "c.py::t") + "not a line\n")
    assert main([str(log), "--slowest", "2"]) == 0
    table = "| s | CPU s | test |\n| --- | --- | --- |\n| 31 | 9 | `b.py::t[x]` |\n| 2 | 0 | `a.py::t1` |\n"
    assert capsys.readouterr().out == table
    assert main([str(log), "--slowest"]) == 2 and "usage" in capsys.readouterr().err
