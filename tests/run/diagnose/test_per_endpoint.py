"""Per-function diagnosis of a mix: one function's backlog delaying another through a shared
concurrency_id, named from the server's settings and inferred from the records alone."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from qbench.run.diagnose.per_endpoint import diagnose_run
from qbench.run.pipeline import run_scenario
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
    shared = [f.message for f in result.diagnosis if f.kind == "shared_group"]
    # a (30 ms) waits behind b's 150 ms jobs at any speed; b gets its own line too where it also waited
    # longer than it ran (a busy box's run at the group's 72% load): each function is named for itself
    assert any(m.startswith("a shares concurrency_id 'gpu' with b (one limit of 1 for") for m in shared), (
        result.diagnosis)
    assert all(m.startswith(("a shares concurrency_id 'gpu' with b", "b shares concurrency_id 'gpu' with a"))
               for m in shared), shared
    assert not any(f.message.startswith("c:") and f.kind == "shared_group" for f in result.diagnosis)
    inferred = diagnose_run(result.records, result.summary, None)  # no settings: a real Gradio app
    starved = [f.message for f in inferred if f.kind == "starved"]
    assert starved, inferred
    assert starved[0].startswith("a's requests waited with none of its own jobs running")
    assert "b's jobs were running" in starved[0]


def test_a_big_runs_diagnosis_holds_a_few_of_its_columns_at_once(tmp_path: Path) -> None:
    """The end of a long run diagnoses from records.parquet in bounded memory: its temporaries peak
    at under 10 whole columns (8 bytes a request each; 8.9 now, 12.5 when the steadiness test, the join
    round trip and each endpoint's counts held their columns all at once: 3.6 M requests, 644 -> 488
    MiB for the end of run). tracemalloc counts numpy's arrays, byte for byte: no timing in it."""
    import sys
    import tracemalloc

    import numpy as np

    from qbench.run.records.columns import Columns
    from qbench.run.records.schema import write_parquet
    from qbench.run.results.summary import summarize

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from end_of_run import chunk_records  # the benchmark's Gradio-like records: two endpoints, errors

    n = 50_000
    rows, _ = chunk_records(np.random.default_rng(7), 0, n, 0.0, 1000.0, 1.0, 0.5)
    write_parquet(rows, tmp_path / "records.parquet")
    del rows
    cols = Columns.read(tmp_path, keep=1)  # as runner._finish reads it
    summary = summarize(cols, None)
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        findings = diagnose_run(cols, summary)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert findings  # it said something: the limit or the headroom
    assert (peak - start) / (8 * n) < 10
