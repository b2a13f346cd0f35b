"""docs/tuning.md's `--search sim` sweep and `bench/tuning_quality.py` commands, run as written but at reduced
size (shorter probes; the benchmark on one workload with a 2-point grid and one search)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs.test_readme_capacity import REDUCED, ROOT, TUNING_DOC, readme_commands, run
from tests.test_bench import load_bench


def test_the_readme_sim_sweep_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (sweep,) = readme_commands("## Simulator search")
    assert sweep[sweep.index("--search") + 1] == "sim"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    output = run([*sweep, *REDUCED["sweep"], "--live"])
    assert "simulator search: predicted vs measured" in output
    (sweep_dir,) = (tmp_path / "reports").glob("sweep-*")
    rec = json.loads((sweep_dir / "recommendation.json").read_text())
    search = rec["search"]
    assert search["mode"] == "sim" and search["trials"] < search["grid_size"] == 12
    assert rec["winner"]["point_id"] in {row["point_id"] for row in search["predicted_vs_measured"]}
    assert all(row["predicted"]["capacity_rps"] is not None for row in search["predicted_vs_measured"]
               if "predicted" in row)


def test_the_readme_bench_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    text = TUNING_DOC.read_text(encoding="utf-8").split("## How good are the searches?", 1)[1]
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block
    lines = [line.split("#", 1)[0].split() for line in block.group(1).splitlines()]
    script = "bench/tuning_quality.py"
    assert [line[1:] for line in lines] == [[script], [script, "--quick"]]
    help_text = subprocess.run([sys.executable, str(ROOT / "bench/tuning_quality.py"), "--help"],
                               capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "--quick" in help_text
    bench = load_bench("tuning_quality", monkeypatch)
    tiny = dataclasses.replace(bench.WORKLOADS[0], quick_grid=["concurrency_limit=1", "max_batch_size=1,8"])
    monkeypatch.setattr(bench, "WORKLOADS", [tiny])
    quick_options = bench.SweepOptions

    def shorter(*args: Any, **kwargs: Any) -> object:
        """--quick's sweeps, shorter: 0.75 s runs and probes (their 0.3 s warm-up kept)."""
        kwargs.update(duration=0.75, capacity=dataclasses.replace(kwargs["capacity"], duration=0.75))
        return quick_options(*args, **kwargs)

    monkeypatch.setattr(bench, "SweepOptions", shorter)
    monkeypatch.chdir(tmp_path)
    # reduced: the exhaustive grid and one search (the table's loop runs smart and model the same way,
    # and tests/tune/test_search_*.py run those searches themselves)
    bench.main(["--quick", "--out", str(tmp_path / "tq"), "--searches", "sim"])
    (workload,) = (tmp_path / "tq").iterdir()
    assert len(list((workload / "reports").glob("sweep-*"))) == 2  # grid, sim
    grid_line = _table_line(capsys.readouterr().out, "grid")
    # --reuse-grid: the searches again against the kept exhaustive sweep (no new grid sweep)
    bench.main(["--quick", "--out", str(tmp_path / "tq"), "--reuse-grid", "--searches", "sim"])
    output = capsys.readouterr().out
    assert len(list((workload / "reports").glob("sweep-*"))) == 3  # + sim only
    assert _table_line(output, "grid").split()[:5] == grid_line.split()[:5]  # same optimum, same capacity
    assert _table_line(output, "sim") and not _table_line(output, "smart")
    assert "repeatability: " in output  # the same point's capacity across the table's sweeps
    with pytest.raises(SystemExit) as exit_info:  # a misspelt name is an error, not an empty table
        bench.main(["--out", str(tmp_path / "tq"), "--table", "--workloads", "tiny-model"])
    assert exit_info.value.code == 2 and "unknown tiny-model" in capsys.readouterr().err


def _table_line(output: str, search: str) -> str:
    return next((line for line in output.splitlines() if f" {search} " in f" {line} "), "")
