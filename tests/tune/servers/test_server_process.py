"""qbench.tune.servers.server_process: the one subprocess starter of the reference server."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from qbench.errors import ServerLaunchError
from qbench.run.control import read_status
from qbench.tune.servers.server_process import (
    BLOCK_PORTS,
    ServerHandle,
    free_port,
    free_port_block,
    reconfigure,
    reference_server_process,
    start_reference_server,
    wait_ready,
)


def test_a_ready_server_appended_log_extra_flags_and_a_clean_stop(tmp_path: Path) -> None:
    """One server for all of it (a start costs seconds): ready on the announced URL, `args` reach its
    command line, a log that already holds an older server's ready line is read past it, and after the
    block the process group is gone and a status read answers None rather than raising."""
    log = tmp_path / "step.log"
    log.write_text("reference server ready on http://127.0.0.1:1\n")
    token = "-starts-with-a-dash"  # secrets.token_urlsafe begins with "-" once in 64: still one argument
    with reference_server_process("echo", args=["--max-size", "3"], log_path=log, work_dir=tmp_path,
                                  admin_token=token) as h:
        assert h.base_url.startswith("http://127.0.0.1:") and h.base_url != "http://127.0.0.1:1"
        admin = httpx.post(h.base_url + "/admin/config", json={}, timeout=5,
                           headers={"Authorization": f"Bearer {token}"})
        assert admin.status_code == 200, admin.text
        assert httpx.get(h.base_url + "/config", timeout=5).status_code == 200
        status = read_status(h.base_url)
        assert status is not None and status["settings"]["functions"][0]["api_name"] == "echo"
        assert status["settings"]["queue"]["max_size"] == 3
        process = h.process
    assert process is not None and process.poll() is not None
    assert log.read_text().count("reference server ready on") == 2
    with pytest.raises(httpx.ConnectError):
        httpx.get(h.base_url + "/config", timeout=2)
    assert read_status(h.base_url) is None


def test_a_server_that_cannot_start_is_reported_with_its_log() -> None:
    bad = {"functions": [{"api_name": "x", "workload": "no-such-workload"}]}
    with pytest.raises(ServerLaunchError, match="before ready"), start_reference_server(bad):
        pass


def test_control_plane_errors_name_the_route_and_status(echo_server: Any) -> None:
    """reconfigure/wait_ready against a server in a thread: a refused token, a dead URL, a server that is
    listening without the probed route."""
    wrong_token = ServerHandle(base_url=echo_server.url, process=None, admin_token="wrong")
    with pytest.raises(ServerLaunchError, match=r"POST /admin/config refused \(40\d\)"):
        reconfigure(wrong_token, {"queue": {"max_size": 3}})
    gone = ServerHandle(base_url=f"http://127.0.0.1:{free_port()}", process=None, admin_token="t")
    with pytest.raises(ServerLaunchError, match="POST /admin/config failed"):
        reconfigure(gone, {})
    with pytest.raises(ServerLaunchError, match="not ready after"):
        wait_ready(gone, timeout_s=0.5)
    wait_ready(ServerHandle(base_url=echo_server.url, process=None), timeout_s=5)
    wait_ready(ServerHandle(base_url=echo_server.url, process=None), 5, "/nope", any_status=True)


def test_a_port_block_is_free_from_end_to_end_and_below_the_ephemeral_range() -> None:
    """The cause of a flaky SSR sweep: Gradio put a static-file worker on the port after its Python
    side without checking it, and another server held it (HTTP 502 for the page's assets). A block has
    every port free, and a candidate block with one port taken is passed over."""
    start = free_port_block(6)
    assert BLOCK_PORTS[0] <= start and start + 6 <= BLOCK_PORTS[1]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        other = free_port_block(4)
        assert free_port_block(4, candidates=[taken - 2, other]) == other  # taken - 2 .. taken + 1: no
        assert free_port_block(4, candidates=[taken]) != taken  # no block: the OS's pick, never the held one


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    """free_port() draws where no outgoing connection takes the port before the server binds it (a port
    from bind(0) is ephemeral: a busy box's next client connection took one before a Gradio app bound it)."""
    ephemeral = [int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()]
    for _ in range(20):
        port = free_port()
        assert BLOCK_PORTS[0] <= port < BLOCK_PORTS[1] and not ephemeral[0] <= port <= ephemeral[1]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
