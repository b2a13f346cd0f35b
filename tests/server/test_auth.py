"""The reference server's auth: Gradio 6.x's login route and cookies, bearer tokens, 401 elsewhere;
the official gradio_client logs in to it (interop)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client

from reference_server.auth import parse_auth_flags
from reference_server.launch import ServeOptions, settings_from_options
from reference_server.settings import SettingsError, synthetic_settings, with_overrides
from reference_server.testing import RunningServer, serve_in_thread

USERS = {"alice": "wonder-pw-1"}
TOKENS = ["tok-abc-123"]
PROTECTED = [
    ("GET", "/config"),
    ("GET", "/gradio_api/info"),
    ("POST", "/gradio_api/queue/join"),
    ("GET", "/gradio_api/queue/data?session_hash=x"),
    ("POST", "/gradio_api/upload"),
    ("GET", "/gradio_api/file=/tmp/x"),
    ("POST", "/gradio_api/run/echo"),
    ("POST", "/gradio_api/call/echo"),
    ("POST", "/predict/echo"),
    ("GET", "/v1/models"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = synthetic_settings(auth={"users": USERS, "tokens": TOKENS})
    with serve_in_thread(settings) as running:
        yield running


def login(url: str, user: str = "alice", password: str = USERS["alice"]) -> httpx.Response:
    return httpx.post(url + "/login", data={"username": user, "password": password})


def test_routes_answer_401_without_credentials(server: RunningServer) -> None:
    for method, path in PROTECTED:
        resp = httpx.request(method, server.url + path)
        assert resp.status_code == 401, (method, path, resp.status_code)
        assert resp.json() == {"detail": "Not authenticated"}
    for path in ("/status", "/healthz", "/metrics"):
        assert httpx.get(server.url + path).status_code == 200, path


def test_login_sets_gradio_cookies_and_opens_the_routes(server: RunningServer) -> None:
    resp = login(server.url)
    assert resp.status_code == 200 and resp.json() == {"success": True}
    names = sorted(resp.cookies.keys())
    cookie_id = server.app.state.logins.cookie_id
    assert names == sorted([f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"])
    assert "secure" in next(h for h in resp.headers.get_list("set-cookie") if "unsecure" not in h).lower()
    cookies = {k: v for k, v in resp.cookies.items() if "unsecure" in k}  # what plain http keeps
    config = httpx.get(server.url + "/config", cookies=cookies)
    assert config.status_code == 200 and config.json()["protocol"] == "sse_v3"
    assert httpx.get(server.url + "/gradio_api/info", cookies=cookies).status_code == 200
    assert httpx.get(server.url + "/gradio_api/login_check", cookies=cookies).status_code == 200
    assert httpx.get(server.url + "/gradio_api/login_check").status_code == 401


def test_wrong_password_is_400_incorrect_credentials(server: RunningServer) -> None:
    for user, password in (("alice", "nope"), ("bob", USERS["alice"]), ("", "")):
        resp = login(server.url, user, password)
        assert resp.status_code == 400 and resp.json() == {"detail": "Incorrect credentials."}


def test_bearer_token_and_a_forgotten_login(server: RunningServer) -> None:
    for header in ("Authorization", "X-HF-Authorization"):
        resp = httpx.get(server.url + "/config", headers={header: f"Bearer {TOKENS[0]}"})
        assert resp.status_code == 200, header
    assert httpx.get(server.url + "/config", headers={"Authorization": "Bearer wrong"}).status_code == 401
    cookies = dict(login(server.url).cookies)
    server.app.state.logins.forget()  # what a restart does
    assert httpx.get(server.url + "/config", cookies=cookies).status_code == 401


def test_settings_dumps_mask_auth_and_overrides_keep_it() -> None:
    settings = synthetic_settings(auth={"users": USERS, "tokens": TOKENS})
    assert settings.summary()["auth"] == {"users": {"alice": "***"}, "tokens": ["***"]}
    again = with_overrides(settings, {"queue.max_size": 4}, "test")
    assert again.auth.users == USERS and again.auth.tokens == TOKENS


def test_serve_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from_options(ServeOptions(auth=["u:p:x", "v:w"], auth_token=["t1"]))
    assert settings.auth.users == {"u": "p:x", "v": "w"} and settings.auth.tokens == ["t1"]
    monkeypatch.setenv("QBENCH_SERVER_AUTH", '{"users": {"e": "f"}}')
    assert settings_from_options(ServeOptions()).auth.users == {"e": "f"}
    with pytest.raises(SettingsError, match="--auth: expected USER:PASSWORD"):
        settings_from_options(ServeOptions(auth=["nocolon"]))
    assert parse_auth_flags([], ["t"]) == {"users": {}, "tokens": ["t"]}


def test_interop_gradio_client_logs_in(server: RunningServer) -> None:
    client = Client(server.url, auth=("alice", USERS["alice"]), verbose=False)
    try:
        assert client.predict("hello", api_name="/echo") == "hello"
    finally:
        client.close()
    with pytest.raises(Exception, match="(?i)invalid credentials|could not login"):
        Client(server.url, auth=("alice", "wrong"), verbose=False)
    client = Client(server.url, token=TOKENS[0], verbose=False)  # a Space's token: sent as X-HF-Authorization
    try:
        assert client.predict("hi", api_name="/echo") == "hi"
    finally:
        client.close()


def test_a_non_ascii_bearer_token_is_401_not_500() -> None:
    from starlette.testclient import TestClient

    from reference_server.http.app import build_app
    from reference_server.settings import synthetic_settings

    settings = synthetic_settings(functions=[{"api_name": "work", "workload": "echo"}],
                                  auth={"tokens": ["tok-123456"]})
    with TestClient(build_app(settings)) as client:
        refused = client.get("/config", headers={"Authorization": "Bearer caf\xe9".encode("latin-1")})
        assert refused.status_code == 401
        assert client.get("/config", headers={"Authorization": "Bearer tok-123456"}).status_code == 200
