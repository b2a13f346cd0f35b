"""qbench.run.target.frameworks for BentoML: a service known from its /schema.json, its APIs' input schemas as
the request bodies; and the real BentoML 1.4 service the suite serves (its own cached virtualenv). `qbench
init` on it, live, is tests/docs/test_docs_bentoml.py's: one service for the docs' draft and this module's."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from qbench.run.target.frameworks import BENTOML_CAP, bentoml, bentoml_spec, read_framework
from qbench.run.target.openapi_body import body_fields, request_schema
from tests.run.target.test_frameworks import framework_python, stop_group, wait_healthy

BENTOML = "1.4.40"
SERVICE_DIR = Path(__file__).resolve().parents[3] / "examples" / "bentoml"
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
