"""qbench.tune.knobs.reference: a point's knobs applied to the reference server's settings."""

from __future__ import annotations

from typing import Any

from qbench.tune.knobs.reference import admin_body, apply_server_knobs

from ..conftest import SERVER


def test_apply_server_knobs_targets_the_scenario_function() -> None:
    base: dict[str, Any] = {
        **SERVER,
        "functions": [*SERVER["functions"], {"api_name": "other", "workload": "echo"}],
    }
    knobs = {
        "concurrency_limit": 2,
        "max_batch_size": 8,
        "max_threads": 4,
        "max_size": "none",
        "batch_wait_ms": 5,
    }
    out = apply_server_knobs(base, knobs, "predict")
    fn, other = out["functions"]
    assert (fn["concurrency_limit"], fn["max_batch_size"], fn["batch"], fn["batch_wait_ms"]) == (
        2,
        8,
        True,
        5,
    )
    assert other == {"api_name": "other", "workload": "echo"}
    assert out["launch"] == {"max_threads": 4} and out["queue"] == {"max_size": None}
    assert base["functions"][0]["concurrency_limit"] == 1  # the base is not modified
    assert admin_body(out) == {
        "functions": {
            "predict": {"concurrency_limit": 2, "batch": True, "max_batch_size": 8, "batch_wait_ms": 5},
            "other": {},
        },
        "queue": {"max_size": None},
        "launch": {"max_threads": 4},
    }
