"""qbench.run.target.openapi_body and `qbench init` on a plain HTTP server that declares its body: `$ref`s
into `components/schemas` followed (FastAPI's, LitServe's typed `decode_request`), `allOf` merged, and a
scenario drafted from the fields that runs with no error against a real FastAPI app."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from qbench.run.target.draft import HttpTarget, draft_for
from qbench.run.target.openapi_body import body_fields, request_schema, resolve
from qbench.tune.servers.server_process import free_port

#: LitServe 0.2's /openapi.json for `decode_request(self, request: PredictRequest)` ({input: str})
LITSERVE_TYPED: dict[str, Any] = {
    "openapi": "3.1.0",
    "paths": {"/predict": {"post": {"requestBody": {"content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/PredictRequest"}}}, "required": True}}},
        "/health": {"get": {}}},
    "components": {"schemas": {"PredictRequest": {
        "properties": {"input": {"type": "string", "title": "Input"}}, "type": "object",
        "required": ["input"], "title": "PredictRequest"}}},
}


def test_a_body_behind_a_ref_is_followed() -> None:
    schema = request_schema(LITSERVE_TYPED, "/predict")
    assert schema is not None and schema["properties"]["input"]["type"] == "string"
    assert body_fields(schema) == [("input", {"type": "string", "title": "Input"}, True)]
    assert request_schema(LITSERVE_TYPED, "/health") is None  # no POST
    untyped = {"paths": {"/predict": {"post": {"responses": {}}}}}  # LitServe's untyped decode_request
    assert request_schema(untyped, "/predict") is None


def test_all_of_and_nested_refs_merge_and_a_loop_stops() -> None:
    spec = {"components": {
        "schemas": {"Base": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    "Item": {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/Item"}}},
                    "Full": {"allOf": [{"$ref": "#/components/schemas/Base"},
                                       {"properties": {"b": {"$ref": "#/components/schemas/Item"}}}]}},
        "requestBodies": {"Body": {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/Full"}}}}}},
        "paths": {"/go": {"post": {"requestBody": {"$ref": "#/components/requestBodies/Body"}}}}}
    schema = request_schema(spec, "/go")
    assert schema is not None and [n for n, _, _ in body_fields(schema)] == ["a", "b"]
    assert [r for _, _, r in body_fields(schema)] == [True, False]
    assert schema["properties"]["b"]["properties"]["x"]["type"] == "object"  # followed, then cut off
    assert resolve(spec, {"$ref": "#/nowhere"}) == {}


def test_the_draft_sends_the_declared_fields() -> None:
    draft = draft_for(HttpTarget(["/predict"], LITSERVE_TYPED), None)
    assert not draft.fill_in
    assert draft.endpoint == {"method": "POST", "path": "/predict", "body": {"input": "$0"}}
    assert "declares POST /predict's JSON body: input (string)" in draft.about[0]
    template = draft_for(HttpTarget(["/predict"], {"paths": {"/predict": {"post": {}}}}), None)
    assert template.fill_in and "declares no JSON body for /predict" in template.about[0]


FASTAPI_APP = '''
from fastapi import FastAPI
from pydantic import BaseModel

class Query(BaseModel):
    text: str
    top_k: int = 3
    temperature: float

app = FastAPI()

@app.post("/predict")
def predict(query: Query) -> dict:
    return {"words": len(query.text.split()), "k": query.top_k}
'''


@pytest.fixture
def fastapi_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A FastAPI app with a typed body (a pydantic model: its /openapi.json names it by $ref), served by
    uvicorn in a thread."""
    import uvicorn

    (tmp_path / "typed_app.py").write_text(FASTAPI_APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config("typed_app:app", host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/openapi.json", timeout=2).raise_for_status()
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url
    server.should_exit = True
    thread.join(10)


def test_init_then_run_on_a_typed_fastapi_app_has_no_errors(fastapi_url: str, tmp_path: Path) -> None:
    """The body drafted from the app's own schema (text, top_k, temperature: a string, an integer and a
    number) is what it accepts: 12 requests, none refused."""
    scenario = tmp_path / "typed.yaml"
    out = CliRunner().invoke(app, ["init", fastapi_url, "-o", str(scenario)])
    assert out.exit_code == 0, out.output
    drafted = yaml.safe_load(scenario.read_text())
    assert drafted["endpoint"]["body"] == {"text": "$0", "temperature": "$1", "top_k": "$2"}, drafted
    run = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.requests=12", "--set",
                                   "load.warmup=0", "--no-live", "--out", str(tmp_path / "run")])
    assert run.exit_code == 0, run.output
    records = read_records(tmp_path / "run")
    assert len(records) == 12 and all(r.ok for r in records), [r.error_message for r in records]
