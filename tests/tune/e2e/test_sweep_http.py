"""A sweep over plain HTTP (the pipeline pattern: POST /predict through the batching queue): batch size,
batch deadline and queue bound, in live and relaunch modes; overload shows up as queue_full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from qbench.report.build import build_report
from qbench.run.records.schema import read_records
from qbench.tune.sweep.command import SweepResult, run_sweep
from qbench.tune.sweep.config import SweepOptions, build_config

SERVER = {
    "functions": [{"api_name": "classify", "workload": "sleep", "params": {"base_ms": 50, "per_item_ms": 5},
                   "batch": True, "max_batch_size": 8, "batch_wait_ms": 1, "concurrency_limit": 1}],
    "queue": {"max_size": 32},
}


def sweep(tmp_path: Path, grid: list[str], rate: float = 40, route: str = "/predict/classify",
          requests: int | None = None, p95_s: float = 1.0, **options: Any) -> SweepResult:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "server.yaml").write_text(yaml.safe_dump(SERVER))
    scenario = {
        "name": "pipeline", "protocol": "http",
        "endpoint": {"method": "POST", "path": route, "body": {"inputs": "$0"}},
        "payload": {"inputs": [{"text": {"words": [3, 8]}}]},
        "load": {"rate": rate, "arrival": "poisson", "timeout": 10,
                 **({"requests": requests} if requests else {"duration": 2.5})},
        "slo": {"p95_latency_s": p95_s, "error_rate": 0.01},
        "sweep": {"server": {"config": "server.yaml"}, "capacity_trials": 0, "warmup": 0.3},
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    options = SweepOptions(str(path), grid=grid, out_root=str(tmp_path / "out"), **options)
    return run_sweep(build_config(options))


def failure_detail(result: SweepResult, point_id: str) -> str:
    """A point's reason, detail and server log tail: what a flaky failure needs to be understood."""
    point = json.loads((result.sweep_dir / "points" / point_id / "point.json").read_text())
    log = result.sweep_dir / "live-server" / "server.log"
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else "(no log)"
    return f"{point_id}: {point['status']}: {point['detail'] or point['reason']}\nserver log:\n{tail}"


def test_live_sweep_of_batching_and_queue_bound_over_plain_http(tmp_path: Path) -> None:
    # a bound of 128, not 32, for the points that must shed nothing: batches of 8 serve ~89/s, and on a
    # busy box a server stalled a fraction of a second had 32 waiting (3% shed at 40/s)
    # 160 requests at 40/s, p95 <= 2 s: one call at a time (18/s) falls 88 behind, its p95 near 4 s on any
    # box; batches of 8 serve 40/s at under half their ~89/s (a busy box's b8 reached p95 1.57 s, over
    # the 1 s this SLO was, and no point won)
    result = sweep(tmp_path, ["max_batch_size=1,8", "max_size=2,128"], live=True, requests=160, p95_s=2.0)
    by_id = {r.point_id: r for r in result.results}
    for point_id in ("b1-q2", "b8-q128"):  # these two must have run (a failure shows its detail here)
        assert by_id[point_id].status == "ok", failure_detail(result, point_id)
    # one 55 ms call at a time serves ~18/s: at 40/s batch 1 breaks the SLO with a long queue (stopped
    # as a runaway, or past 128 waiting) ...
    assert by_id["b1-q128"].status != "ok" or by_id["b1-q128"].slo_breaches
    # ... or, bounded at 2, sheds the excess at once as 503 queue_full
    shed = [r for r in read_records(result.sweep_dir / "points" / "b1-q2" / "records.parquet")
            if r.error_kind == "queue_full"]
    assert by_id["b1-q2"].status == "ok" and len(shed) > 10 and by_id["b1-q2"].error_rate > 0.1
    assert by_id["b8-q128"].status == "ok" and by_id["b8-q128"].error_rate == 0
    # one 55 ms call at a time serves at most 18.2/s whatever the box; batches of 8 only what the host lets
    # it (a busy box's b8 broke the 1 s SLO at p95 1.57 s, goodput 22/s, yet served 27/s against 16.7)
    assert by_id["b1-q2"].throughput_rps <= 1 / 0.055 + 0.5
    assert by_id["b8-q128"].throughput_rps > by_id["b1-q2"].throughput_rps
    rec = result.recommendation
    assert rec.winner is not None and rec.winner.knobs["max_batch_size"] == 8
    # the advice is the reference server's settings with the winner's knobs, not Gradio code
    assert rec.gradio_code == "" and rec.server_code_label.startswith("reference server settings")
    (fn,) = yaml.safe_load(rec.server_code)["functions"]
    assert (fn["api_name"], fn["max_batch_size"], fn["batch"]) == ("classify", 8, True)
    assert yaml.safe_load(rec.server_code)["queue"]["max_size"] == rec.winner.knobs["max_size"]
    build_report(result.sweep_dir)
    for name in ("summary.md", "report.html"):
        text = (result.sweep_dir / name).read_text()
        assert "reference server settings" in text and "demo.queue" not in text, name


def test_a_point_refusing_every_request_fails_with_the_reason_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # Every request 404s (no such function): each point's opening fails one way, so each point ends
    # "failed" with the error kind and its likely cause, and the sweep finishes (it is not an interrupt).
    result = sweep(tmp_path, ["max_batch_size=1,8"], route="/predict/nope", live=True)
    assert [r.status for r in result.results] == ["failed", "failed"]
    for r in result.results:
        assert "http_4xx" in r.reason and "likely cause" in r.reason, r.reason
    assert result.recommendation.winner is None


def test_relaunch_sweep_of_the_batch_deadline(tmp_path: Path) -> None:
    # light load (5 req/s, 20 requests a point): an idle worker holds a batch open for its deadline, so at
    # 150 ms a request that opens a batch (most of them: at 5 req/s another joins it 53% of the time) waits
    # 150 ms in the queue, and at 1 ms about 1 ms. Read on the server's own clock (its Server-Timing), which
    # a busy box's stalls of the client cannot stretch: at 1 ms the client's p50 was once 0.31 s
    result = sweep(tmp_path, ["batch_wait_ms=1,150"], rate=5, requests=20)
    assert [r.status for r in result.results] == ["ok", "ok"], [r.reason for r in result.results]
    short, long = (_median_queue_wait(result, r.point_id) for r in result.results)
    assert long >= 0.1 and short < long - 0.05, (short, long)


def _median_queue_wait(result: SweepResult, point_id: str) -> float:
    records = read_records(result.sweep_dir / "points" / point_id / "records.parquet")
    waits = sorted(r.server_queue_wait_s for r in records if r.ok and r.server_queue_wait_s is not None)
    assert len(waits) == sum(r.ok for r in records), "a request without the server's Server-Timing"
    return waits[len(waits) // 2]


def test_launch_mode_advice_is_the_apps_command_with_the_winners_knobs() -> None:
    from types import SimpleNamespace

    from qbench.tune.sweep.advice import server_advice
    from qbench.tune.values.result import PointResult

    winner = PointResult("b8", {"max_batch_size": 8}, "ok")
    config = SimpleNamespace(base_settings=None, api_name=None,
                             launch="python serve.py --port {port} --batch {max_batch_size}")
    code, label = server_advice(config, winner, None)  # type: ignore[arg-type]
    assert code == "python serve.py --port {port} --batch 8" and "your app's command" in label
    assert server_advice(SimpleNamespace(base_settings=None, launch=None), winner, None) == ("", "")  # type: ignore[arg-type]
    secret = {"functions": [{"api_name": "f", "workload": "echo"}], "admin_token": "adm-1",
              "auth": {"users": {"u": "pw-123"}, "tokens": ["tok-456"]}}
    config = SimpleNamespace(base_settings=secret, api_name=None)
    code, _ = server_advice(config, winner, None)  # type: ignore[arg-type]
    assert not any(s in code for s in ("adm-1", "pw-123", "tok-456"))
    assert "# auth: as in your settings" in code
