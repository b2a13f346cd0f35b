"""tests/census.py: dump-acct's lines and ps snapshots -> CPU seconds by kind of process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.census import Process, census, command_lines, kind, main, parse_accounting

#: two lines as dump-acct prints them (times in 10 ms ticks), and one that is not
TAIL = "|     0|     0|  2476.00|     0.00|{}|   100|     |       0|__      |Fri Dec  4 20:34:09 2026"
DUMP = "\n".join([
    "python          |v3|   850.00|   120.00|  6900.00" + TAIL.format("   101"),
    "yes             |v3|  1000.00|     0.00|  1000.00" + TAIL.format("   102"),
    "not a line"])
PS = ["  101   100 /x/.venv/bin/python -m reference_server --config s.yaml --port 0",
      "  101   100 /x/.venv/bin/python -m reference_server",
      "  103   100 /x/.venv/bin/python /x/examples/capacity/gradio_chat_app.py --port 1",
      "garbage"]


def test_accounting_lines_are_processes_in_seconds() -> None:
    assert parse_accounting(DUMP) == [Process("python", 9.7, 69.0, 101), Process("yes", 10.0, 10.0, 102)]


def test_each_pid_keeps_its_longest_command_line() -> None:
    assert command_lines(PS) == {101: "/x/.venv/bin/python -m reference_server --config s.yaml --port 0",
                                 103: "/x/.venv/bin/python /x/examples/capacity/gradio_chat_app.py --port 1"}


def test_kinds_are_read_from_the_command_line_else_the_accounting_name() -> None:
    assert kind("python -u -c import sys;exec(eval(sys.stdin.readline()))", "python") == "pytest worker"
    assert kind("/v/bin/python -m qbench sweep a.yaml", "python") == "qbench sweep"
    assert kind("/v/bin/python -m mypy", "python") == "mypy"
    assert kind("/e/python /e/lib/ray/_private/workers/default_worker.py", "python") == "Ray"
    assert kind("/v/bin/python /r/examples/my_app.py --delay 0.1", "python") == "script examples/my_app.py"
    assert kind("/usr/sbin/nginx -c x.conf", "nginx") == "nginx"
    assert kind("", "ps") == "ps"


def test_the_census_adds_up_by_kind() -> None:
    found = census(parse_accounting(DUMP), command_lines(PS))
    assert found == {"reference server": 9.7, "yes": 10.0}


def test_the_documented_command_prints_the_census(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/development.md's `.venv/bin/python -m tests.census /tmp/acct.txt /tmp/ps.log`, on two files."""
    (tmp_path / "acct.txt").write_text(DUMP)
    (tmp_path / "ps.log").write_text("\n".join(PS))
    assert main([str(tmp_path / "acct.txt"), str(tmp_path / "ps.log")]) == 0
    out = capsys.readouterr().out
    assert "19.7 s of CPU in 2 processes" in out and "9.7  reference server" in out
    assert "-m reference_server --config s.yaml --port 0" in out
    assert main([]) == 2
