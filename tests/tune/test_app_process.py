"""qbench.tune.app_process: the user's own app, started per point."""

from __future__ import annotations

import sys
from pathlib import Path


def test_launch_mode_readiness_for_a_plain_http_server(tmp_path: Path) -> None:
    import httpx

    from qbench.tune.app_process import launch_command

    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    with launch_command(command, {}, work_dir=tmp_path / "w", any_status=True, ready_path="/nope") as handle:
        assert httpx.get(handle.base_url + "/", timeout=5).status_code == 200
        process = handle.process
    assert process is not None and process.poll() is not None  # the process group was torn down
