"""Real Gradio apps launched with `auth=`: 3.50.2 (ws) and 4.44.1 (sse_v3) at the root, and the main
venv's 6.x (under /gradio_api) mounted under a sub-path with gr.mount_gradio_app(path="/demo",
auth=...); more releases with QBENCH_GRADIO_VERSIONS (5.50.0 passes too). qbench logs in as the
official client does and runs with 0 errors, also through the CLI (--target .../demo --auth
USER:PASS); a wrong password and a missing login stop at once with the key to set. The apps start at
once (module scope): their start-up is most of the time here."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import TargetError
from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.scenario.schema import parse_scenario

from .conftest import EXTRA
from .envs import RELEASES, EnvError, ensure_env
from .servers import APP, MAIN, serve_releases

USER, PASSWORD = "alice", "gradio-pw-7f3a9"


# 5.50.0 logs in as 6.x does (the same route, cookies and /gradio_api prefix): left to
# QBENCH_GRADIO_VERSIONS=5.50.0, to keep these start-ups (most of this file's time) to three.
RELEASES_HERE = [v for v in RELEASES if not v.startswith("5.")]
VERSIONS = [*RELEASES_HERE, *EXTRA, MAIN]


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, str | Exception]]:
    """version -> the URL of the test app launched with auth=[(USER, PASSWORD)] (or why it has none)."""
    missing: dict[str, str | Exception] = {}
    for version in [*RELEASES_HERE, *EXTRA]:
        try:
            ensure_env(version)
        except EnvError as exc:
            missing[version] = exc
    wanted = [v for v in VERSIONS if v not in missing]
    options = {"auth": [[USER, PASSWORD]]}
    with serve_releases(
        [(v, {**options, **({"mount": "/demo"} if v == MAIN else {})}) for v in wanted]
    ) as urls:
        yield {**missing, **dict(zip(wanted, urls, strict=True))}


@pytest.fixture(params=VERSIONS)
def locked(request: pytest.FixtureRequest, apps: dict[str, str | Exception]) -> tuple[str, str]:
    """(version, url) of one release's app."""
    version = str(request.param)
    url = apps[version]
    if isinstance(url, Exception):
        pytest.skip(f"gradio {version}: its env could not be built: {url}")
    return version, url


def run(url: str, tmp_path: Path, auth: dict[str, Any] | None) -> RunResult:
    raw = {
        "name": "echo",
        "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"value": "hi"}]},
        "load": {"users": 2, "requests": 6, "sessions": 2, "timeout": 30},
        **({"auth": auth} if auth else {}),
    }
    return run_scenario(parse_scenario(raw), target=url, out_dir=tmp_path / "run", live=False)


def test_login_then_zero_errors(locked: tuple[str, str], tmp_path: Path) -> None:
    version, url = locked
    result = run(url, tmp_path, {"login": {"username": USER, "password": PASSWORD}})
    assert len(result.records) == 6
    assert all(r.ok for r in result.records), (version, [r.error_message for r in result.records][:2])
    assert result.run_info.auth["logins"] == 2  # one per session (login.per: session)
    assert result.run_info.auth["login_needed"] is True


def test_wrong_or_missing_credentials_name_the_key(locked: tuple[str, str], tmp_path: Path) -> None:
    version, url = locked
    with pytest.raises(
        TargetError, match=r"login as 'alice' was refused \(HTTP 400: .*Incorrect credentials"
    ):
        run(url, tmp_path, {"login": {"username": USER, "password": "wrong"}})
    with pytest.raises(TargetError, match="HTTP 401: this app asks for a login: set auth.login"):
        run(url, tmp_path, None)


def test_cli_with_auth_and_a_mounted_app(apps: dict[str, str | Exception], tmp_path: Path) -> None:
    url = apps[MAIN]
    assert isinstance(url, str) and url.endswith("/demo")
    path = tmp_path / "echo.yaml"
    scenario = {
        "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"value": "hi"}]},
        "load": {"rate": 10, "duration": 1, "timeout": 30},
    }
    path.write_text(yaml.safe_dump(scenario))
    args = ["run", str(path), "--target", url, "--auth", f"{USER}:{PASSWORD}", "--out", str(tmp_path / "r")]
    out = CliRunner().invoke(app, [*args, "--no-live"])
    assert out.exit_code == 0, out.output
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["auth"]["logins"] == 1
    assert (
        info["server"]["gradio"]["api_prefix"] == "/gradio_api"
    )  # /demo/config, /demo/login, /demo/gradio_api
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["completed_ok"] == summary["requests"] == 10


def test_launch_mode_sweep_logs_in_to_each_launched_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`qbench sweep --launch` of an app with auth=: ready although /config answers 401, then each
    point's run logs in to the app just launched."""
    from qbench.tune.sweep.command import run_sweep
    from qbench.tune.sweep.config import SweepOptions, build_config

    monkeypatch.setenv("QBENCH_APP_AUTH", f"{USER}:{PASSWORD}")  # inherited by the launched app
    raw = {
        "name": "locked",
        "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"value": "hi"}]},
        # 20 requests, not a second of a closed loop on echo (hundreds); no warm-up to leave out
        "load": {"users": 2, "requests": 20, "timeout": 20},
        "slo": {"p95_latency_s": 3.0},
        "auth": {"login": {"username": USER, "password": PASSWORD}},
        "sweep": {"capacity_trials": 0, "warmup": 0},
    }
    path = tmp_path / "locked.yaml"
    path.write_text(yaml.safe_dump(raw))
    launch = f"{shlex.quote(sys.executable)} {shlex.quote(str(APP))}"
    options = SweepOptions(
        str(path),
        grid=["default_concurrency_limit=2"],
        launch=launch,
        out_root=str(tmp_path / "reports"),
        ready_timeout_s=120,
    )
    result = run_sweep(build_config(options))
    assert [r.status for r in result.results] == ["ok"], [r.reason for r in result.results]
    assert result.results[0].error_rate == 0
    (run_json,) = (result.sweep_dir / "points").rglob("run.json")
    assert json.loads(run_json.read_text())["auth"]["logins"] == 2
