"""`qbench capacity` against a reference server of known capacity, its report, its errors; a sweep whose
points are ranked by capacity.

The server: one `sleep` function of 100 ms with concurrency_limit 4, so 40 req/s at most. Constant
(not Poisson) arrivals keep the latency flat below 40 req/s and growing without bound above it: with
p95_latency_s <= 0.2 s (twice the service time) the knee is sharp and the answer lands near 40, never
above it (a probe above it is not steady).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.servers.server_process import free_port
from qbench.tune.sweep.command import run_sweep
from qbench.tune.sweep.config import CapacityOptions, SweepOptions, build_config
from reference_server.settings import parse_settings
from reference_server.testing import RunningServer, serve_in_thread
from tests.tune.conftest import write_scenario

SLEEP_4X100MS = {
    "functions": [
        {"api_name": "predict", "workload": "sleep", "params": {"base_ms": 100, "per_item_ms": 0},
         "concurrency_limit": 4}
    ]
}


def sleep_scenario(tmp_path: Path, slo: dict[str, float] | None = None) -> Path:
    scenario = {
        "name": "sleep4",
        "protocol": "gradio",
        "endpoint": {"api_name": "predict"},
        "payload": {"inputs": [{"text": {"words": [2, 3]}}]},
        "load": {"rate": 10, "arrival": "constant", "duration": 2, "timeout": 10},
        **({"slo": slo} if slo else {}),
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "sleep4.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def test_capacity_help() -> None:
    out = CliRunner().invoke(app, ["capacity", "--help"])
    assert out.exit_code == 0
    assert "--tolerance" in out.output and "--think-time" in out.output and "--slo" in out.output


def test_capacity_of_a_known_server_then_its_report(tmp_path: Path) -> None:
    path = sleep_scenario(tmp_path, {"p95_latency_s": 0.2})
    with serve_in_thread(parse_settings(SLEEP_4X100MS)) as server:
        out = CliRunner().invoke(app, [
            "capacity", str(path), "--target", server.url, "--duration", "2", "--tolerance", "10%",
            "--think-time", "10", "--out", str(tmp_path / "r"), "--max-duration", "4",
            "--confirm-duration", "4",
        ])
    assert out.exit_code == 0, out.output
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "capacity.json").read_text())
    result = data["result"]
    capacity, failing = result["capacity_rps"], result["failing_rate_rps"]
    # The ceiling is 40 req/s; probes this short (2-4 s, a 4 s confirmation: ~160 requests) cannot see an
    # overload under ~5 %, so the answer may sit that close above it (tests/tune/e2e/test_capacity_ceiling.py
    # holds the strict bound with longer probes). At least 30, unless the answer says the host was busy
    # (its load generator waited for a core; the in-thread server shares it: 21.7 beside six busy loops)
    busy = any(label == "host" for label, _ in data["answer"])
    assert capacity <= 40 * 1.05 and failing is not None and failing <= 55, result
    assert busy or 30 <= capacity and 32 <= failing, result
    assert result["converged"] and result["confirmed"]
    probes = result["probes"]
    assert probes[0]["kind"] == "estimate" and probes[0]["users"] == 32
    assert all((folder / p["run_dir"] / "records.parquet").exists() for p in probes)
    assert sum(p["kind"] == "rate" for p in probes) <= 10
    # then the confirmation, the overload and the run after it; and where the service time rose over the
    # search (a sleep server does not age, but a busy box stretched 104 ms to 115 ms once), a run at the
    # rate for now, which the answer says
    kinds = [p["kind"] for p in probes]
    tail = kinds[len(kinds) - 1 - kinds[::-1].index("confirm"):]  # from the last confirmation
    assert tail in (["confirm", "overload", "after"], ["confirm", "overload", "after", "now"]), kinds
    assert (tail[-1] == "now") == any(label == "now" for label, _ in data["answer"]), data["answer"]
    assert result["overload"]["advice"]
    after = next(p for p in probes if p["kind"] == "after")
    assert after["rate_rps"] == capacity and "after the burst: " in " ".join(out.output.split())
    passing = [p for p in probes if p["kind"] == "confirm" and p["passed"] and p["rate_rps"] == capacity]
    at = passing[-1]
    assert data["users"] == pytest.approx(capacity * (10 + at["mean_latency_s"]))
    assert "capacity" in out.output and "users clicking every 10 s" in out.output
    # one confirmation; two (different Poisson seeds) where a busy box's first run at the answer fell and
    # the same rate held again (as tests/tune/e2e/test_capacity_ceiling.py's hard ceiling allows)
    held = " ".join(out.output.split())
    assert ("held: for the whole 4 s confirmation" in held or "held: for each of 2 4 s confirmations" in held
            ) and "past it (x1.3)" in held, out.output

    report = CliRunner().invoke(app, ["report", str(folder)])
    assert report.exit_code == 0, report.output
    assert (folder / "charts" / "capacity_knee.png").stat().st_size > 10_000
    summary = (folder / "summary.md").read_text()
    assert "**capacity**" in summary and "| estimate |" in summary and "SLO first fails" in summary
    assert 'id="probes"' in (folder / "report.html").read_text()


def test_an_unreachable_target_or_no_slo_is_a_clear_exit_2(tmp_path: Path) -> None:
    path = sleep_scenario(tmp_path, {"p95_latency_s": 0.2})
    out = CliRunner().invoke(app, ["capacity", str(path), "--target", f"http://127.0.0.1:{free_port()}",
                                   "--out", str(tmp_path / "r")])
    assert out.exit_code == 2 and "cannot connect" in out.output
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("capacity.json"))
    no_slo = sleep_scenario(tmp_path / "b")
    out = CliRunner().invoke(app, ["capacity", str(no_slo), "--target", "http://127.0.0.1:9"])
    assert out.exit_code == 2 and "needs an SLO" in out.output
    bad = ["capacity", str(path), "--target", "http://127.0.0.1:9", "--tolerance", "0%"]
    out = CliRunner().invoke(app, bad)
    assert out.exit_code == 2 and "--tolerance" in out.output


def test_a_target_refusing_every_request_is_a_clear_exit_2_not_an_interruption(
    tmp_path: Path, echo_server: RunningServer
) -> None:
    # The server answers, but 404 to every request: the opening guard stops the estimate, and capacity
    # says why (exit 2, the error kind and its likely cause) instead of "interrupted" (exit 130).
    scenario = {"name": "nope", "protocol": "http",
                "endpoint": {"method": "POST", "path": "/predict/nope", "body": {"inputs": "$0"}},
                "payload": {"inputs": [{"text": {"words": [3, 8]}}]},
                "load": {"rate": 10, "duration": 2, "timeout": 5},
                "slo": {"p95_latency_s": 1}}
    path = tmp_path / "nope.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(app, ["capacity", str(path), "--target", echo_server.url, "--duration", "2",
                                   "--out", str(tmp_path / "r")])
    assert out.exit_code == 2, out.output
    assert "http_4xx" in out.output and "likely cause" in out.output and "interrupted" not in out.output


def test_sweep_objective_capacity_ranks_the_batched_configuration_first(tmp_path: Path) -> None:
    # At the scenario's 5 req/s both points keep up (same goodput; latency would pick the unbatched one,
    # fewer slots); by capacity, batches of 4 (90 ms per 4) serve far more than 1 per 60 ms.
    path = write_scenario(tmp_path, rate=5, duration=1.5, sweep={"capacity_trials": 4})
    options = SweepOptions(str(path), grid=["max_batch_size=1,4"], slo={"p95_latency_s": 0.3},
                           capacity=CapacityOptions(tolerance=0.2, duration=1.5),
                           out_root=str(tmp_path / "r"))
    config = build_config(options)
    assert config.constraints.objective == "capacity" and "open-loop rate" in config.objective_why
    result = run_sweep(config)
    by_id = {r.point_id: r for r in result.results}
    b1, b4 = by_id["b1"], by_id["b4"]
    assert b1.capacity_rps and b4.capacity_rps and b4.capacity_rps > 1.5 * b1.capacity_rps
    rec = json.loads((result.sweep_dir / "recommendation.json").read_text())
    assert rec["winner"]["point_id"] == "b4" and rec["objective"] == "capacity"
    assert "highest capacity" in rec["why"] and rec["objective_why"] == config.objective_why
    assert rec["capacity"]["capacity_rps"] == b4.capacity_rps and rec["capacity"]["probes"]
    point = json.loads((result.sweep_dir / "points" / "b4" / "point.json").read_text())
    assert point["capacity"]["probes"][0]["kind"] == "estimate"
    assert all(r.peak_rss_mb for r in result.results)  # memory is still measured per point
    latency = build_config(SweepOptions(str(path), grid=["max_batch_size=1,4"], objective="latency",
                                        out_root=str(tmp_path / "r")))
    assert latency.constraints.objective == "latency"


def test_capacity_of_a_real_gradio_app(tmp_path: Path) -> None:
    """A 4 x 400 ms queue as a real Gradio app (examples/gradio_app.py on the test env's Gradio): qbench
    capacity lands near its 10 req/s, never past what a confirmation can tell apart from it. The app
    sleeps rather than computes, so its ceiling is the sleeps' on any box: at 4 x 100 ms (40 req/s) a busy
    box's Gradio could not keep up with its own ceiling (confirmations stepped down from 36.7 to 14.1 req/s
    while the other workers' tests ran).

    The bound above: a 6 s confirmation at 10 req/s (60 requests) is judged steady unless its backlog grows
    by more than the steadiness margin (a quarter of the 10% tolerance), so an answer up to 2.5% past the
    ceiling can pass it (a fresh clone answered 10.01 req/s); the default 60 s confirmation, and
    tests/tune/e2e/test_capacity_ceiling.py's longer probes, resolve finer."""
    import sys

    from qbench.tune.servers.app_process import launch_command

    app_py = Path(__file__).resolve().parents[3] / "examples" / "gradio_app.py"
    command = f"{sys.executable} {app_py} --port {{port}} --concurrency-limit 4 --base-ms 400 --per-item-ms 0"
    path = sleep_scenario(tmp_path, {"p95_latency_s": 1.0})
    with launch_command(command, {}, work_dir=tmp_path / "app", ready_timeout_s=120) as handle:
        out = CliRunner().invoke(app, [
            "capacity", str(path), "--target", handle.base_url, "--duration", "4", "--tolerance", "10%",
            "--out", str(tmp_path / "r"), "--max-duration", "6", "--confirm-duration", "6", "--no-overload",
            "--estimate-users", "8",
        ])
    assert out.exit_code == 0, out.output
    (folder,) = (tmp_path / "r").iterdir()
    result = json.loads((folder / "capacity.json").read_text())["result"]
    assert 6 <= result["capacity_rps"] <= 10 * (1 + 0.1 / 4) and result["converged"], result
    assert result["failing_rate_rps"] is not None and result["failing_rate_rps"] <= 14, result
