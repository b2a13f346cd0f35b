"""qbench's startup hook in a real BentoML 1.4.40 service (its own virtualenv), unmodified: the point's
knobs replace the service's own @bentoml.api(max_batch_size, max_latency_ms) and @bentoml.service(workers,
traffic max_concurrency) in every process `bentoml serve` starts, and the record says what the service
had, what was set, and the batch sizes BentoML really handed it (counted in each worker)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from qbench.tune.servers.apphook import hook_env, read_hook_record
from qbench.tune.servers.server_process import free_port
from tests.run.target.test_frameworks_bentoml import BENTOML, bentoml_service

REQUESTS = 16  # sent at once: batches of up to 4 (the knob) where the service asks for 16


def test_the_knobs_reach_an_unmodified_bentoml_service_and_its_batches_are_counted(tmp_path: Path) -> None:
    knobs = {"max_batch_size": 4, "max_latency_ms": 5000, "workers": 2, "max_concurrency": 64}
    port = free_port()
    with bentoml_service(port, tmp_path, hook_env(knobs, port, None, tmp_path)) as url:
        with ThreadPoolExecutor(REQUESTS) as pool:
            answers = list(pool.map(lambda i: httpx.post(f"{url}/predict", json={"texts": ["x" * i]},
                                                         timeout=60), range(1, REQUESTS + 1)))
        assert [a.json() for a in answers] == [[i] for i in range(1, REQUESTS + 1)]
    record = read_hook_record(tmp_path)
    log = (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
    assert record is not None and record.launched and record.framework == "bentoml", log
    assert record.bentoml["version"] == BENTOML and record.bentoml["name"] == "Batched"
    assert not record.problems
    (api,) = record.bentoml["apis"]
    assert (api["route"], api["name"]) == ("/predict", "predict")
    assert api["app"] == {"batchable": True, "max_batch_size": 16, "max_latency_ms": 1000}
    assert api["set"] == {"max_batch_size": 4, "max_latency_ms": 5000}
    assert record.bentoml["service"] == {"app": {"workers": 1, "max_concurrency": None},
                                         "set": {"workers": 2, "max_concurrency": 64},
                                         "effective": {"workers": 2, "max_concurrency": 64}}
    sizes = record.batch_sizes["/predict"]  # what BentoML handed the function, in its two workers
    assert sum(size * n for size, n in sizes.items()) == REQUESTS and max(sizes) <= 4, sizes
    assert 1 <= record.batch_processes <= 2
