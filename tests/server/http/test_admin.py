"""/admin/config's rules (which knobs move, what a mistake answers) and the status endpoints.

tests/server/http/test_gradio_routes.py covers the token checks and one full reconfiguration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from reference_server.http.admin import _apply_dotted, _overrides
from reference_server.http.app import build_app
from reference_server.http.gradio_routes import ClientError
from reference_server.settings import ServerSettings, SettingsError, synthetic_settings

AUTH = {"Authorization": "Bearer tok"}


def two_functions(**fields: Any) -> ServerSettings:
    return synthetic_settings(functions=[{"api_name": "echo", "workload": "echo"},
                                         {"api_name": "gen", "workload": "stream", "params": {"chunks": 2}}],
                              **fields)


@pytest.mark.parametrize(
    ("body", "overrides"),
    [
        ({"show_error": True}, {"show_error": True}),
        ({"queue": {"max_size": 4, "status_update_rate": 0.5}},
         {"queue.max_size": 4, "queue.status_update_rate": 0.5}),
        ({"launch": {"max_threads": 2}}, {"launch.max_threads": 2}),
        ({"functions": {"gen": {"concurrency_limit": 3, "batch_wait_ms": 5}}},
         {"functions.1.concurrency_limit": 3, "functions.1.batch_wait_ms": 5}),
        # settings read from /status and posted back whole: fixed knobs at their current value are ignored
        ({"queue": {"max_size": 4, "leak_bytes_per_event": 0}, "launch": {"port": 7860, "max_threads": 2}},
         {"queue.max_size": 4, "launch.max_threads": 2}),
        ({}, {}),
    ],
)
def test_admin_bodies_become_dotted_overrides(body: dict[str, Any], overrides: dict[str, Any]) -> None:
    assert _overrides(body, two_functions()) == overrides


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"queue": {"leak_bytes_per_event": 9}}, "queue.leak_bytes_per_event cannot be changed at runtime"),
        ({"launch": {"port": 1}}, "launch.port cannot be changed at runtime"),
        ({"functions": {"gen": {"workload": "echo"}}}, "functions.gen.workload cannot be changed"),
        ({"functions": {"nope": {"batch": True}}}, "functions.nope: no such api_name"),
        ({"functions": {"gen": 3}}, "functions.gen: no such api_name (or its knobs are not a mapping)"),
        ({"functions": ["gen"]}, "unknown or malformed section 'functions'"),
        ({"queue": 2}, "unknown or malformed section 'queue'"),
        ({"heartbeat_interval_s": 1}, "unknown or malformed section 'heartbeat_interval_s'"),
    ],
)
def test_admin_bodies_that_cannot_apply_are_422_with_a_reason(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(ClientError) as caught:
        _overrides(body, two_functions())
    assert caught.value.status == 422 and reason in caught.value.detail


def test_apply_dotted_changes_only_the_named_knobs_and_keeps_secrets() -> None:
    before = two_functions(auth={"tokens": ["secret-1"], "users": {"ann": "pw"}})
    after = _apply_dotted(before, {"queue.max_size": 3, "functions.1.concurrency_limit": None})
    assert after.queue.max_size == 3 and after.functions[1].concurrency_limit is None
    assert after.auth.tokens == ["secret-1"] and after.auth.users == {"ann": "pw"}
    assert after.functions[0] == before.functions[0] and after.launch == before.launch
    assert before.queue.max_size is None  # a new object: the running settings are untouched


def test_apply_dotted_rejects_a_bad_value_by_its_key() -> None:
    with pytest.raises(SettingsError, match="max_threads"):
        _apply_dotted(two_functions(), {"launch.max_threads": 0})


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(two_functions(admin_token="tok"))) as c:
        yield c


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (b'{"functions": {"gen": {"batch": true}}}', "generator"),  # Gradio forbids batched generators
        (b'{"functions": {"echo": {"max_batch_size": 0}}}', "max_batch_size"),
    ],
)
def test_admin_mistakes_are_422_and_change_nothing(client: TestClient, content: bytes, reason: str) -> None:
    before = client.get("/status").json()["config_hash"]
    answer = client.post("/admin/config", content=content, headers=AUTH)
    assert answer.status_code == 422 and reason in answer.json()["detail"], answer.text
    assert client.get("/status").json()["config_hash"] == before


def test_admin_show_error_reaches_the_config(client: TestClient) -> None:
    assert client.get("/config").json()["show_error"] is False
    answer = client.post("/admin/config", json={"show_error": True}, headers=AUTH)
    try:
        assert answer.status_code == 200 and answer.json()["settings"]["show_error"] is True
        assert "admin_token" not in answer.json()["settings"]
        assert client.get("/config").json()["show_error"] is True
    finally:
        client.post("/admin/config", json={"show_error": False}, headers=AUTH)


def test_status_describes_the_process_and_each_workload(client: TestClient) -> None:
    status = client.get("/status").json()
    assert status["ready"] is True and status["device"] == "cpu" and status["jobs_running"] == 0
    assert set(status["workloads"]) == {"echo", "gen"} and status["workloads"]["gen"]["chunks"] == 2
    assert status["cpu_s"] > 0 and status["torch_cuda_memory"] is None and "gpu" not in status
    assert "admin_token" not in status["settings"]


def test_metrics_are_prometheus_text(client: TestClient) -> None:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE" in answer.text
