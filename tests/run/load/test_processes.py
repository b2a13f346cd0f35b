"""Several generator processes: one shared clock, every scheduled request recorded once, merged stats."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import read_jsonl
from qbench.run.results.run_info import RunInfo
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]
FN = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 10}, "concurrency_limit": None}


def spec(load: dict[str, object]) -> object:
    return scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"value": "x"}]}, load=load)


def test_open_and_closed_loop_over_two_processes(server_factory: Factory, tmp_path: Path) -> None:
    with server_factory(functions=[FN]) as server:
        open_loop = run_scenario(
            spec({"rate": 40, "duration": 1, "processes": 2, "sessions": 4}),  # type: ignore[arg-type]
            target=server.url,
            out_dir=tmp_path / "open",
            live=False,
        )
        closed = run_scenario(
            spec({"users": 3, "requests": 9, "processes": 2}),  # type: ignore[arg-type]
            target=server.url,
            out_dir=tmp_path / "closed",
            live=False,
        )
        stopped = run_scenario(
            spec({"rate": 20, "duration": 30, "processes": 2}),  # type: ignore[arg-type]
            target=server.url,
            out_dir=tmp_path / "stop",
            live=False,
            stop_when=lambda s: "seen enough" if s.completed >= 4 else None,
        )
    records = open_loop.records
    assert [r.request_id for r in records] == list(range(40)) and all(r.ok for r in records)
    times = [r.intended_at_s for r in records]
    assert times == sorted(times) and abs(times[-1] - 39 / 40) < 1e-9  # one schedule, one clock
    assert len({r.session_id for r in records}) == 4  # a pool of 4 shared out as 2 per process
    assert open_loop.summary.generator.processes == 2 and open_loop.summary.generator.cpu_s
    workers = open_loop.summary.generator.workers  # each process's own health, for the summary table
    assert [(w.index, w.requests) for w in workers] == [(0, 20), (1, 20)] and all(w.cpu_s for w in workers)
    assert len(read_jsonl(open_loop.run_dir / "records.jsonl")) == 40
    info = RunInfo.from_dict(json.loads((open_loop.run_dir / "run.json").read_text()))
    assert info.generator is not None and [w.requests for w in info.generator.workers] == [20, 20]
    assert [r.request_id for r in closed.records] == list(range(9)) and all(r.ok for r in closed.records)
    assert {r.user_id for r in closed.records} == {0, 1, 2}
    assert len(stopped.records) == 600 and stopped.run_info.stop_reason == "seen enough"
    assert {r.error_kind for r in stopped.records if r.sent_at_s is None} == {"deadline"}
