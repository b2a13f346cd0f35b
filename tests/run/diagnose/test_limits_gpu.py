"""Two real runs on an H100 whose limit is known (tests/run/fixtures/gpu-2026-11-26/README.md): 128
closed-loop users on the image preset at B 8 and B 32, the GPU 4-5% busy, the server process at 1.3 of 16
cores. The limit was the per-request work in the server's one Python process; qbench once said
"queue_limit: raise concurrency_limit or batch" (B 8) and "headroom: the server kept up" (B 32)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from qbench.report.build import build_report
from qbench.run.diagnose.limits import diagnose, host_cpus
from qbench.run.records.schema import read_records
from qbench.run.results.summary import summarize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-2026-11-26"


@pytest.mark.parametrize(("name", "gpu", "rate"), [("image-b8-cl1-bf16", "5%", "287.5"),
                                                   ("image-b32-cl1-bf16", "4%", "323.5")])
def test_a_real_gpu_run_names_per_request_work(name: str, gpu: str, rate: str) -> None:
    run = FIXTURES / name
    records = read_records(run)
    info = json.loads((run / "run.json").read_text())
    assert host_cpus(info["host"], info["target"]) == 16
    findings = diagnose(records, summarize(records, None), info["server"],
                        cpus=host_cpus(info["host"], info["target"]))
    assert [f.kind for f in findings] == ["usage", "per_request_work"], findings
    message = findings[1].message
    assert message.startswith("at its limit for 128 users (they waited ")
    assert "per-request work in the server process is the limit" in message
    # the GPU's busy share (NVML) against the server process's CPU: 1.3 cores, the busier resource
    assert (f"per-request work in the server process is the limit (at {rate} req/s, the GPU busy {gpu} of "
            "the run; the server process used 1.3 of the host's 16 cores)") in message
    assert "more concurrency or batching will not help" in message and "worker processes" in message
    said = json.loads((run / "summary.json").read_text())["diagnosis"]
    assert said[1]["kind"] in ("queue_limit", "headroom")  # what qbench said that day


def test_the_report_of_a_real_gpu_run_says_so(tmp_path: Path) -> None:
    """The report shows what the run's summary.json says (what qbench said that day); `--recompute`
    judges the records again with today's qbench."""
    run = shutil.copytree(FIXTURES / "image-b32-cl1-bf16", tmp_path / "run")
    that_day = build_report(run, tmp_path / "stored").markdown.read_text()
    assert "per_request_work" not in that_day and ("queue_limit" in that_day or "headroom" in that_day)
    markdown = build_report(run, tmp_path / "again", recompute=True).markdown.read_text()
    assert "per_request_work: at its limit for 128 users" in markdown
    assert "headroom" not in markdown and "queue_limit" not in markdown


def test_without_the_hosts_cores_the_process_is_named_in_cores_used() -> None:
    """A remote server's cores are unknown: the finding says what the process used, not of how many."""
    run = FIXTURES / "image-b32-cl1-bf16"
    records = read_records(run)
    server = json.loads((run / "run.json").read_text())["server"]
    usage, finding = diagnose(records, summarize(records, None), server)
    assert finding.kind == "per_request_work" and "the server process used 134% of a core" in finding.message


def test_report_recompute_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from qbench.cli import app

    run = shutil.copytree(FIXTURES / "image-b32-cl1-bf16", tmp_path / "run")
    out = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "r"), "--recompute"])
    assert out.exit_code == 0, out.output
    assert "per_request_work: at its limit for 128 users" in out.output
