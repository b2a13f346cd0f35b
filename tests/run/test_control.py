"""qbench.run.control against a reference server in a thread, a plain HTTP server and a closed port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from qbench.errors import ServerLaunchError
from qbench.run import control
from qbench.tune.servers.server_process import free_port
from reference_server.testing import RunningServer


def test_status_and_version_of_a_reference_server(echo_server: RunningServer) -> None:
    status = control.read_status(echo_server.url)
    assert status is not None and status["settings"]["functions"][0]["api_name"] == "echo"
    same = asyncio.run(control.read_status_async(echo_server.url, headers={"X-Probe": "1"}))
    assert same is not None and same["settings"] == status["settings"]
    assert control.read_gradio_version(echo_server.url)  # the release it emulates, e.g. "6.31.0"


def test_no_status_reads_as_none(http_echo: str) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    assert control.read_status(http_echo) is None  # listening, but no /status (404)
    assert control.read_status(gone) is None
    assert asyncio.run(control.read_status_async(gone)) is None
    assert control.read_gradio_version(gone) is None
    with pytest.raises(RuntimeError, match="did not come up"):
        control.wait_answering(gone + "/config", timeout_s=0.3)


def test_admin_config_moves_a_live_server_and_names_a_refusal(
    server_factory: Callable[..., AbstractContextManager[RunningServer]],
) -> None:
    with server_factory(admin_token="secret-token", queue={"max_size": 5}) as server:
        answer: Any = control.set_admin_config(server.url, {"queue": {"max_size": 3}}, "secret-token")
        assert answer is not None
        status = control.read_status(server.url)
        assert status is not None and status["settings"]["queue"]["max_size"] == 3
        with pytest.raises(ServerLaunchError, match=r"POST /admin/config refused \(40\d\)"):
            control.set_admin_config(server.url, {"queue": {"max_size": 4}}, "wrong")
