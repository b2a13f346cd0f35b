"""The serving-ceiling benchmarks at reduced size on the CPU: bench/server_cost.py and gpu_all's part 3.

In a file of their own so that pytest-xdist (--dist loadfile) runs them beside tests/test_bench.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_bench import BENCH, load_bench


def test_server_cost_reduced_run_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The stand-in served by this checkout's server and a real Gradio app, in one run: every request
    completes, the CPU per request is measured and the server phases come back (the baseline commit's
    server and the front-end processes: gpu_all's part 3 below, which runs them)."""
    bench = load_bench("server_cost", monkeypatch)
    out = tmp_path / "rows.json"
    # each run sized in requests (--duration only its cap): 3 s windows failed on a busy box (load ~12),
    # the Gradio app's first requests (~230 ms of CPU each) finishing none inside its window (served 0.0);
    # 64 requests complete however busy the box, and the CPU goes to the servers, not to seconds of load
    argv = ["--quick", "--servers", "current,gradio", "--requests", "64", "--duration", "120", "--users", "8",
            "--variants", "8", "--decode-workers", "1", "--json", str(out)]
    assert bench.main(argv) == 0
    rows = {row["server"]: row for row in json.loads(out.read_text())}
    assert set(rows) == {"current", "gradio"}
    for row in rows.values():
        assert row["served_rps"] > 0 and row["main_ms"] > 0 and row["total_ms"] >= row["main_ms"]
    assert rows["current"]["others_ms"] > 0  # the decode processes did their share
    assert rows["gradio"]["loop_ms"] is None and rows["current"]["loop_ms"] > 0
    assert rows["current"]["phases_ms"]["forward"] >= 4.0  # the 5 ms ideal device, as the server timed it
    assert "gradio " in capsys.readouterr().out


def test_core_cost_runs_predictions_through_the_core_in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every prediction of the fake front end's users completes (the run exits otherwise), in batches,
    and the core's CPU per prediction is measured apart from the fake front end's."""
    bench = load_bench("core_cost", monkeypatch)
    assert bench.main(["--users", "4", "--predictions", "60", "--repeats", "1"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    core_ms, served, batch = float(row[1]), float(row[2]), float(row[3])
    assert core_ms > 0 and served > 0 and 1 <= batch <= 4


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_all_part3_dry_run_on_the_cpu(tmp_path: Path) -> None:
    """Part 3 of the GPU list (the serving ceiling) at toy size: the stand-in's cost against its baseline
    commit, gpu_serving's image rows, and the served rate at another batch size."""
    out = tmp_path / "out"
    argv = ["bash", str(BENCH / "gpu_all.sh"), "--part", "3", "--device", "cpu", "--dry-run",
            "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=840, cwd=BENCH.parent,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = (out / "gpu-all-part3-summary.md").read_text()
    for step in ("ceiling-cost", "ceiling-serving", "ceiling-batch"):
        assert f"| {step} | ok |" in summary, summary
    assert "current / baseline: main CPU per request x" in summary
    assert "ref fe0    image  float32" in summary and "ref fe2    image  float32" in summary
    assert "reference  image  bfloat16" in summary  # ceiling-batch: the settings' own front_ends
    assert "fronts " in summary  # ceiling-cost's row with front-end processes
    with tarfile.open(out / "gpu-all-part3.tar.gz") as tar:
        (name,) = [n for n in tar.getnames() if n.endswith("/server_cost.json")]
        rows = {row["server"]: row for row in json.loads(tar.extractfile(name).read())}  # type: ignore[union-attr]
    assert set(rows) == {"baseline", "current", "fronts"}  # every request of each completed
    for row in rows.values():
        assert row["served_rps"] > 0 and row["main_ms"] > 0 and row["total_ms"] >= row["main_ms"]
        assert row["loop_ms"] > 0
    assert rows["fronts"]["others_ms"] > 0 and rows["fronts"]["phases_ms"]["forward"] >= 4.0
