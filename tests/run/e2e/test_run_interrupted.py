"""A run killed mid-way (SIGINT / SIGTERM to a `qbench run` subprocess) or whose server dies still has
exactly one record per scheduled request."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.records.schema import read_parquet
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]
SCENARIO = """\
name: interrupted
endpoint: {api_name: work}
payload: {inputs: [{text: {words: [2, 4]}}]}
load: {rate: 20, duration: 20, timeout: 30}
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_run_keeps_one_record_per_scheduled_request(
    server_factory: Factory, tmp_path: Path, sig: signal.Signals
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "run"
    fn = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 300}, "concurrency_limit": 2}
    with server_factory(functions=[fn]) as server:
        cmd = [
            sys.executable,
            "-m",
            "qbench",
            "run",
            str(path),
            "--target",
            server.url,
            "--out",
            str(out),
            "--no-live",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_for_lines(out / "records.jsonl", 3, proc)
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, stderr.decode()
    records = read_parquet(out / "records.parquet")
    assert sorted(r.request_id for r in records) == list(range(400))
    kinds = {r.error_kind for r in records if not r.ok}
    assert "interrupted" in kinds and kinds <= {"interrupted"}
    assert sum(r.ok for r in records) >= 3
    assert json.loads((out / "run.json").read_text())["stop_kind"] == "interrupted"
    assert json.loads((out / "summary.json").read_text())["requests"] == 400


def test_server_dying_mid_run_is_recorded_not_a_crash(server_factory: Factory, tmp_path: Path) -> None:
    spec = scenario(
        endpoint={"api_name": "work"},
        payload={"inputs": [{"text": {"words": [2, 4]}}]},
        load={"rate": 20, "duration": 3, "timeout": 10, "drain": 2},
    )
    fn = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 200}, "concurrency_limit": 1}
    results: list[RunResult] = []
    with server_factory(functions=[fn]) as server:
        thread = threading.Thread(
            target=lambda: results.append(
                run_scenario(spec, target=server.url, out_dir=tmp_path / "r", live=False)
            )
        )
        thread.start()
        time.sleep(1.0)
    thread.join(timeout=60)
    assert results, "run_scenario did not return"
    records = results[0].records
    assert sorted(r.request_id for r in records) == list(range(60))
    kinds = results[0].summary.errors_by_kind
    assert kinds and set(kinds) <= {"connect", "stream_broken", "server_error", "deadline", "timeout"}
    assert all(r.completed_at_s is not None for r in records if r.sent_at_s is not None)


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"qbench run exited early: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never got {n} lines")
