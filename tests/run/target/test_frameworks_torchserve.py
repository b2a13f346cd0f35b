"""qbench.run.target.frameworks for TorchServe: a server known from its inference API's own description, its
models from its management API, the keys its handler reads from each request's body read from the
handler's code (or from the config.properties whose model store holds it); and the helpers that run a real
TorchServe 0.12 (its own cached virtualenv, Java 17) for tests/docs/test_docs_torchserve.py, where `qbench
init` on it drafts a scenario that runs with no error."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from qbench.run.target.frameworks import (
    TORCHSERVE_CAP,
    management_url,
    model_facts,
    request_keys,
    torchserve,
    torchserve_handlers,
)
from qbench.tune.servers.server_process import free_port_block
from tests.gradio_versions.envs import EnvError, ensure_named_env
from tests.run.target.test_frameworks import stop_group

TORCHSERVE = "0.12.0"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "torchserve"
DESCRIPTION = {"openapi": "3.0.1", "info": {"title": "TorchServe APIs", "version": TORCHSERVE}, "paths": {}}
#: GET /models/batched on the management API of examples/torchserve (its fields that qbench reads)
DESCRIBED = {"modelName": "batched", "modelVersion": "1.0", "minWorkers": 1, "maxWorkers": 1, "batchSize": 4,
             "maxBatchDelay": 10, "workers": [{"id": "9000", "status": "READY"}],
             "jobQueueStatus": {"remainingCapacity": 98, "pendingRequests": 2}}


def test_torchserve_is_known_by_its_own_description() -> None:
    found = torchserve(DESCRIPTION, [DESCRIBED], "http://127.0.0.1:8081")
    assert found is not None and found.name == "TorchServe" and found.queue_cap == TORCHSERVE_CAP
    assert found.facts == ("TorchServe 0.12.0, management API at http://127.0.0.1:8081: batched 1.0: "
                           "batchSize 4, maxBatchDelay 10 ms, 1 of minWorkers 1 READY, job queue 100")
    assert "qbench init --app" in found.schema_hint and found.convention == {}
    unknown = torchserve(DESCRIPTION, [], "http://127.0.0.1:8081")
    assert unknown is not None and "its models unknown: its management API did not answer at " \
                                   "http://127.0.0.1:8081" in unknown.facts
    for other in (None, [], {"info": {"title": "FastAPI"}}, {"info": "TorchServe APIs"}, {"routes": []}):
        assert torchserve(other) is None
    loading = {**DESCRIBED, "workers": [{"status": "UNLOADING"}], "jobQueueStatus": {}}
    assert model_facts(loading).endswith("0 of minWorkers 1 READY")  # a worker still loading
    assert management_url("http://127.0.0.1:8080") == "http://127.0.0.1:8081"
    assert management_url("http://localhost:9000/") == "http://localhost:9001"


def test_the_keys_a_handler_reads_from_each_request_come_from_its_code(tmp_path: Path) -> None:
    handler = EXAMPLE / "model_store" / "batched" / "handler.py"
    assert request_keys(handler) == ["input"]
    assert torchserve_handlers(EXAMPLE / "config.properties") == [(str(handler), handler.read_text())]
    assert request_keys(EXAMPLE / "config.properties") == ["input"]  # through its model store
    source = tmp_path / "handler.py"
    source.write_text(
        "import json\n"
        "def handle(data, context):\n"
        "    out = []\n"
        "    for row in data:\n"
        "        request = json.loads(row.get('data') or row.get('body'))\n"
        "        out.append(request['prompt'] + str(request.get('max_tokens')) + row['other'])\n"
        "    return out\n"
        "class H:\n"
        "    def postprocess(self, data):\n"
        "        body = data[0].get('body')\n"
        "        return body['not_read_from_a_request']\n")
    assert request_keys(source) == ["prompt", "max_tokens"]
    store = tmp_path / "store"
    (store / "m" / "MAR-INF").mkdir(parents=True)
    shutil.copy(source, store / "m" / "handler.py")
    (store / "m" / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"model": {"handler": "handler.py"}}))
    (store / "broken").mkdir()  # no manifest: not a model folder
    config = tmp_path / "config.properties"
    config.write_text("# a comment\nmodel_store=store\nload_models=all\n")
    assert request_keys(config) == ["prompt", "max_tokens"]
    with zipfile.ZipFile(store / "m.mar", "w") as archive:  # the same model as a .mar archive
        archive.write(store / "m" / "handler.py", "handler.py")
        archive.write(store / "m" / "MAR-INF" / "MANIFEST.json", "MAR-INF/MANIFEST.json")
    config.write_text("model_store=store\nload_models=mine=m.mar\n")
    assert request_keys(config) == ["prompt", "max_tokens"]
    config.write_text("model_store=store\nload_models=absent.mar,broken\n")
    assert request_keys(config) == []


def torchserve_python() -> Path:
    """The interpreter of TorchServe's own cached virtualenv (torchserve, the model archiver, a CPU torch:
    the machine's own wheel where PIP_FIND_LINKS names one); skips where it cannot be built or there is
    no Java to run it."""
    if shutil.which("java") is None:
        pytest.skip("TorchServe's frontend needs Java 17 (java is not on PATH)")
    try:
        return ensure_named_env(f"torchserve-{TORCHSERVE}",
                                [f"torchserve=={TORCHSERVE}", f"torch-model-archiver=={TORCHSERVE}",
                                 "torch==2.13.0", "pyyaml", "numpy"], "ts.model_server")
    except EnvError as exc:
        pytest.skip(f"torchserve {TORCHSERVE}'s env cannot be built here: {exc}")


def serving_config(folder: Path, port: int, extra: str = "") -> Path:
    """examples/torchserve copied into `folder`, its config.properties on `port` (inference), the next
    four (management, metrics, gRPC inference and management) and a worker socket range of its own."""
    shutil.copytree(EXAMPLE, folder, dirs_exist_ok=True)
    config = folder / "config.properties"
    lines = [line for line in config.read_text().splitlines() if not line.startswith(
        ("inference_address", "management_address", "metrics_address"))]
    lines += [f"inference_address=http://127.0.0.1:{port}", f"management_address=http://127.0.0.1:{port + 1}",
              f"metrics_address=http://127.0.0.1:{port + 2}", f"grpc_inference_port={port + 3}",
              f"grpc_management_port={port + 4}", f"initial_worker_port={port + 5}", extra]
    config.write_text("\n".join(lines) + "\n")
    return config


@contextlib.contextmanager
def torchserve_server(folder: Path, extra: str = "") -> Iterator[str]:
    """TorchServe serving examples/torchserve from a copy in `folder` (its pid file and logs there too, its
    worker sockets in a folder of their own: another instance's never clash), until its model's workers
    are READY; the whole process group (Java and its Python workers) stopped after."""
    python = torchserve_python()
    port = free_port_block(6)
    config = serving_config(folder, port, extra)
    sockets = tempfile.mkdtemp(prefix="qbench-ts-")  # short: an AF_UNIX path has at most 107 bytes
    env = {**os.environ, "TMPDIR": str(folder), "TEMP": sockets, "LOG_LOCATION": str(folder / "logs"),
           "METRICS_LOCATION": str(folder / "logs")}
    log = folder / "torchserve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(python), "-m", "ts.model_server", "--start", "--foreground", "--ncs",
                                 "--ts-config", str(config)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=folder, start_new_session=True)
    try:
        wait_models_ready(f"http://127.0.0.1:{port + 1}", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc)
        shutil.rmtree(sockets, ignore_errors=True)


def wait_models_ready(management: str, proc: subprocess.Popen[bytes], log: Path,
                      timeout_s: float = 180.0) -> None:
    """TorchServe's /ping says Healthy while its workers still load: ready once every model's management
    description lists minWorkers workers, each READY."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"torchserve exited: {log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
            names = [m["modelName"] for m in httpx.get(f"{management}/models", timeout=2).json()["models"]]
            described = [httpx.get(f"{management}/models/{name}", timeout=2).json()[0] for name in names]
            if names and all(len(d["workers"]) >= d["minWorkers"] and all(w["status"] == "READY"
                                                                          for w in d["workers"])
                             for d in described):
                return
        time.sleep(0.3)
    raise AssertionError(f"{management}: its models not READY in {timeout_s:g} s: {log.read_text()[-3000:]}")
