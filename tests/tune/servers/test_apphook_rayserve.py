"""qbench's startup hook in a real Ray Serve 2.60 app (its own virtualenv), unmodified and started as
`serve run module:app` would (qbench's launch line for an app that only binds its application): the
point's knobs replace the app's own @serve.batch(max_batch_size, batch_wait_timeout_s) and
@serve.deployment(max_ongoing_requests), the proxy listens on the point's port, the app gets a Ray
instance of its own, qbench waits until Ray Serve says the app runs, and the record says what the app
had, what was set, and the batch sizes Ray Serve really handed it (counted in its replica)."""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from qbench.tune.servers.app_process import app_launch_line, launch_command
from qbench.tune.servers.apphook import read_hook_record
from tests.run.target.test_frameworks_rayserve import RAYSERVE, RAYSERVE_APP, ray_env, rayserve_python

REQUESTS = 16  # sent at once: batches of up to 8 (the knob) within the 0.2 s wait, 16 held at once


def test_the_knobs_reach_an_unmodified_ray_serve_app_and_its_batches_are_counted(tmp_path: Path) -> None:
    source = RAYSERVE_APP.read_text().split("\nif __name__ ==")[0]  # `serve run app:app` runs it
    (tmp_path / "served").mkdir()
    served = tmp_path / "served" / "batched.py"
    served.write_text(source)
    line = app_launch_line(served, str(rayserve_python()))
    assert shlex.split(line)[2:5] == ["ray.serve.scripts", "run", "batched:app"]
    knobs = {"max_batch_size": 8, "batch_wait_timeout_s": 0.2, "max_ongoing_requests": 16}
    env = {k: v for k, v in ray_env().items() if k != "RAY_ADDRESS"}  # the hook's own: RAY_ADDRESS=local
    with launch_command(line, knobs, work_dir=tmp_path / "point", hook=True, any_status=True,
                        env=env, ready_timeout_s=180) as handle:
        ready = read_hook_record(tmp_path / "point")
        assert ready is not None and ready.launched  # ready only once serve.run said the app runs
        with ThreadPoolExecutor(REQUESTS) as pool:
            answers = list(pool.map(lambda i: httpx.post(f"{handle.base_url}/", json={"input": "x" * i},
                                                         timeout=60), range(1, REQUESTS + 1)))
        assert [a.json() for a in answers] == [{"output": i} for i in range(1, REQUESTS + 1)]
    record = read_hook_record(tmp_path / "point")
    log = (tmp_path / "point" / "server.log").read_text(errors="replace")[-2000:]
    assert record is not None and record.framework == "rayserve" and not record.problems, log
    assert record.rayserve["version"] == RAYSERVE
    (batch,) = record.rayserve["batches"]
    assert batch["name"] == "BatchedModel.predict"
    assert batch["app"] == {"max_batch_size": 4, "batch_wait_timeout_s": 0.01, "max_concurrent_batches": 1}
    assert batch["set"] == {"max_batch_size": 8, "batch_wait_timeout_s": 0.2}
    (deployment,) = record.rayserve["deployments"]
    assert deployment["name"] == "BatchedModel" and deployment["ingress"]
    assert deployment["app"] == {"num_replicas": 1, "max_ongoing_requests": 5, "max_queued_requests": -1}
    assert deployment["set"] == {"max_ongoing_requests": 16}
    assert deployment["effective"]["max_ongoing_requests"] == 16
    port = int(handle.base_url.rsplit(":", 1)[1])
    assert record.launch["set"] == {"ray_address": "local", "host": "127.0.0.1", "port": port}
    sizes = record.batch_sizes["BatchedModel.predict"]  # every request in exactly one batch, none above 8
    assert sum(size * n for size, n in sizes.items()) == REQUESTS and 1 < max(sizes) <= 8, sizes
    assert record.batch_processes == 1  # one replica
