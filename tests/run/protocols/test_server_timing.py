"""qbench.run.protocols.server_timing: a Server-Timing header read into the record's server-clock phases,
through both HTTP clients, against the reference server's plain HTTP front (which sends it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.protocols.server_timing import apply_server_timing, server_timing
from qbench.run.records.schema import RequestRecord, read_records
from reference_server.testing import RunningServer

SLEEP_S = 0.2  # the function's sleep: long beside how late a busy box's requests reach the queue


def test_the_durations_are_read_in_seconds() -> None:
    assert server_timing("queue;dur=12.5, service;dur=55;desc=\"fn\"") == {"queue": 0.0125, "service": 0.055}
    assert server_timing('db;desc="x";dur="2", cache') == {"db": 0.002}  # quoted; no dur: left out
    assert server_timing("queue;dur=abc, ;dur=3, x;dur") == {}  # malformed entries are skipped
    assert server_timing("") == {}


def test_only_the_queue_and_the_service_reach_the_record() -> None:
    record = RequestRecord(request_id=0, user_id=0, session_id="s", endpoint="POST /x", warmup=False,
                           intended_at_s=0.0)
    apply_server_timing(record, "Queue;dur=20, service;dur=50, db;dur=7, total;dur=-1")
    assert (record.server_queue_wait_s, record.server_total_s) == (0.02, 0.05)


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
def test_a_run_of_the_reference_servers_http_front_has_its_queue_and_service(
    client: str, server_factory: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One 200 ms function, 4 requests at once: three wait for the first, each on the server's clock."""
    monkeypatch.setenv("QBENCH_HTTP_CLIENT", client)
    functions = [{"api_name": "slow", "workload": "sleep", "params": {"base_ms": SLEEP_S * 1000},
                  "concurrency_limit": 1}]
    with server_factory(functions=functions) as server:  # type: ignore[operator]
        scenario = _scenario(tmp_path, server)
        out = tmp_path / "r"
        result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(out), "--no-live"])
        assert result.exit_code == 0, result.output
    records = read_records(out)
    assert len(records) == 4 and all(r.ok for r in records)
    for r in records:
        # the sleep on its clock (a timer may fire a hair early)
        assert r.server_total_s is not None and r.server_total_s >= SLEEP_S * 0.95, r
        assert r.server_queue_wait_s is not None and r.latency_s is not None
        assert r.server_queue_wait_s + r.server_total_s <= r.latency_s + 1e-3, r  # inside what qbench saw
    # the last of four behind one worker waited for the three before it, less how far apart they were sent
    # and how late each reached the server's queue after its send (connecting and parsing: 12 ms seen on a
    # busy 2-core box, so 100 ms allowed; a wait reported as nothing still fails by 0.5 s)
    waits = sorted(r.server_queue_wait_s or 0.0 for r in records)
    sends = [r.sent_at_s for r in records if r.sent_at_s is not None]
    assert waits[-1] >= 3 * SLEEP_S * 0.95 - (max(sends) - min(sends)) - 0.1, (waits, sends)
    assert "server: queue wait" in result.output


def _scenario(tmp_path: Path, server: RunningServer) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "st", "target": server.url, "protocol": "http",
        "endpoint": {"method": "POST", "path": "/predict/slow", "body": {"inputs": "$0"}},
        "payload": {"inputs": [{"text": {"words": [1, 3]}}]},
        "load": {"burst": 4, "warmup": 0, "timeout": 30}}))
    return path
