"""qbench.tune.server_process: the one subprocess starter of the reference server."""

from __future__ import annotations

from pathlib import Path

from qbench.run.control import read_status
from qbench.tune.server_process import reference_server_process


def test_appended_log_extra_flags_and_a_clean_stop(tmp_path: Path) -> None:
    """A log that already holds an older server's ready line is read past it; `args` reach the command
    line; the process group is gone after the block."""
    log = tmp_path / "step.log"
    log.write_text("reference server ready on http://127.0.0.1:1\n")
    with reference_server_process("echo", args=["--max-size", "3"], log_path=log, work_dir=tmp_path) as h:
        assert h.base_url != "http://127.0.0.1:1"
        status = read_status(h.base_url)
        assert status is not None and status["settings"]["queue"]["max_size"] == 3
        process = h.process
    assert process is not None and process.poll() is not None
    assert log.read_text().count("reference server ready on") == 2
