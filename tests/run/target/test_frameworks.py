"""qbench.run.target.frameworks: LitServe known from its /info, the request keys an untyped decode_request
reads read from the app's code; and `qbench init` on a real LitServe 0.2.19 app (its own cached virtualenv)
drafting a scenario that runs with no error, with and without `--app`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from qbench.run.target.frameworks import litserve, read_framework, request_keys
from qbench.tune.servers.server_process import free_port
from reference_server.testing import RunningServer
from tests.gradio_versions.envs import EnvError, ensure_named_env

HERE = Path(__file__).parent
LITSERVE = "0.2.19"
LITSERVE_APP = Path(__file__).resolve().parents[3] / "examples" / "litserve" / "app.py"
#: LitServe 0.2.19's GET /info for the app below (litserve.server's `info` route)
INFO = {"model": None, "server": {"devices": ["cpu"], "workers_per_device": 1, "timeout": 30,
                                  "stream": {"/predict": False}, "max_payload_size": None,
                                  "track_requests": False}}


def test_litserve_is_known_by_its_info() -> None:
    found = litserve(INFO)
    assert found is not None and found.name == "LitServe"
    assert found.facts == "1 worker per device on 1 cpu device, request timeout 30 s"
    assert found.streamed == () and found.convention == {"input": "$0"}
    two = litserve({"model": {"name": "m"}, "server": {**INFO["server"], "devices": [["cuda:0", "cuda:1"]],  # type: ignore[dict-item]
                                                       "workers_per_device": 2, "stream": {"/s": True}}})
    assert two is not None and two.facts.startswith("2 workers per device on 2 cuda devices")
    assert two.streamed == ("/s",)
    for other in (None, [], {"server": {}}, {"version": "6.31.0"}, {"server": {"workers_per_device": 1}}):
        assert litserve(other) is None  # a Gradio /info, a list, no model key ...


def test_the_keys_a_decode_request_reads_come_from_the_code(tmp_path: Path) -> None:
    assert request_keys(LITSERVE_APP) == ["input"]
    source = tmp_path / "app.py"
    source.write_text(
        "class A:\n"
        "    def decode_request(self, req, context=None):\n"
        "        text = req.get('prompt')\n"
        "        return text, req['max_tokens'], req.get('prompt'), req[0], other['x']\n"
        "class B:\n"
        "    async def decode_request(self, request: Typed):\n"
        "        return request.input\n")  # a typed one: its schema is in the OpenAPI, no key here
    assert request_keys(source) == ["prompt", "max_tokens"]
    source.write_text("def predict(x):\n    return x['input']\n")
    assert request_keys(source) == []


@pytest.fixture(scope="module")
def litserve_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LitServe 0.2.19 serving examples/litserve/app.py in its own virtualenv (in a folder of its own:
    LitServe writes a client.py where it runs)."""
    port, folder = free_port(), tmp_path_factory.mktemp("litserve")
    with litserve_app(str(port), {**os.environ, "MAX_BATCH_SIZE": "4"}, folder):
        yield f"http://127.0.0.1:{port}"


def framework_python(package: str, version: str) -> Path:
    """The interpreter of `package`=={version}'s own cached virtualenv; skips where it cannot be built."""
    try:
        return ensure_named_env(f"{package}-{version}", [f"{package}=={version}"], package)
    except EnvError as exc:
        pytest.skip(f"{package} {version}'s env cannot be built here: {exc}")


def litserve_python() -> Path:
    """The interpreter of LitServe's own cached virtualenv; skips where it cannot be built."""
    return framework_python("litserve", LITSERVE)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """The app's whole process group stopped (its workers outlive a SIGTERM to their parent)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def litserve_app(port: str, env: dict[str, str], folder: Path, url: str | None = None) -> Iterator[None]:
    """`python examples/litserve/app.py PORT` in LitServe's env, run in `folder` (its log there:
    app.log), until its /health (at `url`, default the port's) says ready; the whole process group
    stopped after (LitServe's inference and uvicorn workers outlive a SIGTERM to their parent). Skips
    where the env cannot be built."""
    python = litserve_python()
    log = folder / "app.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(python), str(LITSERVE_APP), port], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=folder, start_new_session=True)
    try:
        wait_healthy(url or f"http://127.0.0.1:{port}", proc, log)
        yield
    finally:
        stop_group(proc)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, path: str = "/health",
                 timeout_s: float = 120.0) -> None:
    """A framework's own readiness: GET `path` answers 200 once its workers are up (LitServe's /health is
    503 before; BentoML's /readyz)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the app exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}{path}: not ready in {timeout_s:g} s: {log.read_text()[-2000:]}")


def test_init_names_litserve_and_says_what_to_fill_in(litserve_url: str) -> None:
    result = CliRunner().invoke(app, ["init", litserve_url])
    assert result.exit_code == 0, result.output
    assert "a LitServe server (1 worker per device on 1 cpu device, request timeout 30 s)" in result.output
    assert "body: {input: $0}" in result.output and "FILL IN" in result.output
    assert "qbench init --app app.py" in result.output  # where the keys can come from


def test_a_running_server_is_named_by_what_it_serves(litserve_url: str, echo_server: RunningServer) -> None:
    found = read_framework(litserve_url)
    assert found is not None and found.name == "LitServe" and not found.queue_cap
    assert read_framework(echo_server.url) is None  # the reference server: no /info, no /schema.json
    assert read_framework("http://127.0.0.1:9") is None  # nothing listens


def test_init_with_the_app_reads_its_keys_and_the_scenario_runs_with_no_error(
    litserve_url: str, tmp_path: Path
) -> None:
    scenario = tmp_path / "litserve.yaml"
    result = CliRunner().invoke(app, ["init", litserve_url, "--app", str(LITSERVE_APP),
                                      "-o", str(scenario)])
    assert result.exit_code == 0, result.output
    assert "its app's code reads input" in result.output and "next: qbench run" in result.output
    assert yaml.safe_load(scenario.read_text())["endpoint"]["body"] == {"input": "$0"}
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.duration=null", "--set",
                                      "load.requests=12", "--set", "load.warmup=0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_records(out)
    assert len(records) == 12 and [r.error_kind for r in records] == [None] * 12, [
        r.error_message for r in records]
