"""End-to-end `run_scenario` against the reference server in a thread."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from qbench.report.build import build_report
from qbench.run.load.executor import plan_order
from qbench.run.pipeline import check_schedule, run_scenario
from qbench.run.records import spill as record_spill
from qbench.run.records.schema import read_jsonl, read_parquet, read_records, write_parquet
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

ROOT = Path(__file__).resolve().parents[2]
Factory = Callable[..., AbstractContextManager[RunningServer]]


def sleep_fn(ms: float, **extra: Any) -> dict[str, Any]:
    return {"api_name": "work", "workload": "sleep", "params": {"base_ms": ms}, **extra}


def text_scenario(load: dict[str, Any], **extra: Any) -> Any:
    return scenario(
        endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [2, 5]}}]}, load=load, **extra
    )


def test_rate_run_records_every_phase_and_writes_the_run_dir(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"rate": 40, "duration": 1, "timeout": 10}, slo={"p95_latency_s": 5})
    with server_factory(functions=[sleep_fn(20, concurrency_limit=4)]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert len(records) == 40 and sorted(r.request_id for r in records) == list(range(40))
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    for r in records:
        assert r.intended_at_s <= r.sent_at_s <= r.joined_at_s <= r.started_at_s <= r.completed_at_s  # type: ignore[operator]
        assert r.estimation_at_s is not None and r.event_id and r.endpoint == "work"
    assert all(r.server_duration_s is not None and r.server_duration_s >= 0.019 for r in records)
    assert 0.0 <= result.summary.phase("service_s").p50 < 1.0  # type: ignore[operator]
    assert result.summary.slo_passed
    run_dir = result.run_dir
    assert len(read_parquet(run_dir / "records.parquet")) == 40
    assert len(read_jsonl(run_dir / "records.jsonl")) == 40
    info = json.loads((run_dir / "run.json").read_text())
    assert info["target"] == server.url and info["server"]["config"]["protocol"] == "sse_v3"
    assert info["server"]["status"] is not None and info["generator"]["cpu_s"] > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] == 40 and summary["completed_ok"] == 40


def test_closed_loop_users_share_a_session_pool(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"users": 3, "duration": 1, "sessions": 2, "think_time": 0.01})
    with server_factory(functions=[sleep_fn(20, concurrency_limit=None)]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    assert len(result.records) >= 6 and all(r.ok for r in result.records)
    assert len({r.session_id for r in result.records}) == 2
    assert {r.user_id for r in result.records} == {0, 1, 2}
    assert all(r.intended_at_s == r.sent_at_s for r in result.records)  # closed loop: no send lag


def test_timeout_closes_the_record_and_cancels_on_the_server(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"burst": 3, "timeout": 0.3})
    with server_factory(functions=[sleep_fn(3000, concurrency_limit=1)]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    assert [r.error_kind for r in result.records] == ["timeout"] * 3
    for r in result.records:
        assert 0.25 < r.completed_at_s - r.sent_at_s < 3.0  # type: ignore[operator]
    assert result.summary.error_rate == 1.0


def test_a_503_storm_is_recorded_as_queue_full(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"burst": 30, "timeout": 20})
    with server_factory(functions=[sleep_fn(200, concurrency_limit=1)], queue={"max_size": 2}) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    kinds = result.summary.errors_by_kind
    assert len(result.records) == 30
    assert kinds.get("queue_full", 0) >= 20 and set(kinds) == {"queue_full"}
    assert all(r.http_status == 503 for r in result.records if r.error_kind == "queue_full")
    assert result.summary.completed_ok == 30 - kinds["queue_full"] >= 1


def test_stop_when_ends_the_run_and_keeps_every_record(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"rate": 20, "duration": 30, "timeout": 30})
    with server_factory(functions=[sleep_fn(10, concurrency_limit=None)]) as server:
        result = run_scenario(
            spec,
            target=server.url,
            out_dir=tmp_path / "run",
            live=False,
            stop_when=lambda s: "enough" if s.completed >= 5 else None,
        )
    assert len(result.records) == 600  # every scheduled request has a record
    assert result.run_info.stop_reason == "enough"
    unsent = [r for r in result.records if r.sent_at_s is None]
    assert len(unsent) > 400 and {r.error_kind for r in unsent} == {"deadline"}
    assert len(read_parquet(result.run_dir / "records.parquet")) == 600


def test_overrides_and_scenario_target(server_factory: Factory, tmp_path: Path) -> None:
    with server_factory(functions=[sleep_fn(5, concurrency_limit=None)]) as server:
        spec = text_scenario({"rate": 5, "duration": 1}, target=server.url)
        result = run_scenario(spec, out_dir=tmp_path / "run", overrides={"load.burst": 7}, live=False)
    assert len(result.records) == 7 and all(r.intended_at_s == 0 for r in result.records)


def test_closed_loop_user_keeps_going_after_a_timeout(server_factory: Factory, tmp_path: Path) -> None:
    spec = text_scenario({"users": 1, "duration": 1.2, "timeout": 0.2})
    with server_factory(functions=[sleep_fn(1000, concurrency_limit=None)]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    assert len(result.records) >= 3  # one user, several 0.2 s timeouts in a row
    assert {r.error_kind for r in result.records} == {"timeout"}
    assert result.run_info.stop_kind is None


def _echo_scenario(path: Path, rate: float, duration: float) -> Any:
    spec = {"name": "spill", "protocol": "http", "endpoint": {"path": "/echo", "method": "POST"},
            "load": {"rate": rate, "arrival": "poisson", "duration": duration, "timeout": 10}}
    path.write_text(json.dumps(spec))
    return scenario(**{k: v for k, v in spec.items() if k != "name"})


def test_records_parquet_is_columns_spilled_while_running_sealed_as_the_end_wrote_it_before(
    http_echo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """records.parquet is on disk while the run goes (a spill of row groups, never a list of records),
    and the end seals it into the file the old end wrote: records.jsonl read back, sorted into the
    plan's order, `write_parquet` (schema, metadata, row groups, every value)."""
    monkeypatch.setattr(record_spill, "SPILL_ROWS", 7)
    monkeypatch.setattr(record_spill, "BATCH_ROWS", 16)
    monkeypatch.setattr("qbench.run.records.schema.BATCH_ROWS", 16)
    spec = _echo_scenario(tmp_path / "s.json", 150, 1.5)
    out = tmp_path / "run"
    spilled: list[int] = []

    def watch(stats: Any) -> None:
        spill = out / ".records-spill-0.parquet"
        spilled.append(spill.stat().st_size if spill.exists() else 0)

    result = run_scenario(spec, target=http_echo, out_dir=out, live=False,
                          stop_when=lambda stats: watch(stats))
    assert any(spilled[:-1]), spilled  # written during the run, not at its end
    assert not list(out.glob(".records-spill-*"))
    old = sorted(read_jsonl(out / "records.jsonl"), key=plan_order(check_schedule(spec)))
    write_parquet(old, tmp_path / "old.parquet")
    new, want = pq.ParquetFile(out / "records.parquet"), pq.ParquetFile(tmp_path / "old.parquet")
    assert new.schema_arrow.equals(want.schema_arrow, check_metadata=True)
    assert new.metadata.num_row_groups == want.metadata.num_row_groups > 2
    assert new.read().equals(want.read())
    assert result.records == old  # what the summary and diagnosis are computed from, as before
    assert result.records == read_parquet(out / "records.parquet")
    assert json.loads((out / "summary.json").read_text())["requests"] == len(old)


def test_a_run_killed_at_any_moment_keeps_every_record_it_wrote(http_echo: str, tmp_path: Path) -> None:
    """SIGKILL mid-run (a spill without its footer in the folder): records.jsonl still holds every
    record written, read by read_records and `qbench report`; a run reusing the folder ignores the
    dead run's spill."""
    _echo_scenario(tmp_path / "s.json", 100, 30)
    out = tmp_path / "run"
    code = ("import sys, qbench.run.records.spill as s; s.SPILL_ROWS = 10; from qbench.cli import app; "
            "sys.argv[0] = 'qbench'; app()")
    cmd = [sys.executable, "-c", code, "run", str(tmp_path / "s.json"), "--target", http_echo,
           "--out", str(out), "--no-live"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (out / ".records-spill-0.parquet").exists() or _lines(out / "records.jsonl") < 60:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    written = _lines(out / "records.jsonl")
    records = read_records(out)
    assert len(records) >= min(written - 1, 60) and not (out / "records.parquet").exists()
    assert all(r.ok and r.endpoint == "POST /echo" for r in records)
    report = build_report(out, tmp_path / "report")
    assert report.html.exists() and f"{len(records)}" in report.markdown.read_text()
    spec = _echo_scenario(tmp_path / "short.json", 40, 0.5)
    again = run_scenario(spec, target=http_echo, out_dir=out, live=False)
    assert len(read_parquet(out / "records.parquet")) == len(check_schedule(spec).offsets)
    assert not list(out.glob(".records-spill-*")) and again.summary.requests == len(again.records)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0
