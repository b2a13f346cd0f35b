"""Shared fixtures: a tiny sleep scenario whose points take ~2 s each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

SERVER: dict[str, Any] = {
    "functions": [
        {
            "api_name": "predict",
            "workload": "sleep",
            "params": {"base_ms": 50, "per_item_ms": 10},
            "batch": True,
            "max_batch_size": 4,
            "concurrency_limit": 1,
        }
    ],
}


# The same server, 4x slower a batch (240 ms for 4): where a test compares two points' served rates, the
# sleeps must be the limit at any machine speed. At SERVER's 44 and 88 req/s a busy box's CPU was (a
# relaunch sweep measured 27 and 33 req/s for limits 1 and 2); here the ceilings are 16.7 and 33 req/s.
SLOW_SERVER: dict[str, Any] = {
    "functions": [{**SERVER["functions"][0], "params": {"base_ms": 200, "per_item_ms": 10}}],
}


def write_scenario(tmp_path: Path, sweep: dict[str, Any] | None = None, server: dict[str, Any] | None = None,
                   **load: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "server.yaml").write_text(yaml.safe_dump(server or SERVER))
    scenario = {
        "name": "tiny",
        "protocol": "gradio",
        "endpoint": {"api_name": "predict"},
        "payload": {"inputs": [{"text": {"words": [2, 3]}}]},
        "load": {**({} if "rate" in load else {"users": 2}), "duration": 2, "timeout": 10, **load},
        "slo": {"p95_latency_s": 1.0},
        "sweep": {"server": {"config": "server.yaml"}, "capacity_trials": 0, "warmup": 0.3, **(sweep or {})},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


@pytest.fixture
def scenario_path(tmp_path: Path) -> Path:
    return write_scenario(tmp_path)


def sleep_preset_sweep(tmp_path: Path, search: str) -> Any:
    """`search` over concurrency_limit 1-2 x max_batch_size 1-16 on the live sleep preset: each point 4
    rounds of its users past a 0.3 s warm-up, sized in requests (a point of 1.2 s on a busy box stalled
    1.2 s after its first 12 requests: all in the warm-up, no observation of batches of 1, no fit)."""
    from qbench.tune.sweep.command import run_sweep
    from qbench.tune.sweep.config import SweepOptions, build_config

    path = write_scenario(tmp_path, sweep={"server": {"preset": "sleep"}})
    options = SweepOptions(
        str(path),
        grid=["concurrency_limit=1,2", "max_batch_size=1,2,4,8,16"],
        links=["users=2*concurrency_limit*max_batch_size",
               "load.requests=8*concurrency_limit*max_batch_size+16"],
        slo={"p95_latency_s": 0.35},
        search=search,
        live=True,
        duration=60,  # a cap: the points stop at their requests
        out_root=str(tmp_path / "reports"),
    )
    return run_sweep(build_config(options))
