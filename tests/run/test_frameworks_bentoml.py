"""qbench.run.frameworks for BentoML: a service known from its /schema.json, its APIs' input schemas as the
request bodies; and `qbench init` on a real BentoML 1.4 service (its own cached virtualenv) drafting a
scenario that runs with no error, one row per request to its batchable API."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.frameworks import BENTOML_CAP, bentoml, bentoml_spec, read_framework
from qbench.run.openapi_body import body_fields, request_schema
from qbench.run.records import read_records
from qbench.tune.servers.server_process import free_port
from tests.run.test_frameworks import framework_python, stop_group, wait_healthy

BENTOML = "1.4.40"
SERVICE_DIR = Path(__file__).resolve().parents[2] / "examples" / "bentoml"
#: BentoML 1.4.40's GET /schema.json for examples/bentoml/service.py
SCHEMA = {"name": "Batched", "type": "service", "routes": [{
    "name": "predict", "route": "/predict", "batchable": True,
    "input": {"properties": {"texts": {"items": {"type": "string"}, "title": "Texts", "type": "array"}},
              "required": ["texts"], "title": "Input", "type": "object"},
    "output": {"items": {"type": "integer"}, "type": "array"}, "is_task": False}],
    "paths": {"/predict": {"mounted": False}}}


def test_bentoml_is_known_by_its_schema() -> None:
    found = bentoml(SCHEMA)
    assert found is not None and found.name == "BentoML"
    assert found.facts == "service Batched: POST /predict (batchable)"
    assert found.batchable == ("/predict",) and found.streamed == () and found.queue_cap == BENTOML_CAP
    streamed = {"name": "chat", "route": "/chat", "input": {},
                "output": {"type": "string", "is_stream": True}}
    task = {"name": "render", "route": "/render", "input": {}, "output": {}, "is_task": True}
    more = bentoml({**SCHEMA, "routes": [*SCHEMA["routes"], streamed, task]})  # type: ignore[list-item]
    assert more is not None and more.streamed == ("/chat",)
    # a task is submitted, then polled: left out
    assert more.facts == "service Batched: POST /predict (batchable), POST /chat"
    for other in (None, [], {"routes": []}, {"type": "service"}, {"version": "6.31.0"}):
        assert bentoml(other) is None  # a Gradio /info, a list, no routes ...


def test_its_apis_inputs_are_their_request_bodies() -> None:
    spec = bentoml_spec(SCHEMA)
    assert list(spec["paths"]) == ["/predict"]
    schema = request_schema(spec, "/predict")
    assert schema is not None
    assert [(name, s["type"], required) for name, s, required in body_fields(schema)] == [
        ("texts", "array", True)]


def bentoml_python() -> Path:
    """The interpreter of BentoML's own cached virtualenv; skips where it cannot be built."""
    return framework_python("bentoml", BENTOML)


@contextlib.contextmanager
def bentoml_service(port: int, home: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """`bentoml serve service:Batched` (examples/bentoml) in BentoML's env, its home in `home` (its log
    there: serve.log; `extra_env` added to its environment), until its /readyz answers 200; the whole
    process group (the arbiter and its workers) stopped after. Skips where the env cannot be built."""
    python = bentoml_python()
    log = home / "serve.log"
    env = {**os.environ, "BENTOML_HOME": str(home), "BENTOML_DO_NOT_TRACK": "true", **(extra_env or {})}
    with log.open("wb") as out:
        proc = subprocess.Popen([str(python), "-m", "bentoml", "serve", "service:Batched", "--host",
                                 "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=SERVICE_DIR, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log, "/readyz")
        yield url
    finally:
        stop_group(proc)


@pytest.fixture(scope="module")
def bentoml_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with bentoml_service(free_port(), tmp_path_factory.mktemp("bentoml")) as url:
        yield url


def test_a_running_service_is_named_by_what_it_serves(bentoml_url: str) -> None:
    found = read_framework(bentoml_url)
    assert found is not None and found.name == "BentoML" and found.batchable == ("/predict",)


def test_init_drafts_its_body_from_its_schema_and_the_scenario_runs_with_no_error(
    bentoml_url: str, tmp_path: Path
) -> None:
    scenario = tmp_path / "bentoml.yaml"
    result = CliRunner().invoke(app, ["init", bentoml_url, "-o", str(scenario)])
    assert result.exit_code == 0, result.output
    assert ("a BentoML server (service Batched: POST /predict (batchable)); its /schema.json declares POST "
            "/predict's JSON body: texts (array)") in result.output
    assert "each request sends one row" in result.output and "FILL IN" not in scenario.read_text()
    written = yaml.safe_load(scenario.read_text())
    assert written["endpoint"] == {"method": "POST", "path": "/predict", "body": {"texts": "$0"}}
    assert written["payload"]["inputs"] == [{"json": ["{word}"]}]  # one row of the batch
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.duration=null", "--set",
                                      "load.requests=12", "--set", "load.warmup=0", "--set",
                                      "load.think_time=0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_records(out)
    assert len(records) == 12 and [r.error_kind for r in records] == [None] * 12, [
        r.error_message for r in records]
    sizes = [line for line in httpx.get(f"{bentoml_url}/metrics").text.splitlines()
             if line.startswith("bentoml_service_adaptive_batch_size_count")]
    assert sizes, "BentoML's metrics show no batch"  # the requests went through its batcher


def test_a_path_that_times_out_is_no_answer_and_the_next_is_asked() -> None:
    """A Ray Serve app's own route answers GET /info (a 500 after its traceback, seconds on a busy box):
    one slow path used to end the whole reading with None; now the next path is asked."""
    import json as json_module
    import threading
    import time as time_module
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/info":
                time_module.sleep(1.5)  # past the reading's timeout
            body = json_module.dumps(SCHEMA).encode() if self.path == "/schema.json" else b"{}"
            self.send_response(200 if self.path == "/schema.json" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        found = read_framework(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=0.5)
    finally:
        server.shutdown()
    assert found is not None and found.name == "BentoML"
