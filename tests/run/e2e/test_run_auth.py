"""`qbench run` against apps behind a login or a token (the reference server with auth), every
protocol; wrong or missing credentials end the run at once with the key to set; re-login after a
server forgot its tokens; no secret in any file qbench writes or in its terminal output."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import TargetError
from qbench.run.pipeline import run_scenario
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread
from tests.run.conftest import scenario, serve_aiohttp

PASSWORD = "pw-" + uuid.uuid4().hex[:12]
TOKEN = "tok-" + uuid.uuid4().hex[:12]
USERS = {"alice": PASSWORD, "bob": PASSWORD + "b", "carol": PASSWORD + "c"}
FUNCTIONS = [
    {"api_name": "work", "workload": "sleep", "params": {"base_ms": 10}, "concurrency_limit": None},
    {"api_name": "chat", "workload": "tokens", "params": {"tokens": 4, "ttft_ms": 5, "interval_ms": 1}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = synthetic_settings(functions=FUNCTIONS, auth={"users": USERS, "tokens": [TOKEN]})
    with serve_in_thread(settings) as running:
        yield running


def gradio_scenario(auth: dict[str, Any] | None = None, load: dict[str, Any] | None = None) -> Any:
    return scenario(
        endpoint={"api_name": "work"},
        payload={"inputs": [{"text": {"words": [2, 4]}}]},
        load=load or {"burst": 6, "timeout": 10},
        **({"auth": auth} if auth else {}),
    )


def run(spec: Any, server: RunningServer, tmp_path: Path) -> Any:
    return run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)


def test_login_then_every_request_succeeds(server: RunningServer, tmp_path: Path) -> None:
    result = run(gradio_scenario({"login": {"username": "alice", "password": PASSWORD}}), server, tmp_path)
    assert [r.ok for r in result.records] == [True] * 6
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["auth"]["logins"] == 1 and info["auth"]["relogins"] == 0 and info["auth"]["login_needed"]
    assert info["scenario"]["auth"]["login"]["password"] == "***"
    assert "HTTP 401" in info["server_traces"]["note"]  # traces behind the login: said, not a failure


def test_generator_processes_log_in_each_with_accounts_of_their_own(
    server: RunningServer, tmp_path: Path
) -> None:
    users = tmp_path / "users.csv"
    users.write_text("".join(f"{u},{p}\n" for u, p in list(USERS.items())[:2]))
    before = set(server.app.state.logins.sessions)
    load = {"users": 2, "requests": 4, "timeout": 10, "processes": 2}
    result = run(gradio_scenario({"login": {"users": str(users)}}, load), server, tmp_path)
    assert len(result.records) == 4 and all(r.ok for r in result.records)
    assert result.run_info.auth["logins"] == 2  # one user per process, each logged in
    new = [u for t, u in server.app.state.logins.sessions.items() if t not in before]
    assert sorted(new) == ["alice", "alice", "bob"]  # the parent's discovery, then process k as user k


@pytest.mark.parametrize(("per", "logins"), [("session", 3), ("run", 1)])
def test_each_user_logs_in_on_its_own_unless_per_run(
    server: RunningServer, tmp_path: Path, per: str, logins: int
) -> None:
    before = set(server.app.state.logins.sessions)
    auth = {"login": {"username": "alice", "password": PASSWORD, "per": per}}
    result = run(gradio_scenario(auth, {"users": 3, "requests": 6, "timeout": 10}), server, tmp_path)
    assert all(r.ok for r in result.records) and result.run_info.auth["logins"] == logins
    assert len(set(server.app.state.logins.sessions) - before) == logins  # distinct server-side tokens


@pytest.mark.parametrize("release", [3, 4])
def test_login_on_the_reference_servers_older_releases(release: int, tmp_path: Path) -> None:
    """gradio: 3 (ws at the root) and 4 (sse_v3 at the root) take the same login and cookies."""
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 10}}
    settings = synthetic_settings(functions=[work], gradio=release, auth={"users": USERS})
    with serve_in_thread(settings) as locked:
        auth = {"login": {"username": "bob", "password": USERS["bob"]}}
        result = run(gradio_scenario(auth, {"users": 2, "requests": 4, "timeout": 10}), locked, tmp_path)
        assert all(r.ok for r in result.records), [r.error_message for r in result.records][:2]
        assert result.run_info.server["gradio"]["protocol"] == ("ws" if release == 3 else "sse_v3")
        with pytest.raises(TargetError, match="set auth.login"):
            run(gradio_scenario(None), locked, tmp_path / "bare")


def test_users_file_gives_each_user_its_own_account(server: RunningServer, tmp_path: Path) -> None:
    users = tmp_path / "users.csv"
    users.write_text("".join(f"{u},{p}\n" for u, p in USERS.items()))
    before = set(server.app.state.logins.sessions)
    spec = gradio_scenario({"login": {"users": str(users)}}, {"users": 3, "requests": 9, "timeout": 10})
    result = run(spec, server, tmp_path)
    assert len(result.records) == 9 and all(r.ok for r in result.records)
    assert result.run_info.auth["logins"] == 3
    new = {t: u for t, u in server.app.state.logins.sessions.items() if t not in before}
    assert sorted(new.values()) == sorted(USERS)


def test_bearer_from_the_environment(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QB_TEST_TOKEN", TOKEN)
    result = run(gradio_scenario({"bearer": "${QB_TEST_TOKEN}"}), server, tmp_path)
    assert all(r.ok for r in result.records)
    assert result.run_info.scenario["auth"]["bearer"] == "${QB_TEST_TOKEN}"


def test_openai_protocol_with_a_bearer_key(server: RunningServer, tmp_path: Path) -> None:
    spec = scenario(
        protocol="openai",
        endpoint={"model": "chat", "max_tokens": 4},
        payload={"inputs": [{"text": {"words": [2, 4]}}]},
        load={"burst": 3, "timeout": 10},
        auth={"bearer": TOKEN},
    )
    result = run(spec, server, tmp_path)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    with pytest.raises(TargetError, match="HTTP 401: this app asks for a login: set auth.login"):
        run(spec.model_copy(update={"auth": type(spec.auth)()}), server, tmp_path / "no")


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (None, r"/config: HTTP 401: this app asks for a login: set auth.login"),
        (
            {"login": {"username": "alice", "password": "wrong"}},
            r"login as 'alice' was refused .*check auth.login",
        ),
        ({"bearer": "not-the-token"}, r"HTTP 401: the credentials were refused: check auth.bearer"),
    ],
)
def test_missing_or_wrong_credentials_end_the_run_at_once(
    server: RunningServer, tmp_path: Path, auth: dict[str, Any] | None, message: str
) -> None:
    t0 = time.perf_counter()
    with pytest.raises(TargetError, match=message):
        run(gradio_scenario(auth), server, tmp_path)
    assert time.perf_counter() - t0 < 10
    assert not (tmp_path / "run").exists()  # nothing written before the target accepted us


def test_a_401_after_a_restart_logs_in_once_more(server: RunningServer, tmp_path: Path) -> None:
    spec = gradio_scenario(
        {"login": {"username": "alice", "password": PASSWORD}}, {"rate": 20, "duration": 1.5, "timeout": 10}
    )
    forget = threading.Timer(0.6, server.app.state.logins.forget)  # the server "restarts" mid-run
    forget.start()
    try:
        result = run(spec, server, tmp_path)
    finally:
        forget.cancel()
    assert all(r.ok for r in result.records), [r.error_message for r in result.records if not r.ok][:3]
    assert result.run_info.auth["relogins"] == 1 and result.run_info.auth["logins"] == 2
    assert json.loads((result.run_dir / "summary.json").read_text())["auth"]["relogins"] == 1


@pytest.fixture
def keyed_echo() -> Iterator[str]:
    """Plain HTTP: POST /echo answers only with `X-Api-Key: TOKEN`, else 401."""

    async def echo(request: web.Request) -> web.Response:
        if request.headers.get("X-Api-Key") != TOKEN:
            return web.json_response({"error": "missing api key"}, status=401)
        return web.json_response(await request.json())

    application = web.Application()
    application.add_routes([web.post("/echo", echo)])
    with serve_aiohttp(application) as url:
        yield url


def test_http_protocol_with_a_key_header_and_a_clear_stop_without_it(keyed_echo: str, tmp_path: Path) -> None:
    spec = scenario(
        protocol="http",
        endpoint={"path": "/echo", "body": {"q": "$0"}},
        payload={"inputs": [{"text": {"words": [1, 2]}}]},
        load={"rate": 50, "duration": 1, "timeout": 5},
        auth={"headers": {"X-Api-Key": TOKEN}},
    )
    ok = run_scenario(spec, target=keyed_echo, out_dir=tmp_path / "ok", live=False)
    assert ok.records and all(r.ok for r in ok.records)
    bare = spec.model_copy(update={"auth": type(spec.auth)()})
    failed = run_scenario(bare, target=keyed_echo, out_dir=tmp_path / "no", live=False)
    assert "set auth.login" in str(failed.run_info.failed_opening)
    assert failed.run_info.stop_reason.startswith("stopped early") and len(failed.records) <= 50
    assert TOKEN not in (tmp_path / "ok" / "run.json").read_text()


def test_capacity_and_sweep_take_the_command_line_credentials(tmp_path: Path) -> None:
    from qbench.run.scenario.credentials import cli_overrides
    from qbench.tune.capacity.command import capacity_config
    from qbench.tune.sweep.config import SweepOptions, build_config

    path = tmp_path / "s.yaml"
    spec = {
        "target": "http://127.0.0.1:9",
        "endpoint": {"api_name": "work"},
        "load": {"rate": 2, "duration": 1},
    }
    path.write_text(yaml.safe_dump({**spec, "slo": {"p95_latency_s": 1}}))
    flags = cli_overrides("alice:pw", ["X-Api-Key: k1"], None)
    capacity = capacity_config(path, overrides=flags, out_root=tmp_path)
    assert capacity.scenario.auth.login is not None and capacity.scenario.auth.login.password == "pw"
    sweep = build_config(
        SweepOptions(str(path), grid=["rate=1,2"], target="http://127.0.0.1:9", out_root=str(tmp_path))
    ).with_auth(flags)
    assert sweep.scenario.auth.headers == {"X-Api-Key": "k1"}
    assert "pw" not in json.dumps(sweep.describe()) and "k1" not in json.dumps(sweep.describe())


# ---------------------------------------------------------------- no secret leaves memory


def secret_hits(root: Path, secrets: list[str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return hits


def test_no_secret_in_any_file_or_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password, token, key = (f"{kind}-{uuid.uuid4().hex}" for kind in ("pw", "tok", "key"))
    monkeypatch.setenv("QB_SECRET_TOKEN", token)
    server_yaml = {"functions": FUNCTIONS[:1], "auth": {"users": {"dora": password}, "tokens": [token]}}
    (tmp_path / "server.yaml").write_text(yaml.safe_dump(server_yaml))
    spec = {
        "name": "secret",
        "endpoint": {"api_name": "work"},
        "payload": {"inputs": [{"text": {"words": [2, 3]}}]},
        "load": {"users": 2, "duration": 1, "timeout": 10},
        "auth": {"cookies": {"tenant": key}, "headers": {"X-Api-Key": key}},
        "sweep": {"server": {"config": "server.yaml"}, "capacity_trials": 0, "warmup": 0.2},
    }
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(spec))
    out_root = tmp_path / "reports"
    runner = CliRunner()
    auth_args = [
        "--auth",
        f"dora:{password}",
        "--bearer-env",
        "QB_SECRET_TOKEN",
        "--header",
        f"X-Other-Key: {key}",
    ]
    outputs = []
    settings = synthetic_settings(functions=FUNCTIONS[:1], auth={"users": {"dora": password}})
    with serve_in_thread(settings) as server:
        run_dir = out_root / "run"
        args = ["run", str(path), "--target", server.url, "--out", str(run_dir), "--no-live", *auth_args]
        outputs.append(runner.invoke(app, args))
        assert outputs[-1].exit_code == 0, outputs[-1].output
        outputs.append(runner.invoke(app, ["report", str(run_dir)]))
        wrong = ["run", str(path), "--target", server.url, "--out", str(out_root / "wrong"), "--no-live"]
        outputs.append(runner.invoke(app, [*wrong, "--auth", f"dora:{password}x"]))
        assert outputs[-1].exit_code == 2 and "check auth.login" in outputs[-1].output
    sweep_args = [
        "sweep",
        str(path),
        "--grid",
        "concurrency_limit=1",
        "--duration",
        "1",
        "--out",
        str(out_root),
    ]
    for mode in ([], ["--live"]):  # relaunch: a server per point; live: one, reconfigured
        outputs.append(runner.invoke(app, [*sweep_args, *mode, *auth_args]))
        assert outputs[-1].exit_code == 0, outputs[-1].output
    sweep_dirs = [p for p in out_root.iterdir() if p.name not in ("run", "wrong")]
    assert len(sweep_dirs) == 2
    outputs.append(runner.invoke(app, ["report", str(sweep_dirs[0])]))
    assert json.loads((run_dir / "run.json").read_text())["auth"]["logins"] == 2  # one per user
    for sweep_dir in sweep_dirs:  # each point's run logged in to its server
        points = list((sweep_dir / "points").rglob("run.json"))
        assert points and all(json.loads(p.read_text())["auth"]["logins"] >= 1 for p in points)
    assert (run_dir / "report.html").exists() and (sweep_dirs[0] / "report.html").exists()
    assert "1 account(s): 2 login(s), 0 re-login(s)" in (run_dir / "summary.md").read_text()
    secrets = [password, token, key]
    inputs = {tmp_path / "server.yaml", path}  # the files the user wrote hold them, nothing else may
    assert [hit for hit in secret_hits(tmp_path, secrets) if Path(hit.split(": ")[0]) not in inputs] == []
    for result in outputs:
        assert not [s for s in secrets if s in result.output], result.output


def test_a_token_in_the_url_query_is_masked_in_every_file(tmp_path: Path) -> None:
    """`?api_key=...` in the endpoint path (or the target): run.json and the records' error texts show ***."""
    from qbench.run.records.schema import read_records

    key = f"key-{uuid.uuid4().hex}"

    async def echo(request: web.Request) -> web.Response:
        if request.query.get("api_key") != key:
            return web.json_response({"error": f"bad key in {request.path_qs}"}, status=401)
        return web.json_response(await request.json())

    application = web.Application()
    application.add_routes([web.post("/echo", echo)])
    with serve_aiohttp(application) as url:
        for name, path in (("ok", f"/echo?api_key={key}"), ("missing", f"/nope?api_key={key}")):
            spec = scenario(
                protocol="http",
                endpoint={"path": path, "body": {"q": "$0"}},
                payload={"inputs": [{"text": {"words": [1, 2]}}]},
                load={"rate": 20, "duration": 0.5, "timeout": 5},
            )
            run_scenario(spec, target=url, out_dir=tmp_path / name, live=False)
    assert all(r.ok for r in read_records(tmp_path / "ok"))
    refused = read_records(tmp_path / "missing")
    assert refused and all(r.http_status == 404 and "api_key=***" in (r.error_message or "") for r in refused)
    assert secret_hits(tmp_path, [key]) == []
    assert "api_key=***" in (tmp_path / "ok" / "run.json").read_text()


def test_a_session_token_echoed_by_the_server_is_masked_in_the_records(tmp_path: Path) -> None:
    """The login's session cookie is no scenario value: the run's Authenticator learns it, and the load
    generator masks it in every record's error text (no process-wide registry)."""
    from qbench.run.records.schema import read_records

    session = f"sess-{uuid.uuid4().hex}"

    async def login(request: web.Request) -> web.Response:
        response = web.Response(text="ok")
        response.set_cookie("access-token-unsecure", session)
        return response

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=f"bad request, cookie was {request.headers.get('Cookie')}", status=500)

    application = web.Application()
    application.add_routes([web.post("/login", login), web.post("/echo", echo)])
    with serve_aiohttp(application) as url:
        spec = scenario(protocol="http", endpoint={"path": "/echo", "body": {"q": "$0"}},
                        payload={"inputs": [{"text": {"words": [1, 2]}}]}, load={"burst": 3, "timeout": 5},
                        auth={"login": {"username": "u", "password": "pw-echoed"}})
        run_scenario(spec, target=url, out_dir=tmp_path / "run", live=False)
    records = read_records(tmp_path / "run")
    assert records and all("cookie was" in (r.error_message or "") for r in records)
    assert secret_hits(tmp_path, [session]) == []
