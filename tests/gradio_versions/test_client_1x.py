"""The official gradio_client 1.x (the last line that speaks Gradio 3's `ws` protocol), from its own
env, against the reference server in `gradio: 3` mode: predict, a generator's outputs and status,
batched calls, and a failing function raising."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from reference_server.settings import parse_settings
from reference_server.testing import serve_in_thread

from .envs import CLIENT_1X, EnvError, ensure_client_env

SCRIPT = Path(__file__).with_name("client_1x.py")
FUNCTIONS = [
    {"api_name": "echo", "workload": "echo"},
    {"api_name": "gen", "workload": "stream", "params": {"chunks": 3, "interval_ms": 5}},
    {"api_name": "batch", "workload": "sleep", "params": {"base_ms": 50}, "batch": True, "max_batch_size": 4},
    {"api_name": "fail", "workload": "fail"},
]


def test_gradio_client_1x_drives_the_gradio3_server() -> None:
    try:
        python = ensure_client_env()
    except EnvError as exc:
        pytest.skip(f"gradio_client {CLIENT_1X}: its env could not be built: {exc}")
    settings = parse_settings({"gradio": 3, "functions": FUNCTIONS, "queue": {"concurrency_count": 2},
                               "launch": {"port": 0}})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with serve_in_thread(settings) as server:
        proc = subprocess.run([str(python), str(SCRIPT), server.url], capture_output=True, text=True,
                              timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "protocol": "ws",
        "echo": "hi",
        "gen": "x 1 2",
        "gen_outputs": ["x", "x 1", "x 1 2"],
        "gen_status": "FINISHED",
        "batch": ["b0", "b1", "b2"],
        "fail": "ValueError",
    }
