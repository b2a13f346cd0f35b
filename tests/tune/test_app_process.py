"""qbench.tune.app_process: the user's own app, started per point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from qbench.errors import ScenarioError
from qbench.tune.app_process import knob_env, render_command


def test_launch_mode_readiness_for_a_plain_http_server(tmp_path: Path) -> None:
    import httpx

    from qbench.tune.app_process import launch_command

    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    with launch_command(command, {}, work_dir=tmp_path / "w", any_status=True, ready_path="/nope") as handle:
        assert httpx.get(handle.base_url + "/", timeout=5).status_code == 200
        process = handle.process
    assert process is not None and process.poll() is not None  # the process group was torn down


def test_launch_template_and_environment() -> None:
    argv = render_command(
        "python app.py --port {port} --c {concurrency_limit}", {"concurrency_limit": 4}, 8123
    )
    assert argv == ["python", "app.py", "--port", "8123", "--c", "4"]
    with pytest.raises(ScenarioError, match="max_batch_size"):
        render_command("app --b {max_batch_size}", {"concurrency_limit": 4}, 1)
    env = knob_env({"concurrency_limit": 4, "load.users": 8}, 8123)
    assert env["QBENCH_CONCURRENCY_LIMIT"] == "4" and env["QBENCH_LOAD_USERS"] == "8"
    assert env["QBENCH_PORT"] == env["GRADIO_SERVER_PORT"] == "8123"
