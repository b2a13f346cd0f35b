"""qbench's startup hook in a real LitServe 0.2.19 app (its own virtualenv), unmodified: the point's
knobs replace the app's own LitAPI(max_batch_size, batch_timeout) and LitServer(workers_per_device), the
server listens on the point's port whatever port the app asks for, and the record says what the app had,
what was set, what LitServe ran with, and the batch sizes LitServe really handed the app (counted in its
spawned inference workers)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from qbench.tune.servers.apphook import hook_env, read_hook_record
from qbench.tune.servers.server_process import free_port
from tests.run.target.test_frameworks import LITSERVE, litserve_app

REQUESTS = 16  # sent at once: batches of up to 8 within the 0.2 s batch_timeout


def test_the_knobs_reach_an_unmodified_litserve_app_and_its_batches_are_counted(tmp_path: Path) -> None:
    knobs = {"max_batch_size": 8, "batch_timeout": 0.2, "workers_per_device": 2}
    port, asked = free_port(), free_port()  # the app asks for `asked`; the hook gives it `port`
    env = {**os.environ, "MAX_BATCH_SIZE": "4", **hook_env(knobs, port, None, tmp_path)}
    url = f"http://127.0.0.1:{port}"
    with litserve_app(str(asked), env, tmp_path, url):
        with ThreadPoolExecutor(REQUESTS) as pool:
            answers = list(pool.map(lambda i: httpx.post(f"{url}/predict", json={"input": "x" * i},
                                                         timeout=60), range(1, REQUESTS + 1)))
        assert [a.json() for a in answers] == [{"output": i} for i in range(1, REQUESTS + 1)]
    log = tmp_path / "app.log"
    record = read_hook_record(tmp_path)
    assert record is not None and record.launched and record.framework == "litserve", log.read_text()[-2000:]
    assert record.litserve["version"] == LITSERVE and not record.problems
    (api,) = record.litserve["apis"]
    assert api["api_path"] == "/predict" and api["type"] == "BatchedAPI"
    assert api["app"] == {"max_batch_size": 4, "batch_timeout": 0.01}
    assert api["set"] == {"max_batch_size": 8, "batch_timeout": 0.2} == api["effective"]
    assert record.litserve["server"] == {"app": {"workers_per_device": 1}, "set": {"workers_per_device": 2},
                                         "effective": {"workers_per_device": 2}}
    assert record.launch["set"] == {"host": "127.0.0.1", "generate_client_file": False, "port": port}
    assert record.launch["app"]["port"] == asked and not (tmp_path / "client.py").exists()
    sizes = record.batch_sizes["/predict"]  # every request in exactly one batch, none above the knob
    assert sum(size * n for size, n in sizes.items()) == REQUESTS and 1 < max(sizes) <= 8, sizes
    assert len(list(tmp_path.glob("hook-record.json.batches.*.json"))) <= 2  # one file per worker at most
