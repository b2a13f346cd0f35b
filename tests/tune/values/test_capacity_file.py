"""capacity.json as data: CapacityFile writes and reads back the same file; schema-1 files still load."""

from __future__ import annotations

import json

from qbench.tune.values.capacity_file import SCHEMA_VERSION, CapacityFile
from qbench.tune.values.ceiling import Capacity, Probe
from qbench.tune.verdicts.overload import Overload

OVERLOAD = {"rate_rps": 13.0, "capacity_rps": 10.0, "base_rps": 9.8, "end_rps": 9.7, "fell_at_waiting": None,
            "max_waiting": 40, "series": [[1.0, 9.8, 3.0]], "max_size": 25, "advice": "holds", "fall": 0.01}


def test_a_capacity_file_round_trips() -> None:
    probes = [Probe(4.0, True, kind="estimate", users=32), Probe(10.0, True),
              Probe(12.0, False, violations=["p95"]), Probe(10.0, True, kind="confirm", duration_s=60.0)]
    file = CapacityFile(
        result=Capacity(10.0, 12.0, 0.2, True, True, probes, Overload.from_dict(OVERLOAD)), target="http://127.0.0.1:1",
        scenario={"path": "s.yaml", "content": {"name": "sleep"}}, slo={"p95_latency_s": 2},
        max_error_rate=0.01,
        plan={"tolerance": 0.2}, probe_duration_s=5.0, max_probe_duration_s=30.0, confirm_duration_s=60.0,
        probe_length={"seconds": 5.0}, warmup_s=0.5, think_time_s=10.0, estimate_users=32, users=101.0,
        answer=[("capacity", "10 req/s")], created_at="2026-01-01T00:00:00+00:00",
    )
    data = json.loads(json.dumps(file.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION and data["kind"] == "capacity"
    back = CapacityFile.from_dict(data)
    assert back.to_dict() == file.to_dict()
    assert [p.rate_rps for p in back.rate_probes] == [10.0, 12.0] and back.scenario_name == "sleep"
    assert back.overload is not None and back.overload.max_size == 25


def test_a_schema_1_file_still_loads() -> None:
    """Before probes kept steadiness and duration, and before confirmation, overload and probe_length."""
    old = {"kind": "capacity", "target": "http://x", "slo": {"p95_latency_s": 1}, "max_error_rate": 0.01,
           "result": {"capacity_rps": 8.0, "failing_rate_rps": 9.0, "tolerance": 0.1, "converged": True,
                      "probes": [{"rate_rps": 8.0, "passed": True, "verdict": "pass"}, {"bad": 1}, "x"]},
           "answer": [["capacity", "8 req/s"], ["broken"]]}
    file = CapacityFile.from_dict(old)
    assert file.schema_version == 1 and file.result.capacity_rps == 8.0 and not file.result.confirmed
    assert [p.rate_rps for p in file.probes] == [8.0] and file.probes[0].duration_s == 0.0
    assert file.answer == [("capacity", "8 req/s")] and file.overload is None and file.probe_length == {}
    empty = CapacityFile.from_dict({})
    assert empty.result.capacity_rps is None and empty.probes == [] and empty.target == ""
