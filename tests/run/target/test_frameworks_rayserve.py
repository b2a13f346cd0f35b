"""qbench.run.target.frameworks for Ray Serve: an app known from its proxy's route table (GET /-/routes), the
keys its `__call__` reads from `await request.json()` read from the app's code; and the real Ray Serve 2.60
app the suite serves (its own cached virtualenv, a Ray instance of its own). `qbench init` on it, live, is
tests/docs/test_docs_rayserve.py's: one Ray instance for the docs' draft and this module's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from qbench.run.target.frameworks import RAYSERVE_CAP, rayserve, request_keys
from tests.gradio_versions.envs import EnvError, ensure_named_env
from tests.run.target.test_frameworks import stop_group, wait_healthy

RAYSERVE = "2.60.0"
RAYSERVE_APP = Path(__file__).resolve().parents[3] / "examples" / "rayserve" / "app.py"


def test_ray_serve_is_known_by_its_route_table() -> None:
    found = rayserve({"/": "default", "/chat": "chat"})
    assert found is not None and found.name == "Ray Serve" and found.queue_cap == RAYSERVE_CAP
    assert found.facts == "applications at / (default), /chat (chat)"
    assert found.convention == {"input": "$0"} and "qbench init --app app.py" in found.schema_hint
    empty = rayserve({})
    assert empty is not None and empty.facts == "no application deployed yet"
    for other in (None, [], {"routes": []}, {"version": "6.31.0"}, {"/": 1}, {"x": "default"}):
        assert rayserve(other) is None  # a Gradio /info, BentoML's schema, ...


def test_the_keys_a_deployment_reads_from_its_request_come_from_the_code(tmp_path: Path) -> None:
    assert request_keys(RAYSERVE_APP) == ["input"]
    source = tmp_path / "app.py"
    source.write_text(
        "class A:\n"
        "    async def __call__(self, request):\n"
        "        prompt = (await request.json())['prompt']\n"
        "        body = await request.json()\n"
        "        return prompt, body.get('max_tokens'), body['prompt'], other['x']\n"
        "class B:\n"
        "    def __call__(self, x):\n"
        "        return x['not_a_body']\n")
    assert request_keys(source) == ["prompt", "max_tokens"]


def rayserve_python() -> Path:
    """The interpreter of Ray Serve's own cached virtualenv (`ray[serve]`); skips where it cannot be
    built."""
    try:
        return ensure_named_env(f"rayserve-{RAYSERVE}", [f"ray[serve]=={RAYSERVE}"], "ray.serve")
    except EnvError as exc:
        pytest.skip(f"ray[serve] {RAYSERVE}'s env cannot be built here: {exc}")


def ray_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Ray Serve app of the suite: a Ray instance of its own (RAY_ADDRESS=local:
    ray.init() would join another test's), no usage report."""
    return {**os.environ, "RAY_ADDRESS": "local", "RAY_USAGE_STATS_ENABLED": "0", **(extra or {})}


@contextlib.contextmanager
def rayserve_app(port: int, folder: Path) -> Iterator[str]:
    """`python examples/rayserve/app.py PORT` in Ray Serve's env (its log in `folder`/app.log) until its
    application answers; the whole process group (Ray's own processes with it) stopped after."""
    python = rayserve_python()
    log = folder / "app.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(python), str(RAYSERVE_APP), str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=ray_env(), cwd=folder, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log, "/-/healthz", timeout_s=180.0)
        wait_deployed(url, proc, log)
        yield url
    finally:
        stop_group(proc)


def wait_deployed(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180.0) -> None:
    """Ray Serve's proxy answers before the application runs: its route table lists it then."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the app exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            if httpx.get(f"{url}/-/routes", timeout=2).json():
                return
        time.sleep(0.3)
    raise AssertionError(f"{url}: no application deployed in {timeout_s:g} s: {log.read_text()[-2000:]}")
