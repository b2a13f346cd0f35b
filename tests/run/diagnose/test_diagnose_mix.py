"""Per-function diagnosis of a mix: one function's backlog delaying another through a shared
concurrency_id, named from the server's settings and inferred from the records alone."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from qbench.run.diagnose.diagnose_mix import diagnose_run
from qbench.run.runner import run_scenario
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]
TEXT = {"inputs": [{"text": {"words": [2, 4]}}]}


def test_a_shared_concurrency_id_is_named_per_function(server_factory: Factory, tmp_path: Path) -> None:
    functions: list[dict[str, Any]] = [
        {"api_name": "a", "workload": "sleep", "params": {"base_ms": 30}, "concurrency_id": "gpu",
         "concurrency_limit": 1},
        {"api_name": "b", "workload": "sleep", "params": {"base_ms": 150}, "concurrency_id": "gpu",
         "concurrency_limit": 1},
        {"api_name": "c", "workload": "sleep", "params": {"base_ms": 20}, "concurrency_limit": None},
    ]
    mix = [{"weight": w, "endpoint": {"api_name": n}, "payload": TEXT}
           for w, n in ((3, "a"), (1, "b"), (1, "c"))]
    spec = scenario(mix=mix, load={"rate": 15, "arrival": "poisson", "duration": 6, "timeout": 30})
    with server_factory(functions=functions) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    kinds = {f.kind: f.message for f in result.diagnosis}
    assert "shared_group" in kinds, result.diagnosis
    assert kinds["shared_group"].startswith("a shares concurrency_id 'gpu' with b (one limit of 1 for")
    assert not any(f.message.startswith("c:") and f.kind == "shared_group" for f in result.diagnosis)
    inferred = diagnose_run(result.records, result.summary, None)  # no settings: a real Gradio app
    starved = [f.message for f in inferred if f.kind == "starved"]
    assert starved, inferred
    assert starved[0].startswith("a's requests waited with none of its own jobs running")
    assert "b's jobs were running" in starved[0]
