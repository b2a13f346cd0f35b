"""`qbench run` exit codes: 0 ok, 2 bad scenario / target, 3 SLO violated."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_a_scenario_that_expects_another_limit_is_warned_from_the_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`expect: {concurrency_limit: 4}` against a server that runs one at a time: the run warns, from the
    run's columns (it read every record back as an object at the end of every `qbench run`, expect or
    not: ~1.3 KB a request)."""
    from qbench.run.pipeline import RunResult

    def no_objects(_: object) -> None:
        raise AssertionError("qbench run read every record back as an object")

    monkeypatch.setattr(RunResult, "records", property(no_objects))
    path = tmp_path / "expect.yaml"
    path.write_text("endpoint: {api_name: slow}\npayload: {inputs: [{value: hi}]}\n"
                    "load: {users: 4, duration: 2.5}\nexpect: {concurrency_limit: 4}\n")
    slow = {"api_name": "slow", "workload": "sleep", "params": {"base_ms": 100}, "concurrency_limit": 1}
    with serve_in_thread(synthetic_settings(functions=[slow])) as server:
        args = ["run", str(path), "--target", server.url, "--no-live", "--out", str(tmp_path / "r")]
        result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "warning: the scenario expects concurrency_limit=4, but requests waited in the queue while at " \
           "most 1 ran at once" in said
