"""`qbench run` exit codes: 0 ok, 2 bad scenario / target, 3 SLO violated."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from qbench.cli import app
from reference_server.settings import synthetic_settings
from reference_server.testing import serve_in_thread

SCENARIO = """\
endpoint: {{api_name: echo}}
payload: {{inputs: [{{value: hi}}]}}
load: {{burst: 5}}
slo: {{p95_latency_s: {limit}}}
"""


def test_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok, strict, bad = tmp_path / "ok.yaml", tmp_path / "strict.yaml", tmp_path / "bad.yaml"
    ok.write_text(SCENARIO.format(limit=30))
    strict.write_text(SCENARIO.format(limit=0.000001))
    bad.write_text("load: {burst: 0}\n")
    with serve_in_thread(synthetic_settings()) as server:
        args = ["--target", server.url, "--no-live"]
        result = runner.invoke(app, ["run", str(ok), *args, "--out", str(tmp_path / "a")])
        assert result.exit_code == 0, result.output
        assert "throughput" in result.output and (tmp_path / "a" / "records.parquet").exists()
        result = runner.invoke(app, ["run", str(strict), *args, "--out", str(tmp_path / "b")])
        assert result.exit_code == 3 and "SLO violated: p95_latency_s (actual " in result.output
        assert "limit 1e-06)" in result.output  # figures rounded to 4 significant digits
        result = runner.invoke(app, ["run", str(bad), *args])
        assert result.exit_code == 2 and "key 'load.burst'" in result.output
        result = runner.invoke(app, ["run", str(ok), "--target", "http://127.0.0.1:9", "--no-live"])
        assert result.exit_code == 2 and "cannot connect" in result.output
    result = runner.invoke(app, ["run", str(ok), "--target", "127.0.0.1:9", "--no-live"])
    assert result.exit_code == 2 and "target '127.0.0.1:9': expected an http(s) URL" in result.output


def test_an_slo_without_a_figure_gives_its_reason(tmp_path: Path) -> None:
    """Half the requests fail, so the p95 falls among failures: the message says so instead of a number."""
    path = tmp_path / "flaky.yaml"
    path.write_text(SCENARIO.format(limit=30).replace("api_name: echo", "api_name: flaky"))
    flaky = {"api_name": "flaky", "workload": "fail", "params": {"rate": 0.5, "seed": 1}}
    with serve_in_thread(synthetic_settings(functions=[flaky])) as server:
        args = ["run", str(path), "--target", server.url, "--no-live", "--out", str(tmp_path / "r")]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "SLO violated: p95_latency_s (" in result.output and "failed" in result.output
    assert "actual none" not in result.output
