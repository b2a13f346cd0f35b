"""A sweep's config for a LitServe app (examples/litserve/app.py, read from its code): a knob LitServe
lacks ends the sweep before any load, naming the equivalent. The sweeps
themselves (each point's knobs proven from what LitServe held and the batches it handed the app, the
advice as LitServe code, a `--launch` command whose knob never reaches LitServe) run as
docs/litserve.md shows them: tests/docs/test_docs_litserve.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from qbench.tune.knobs.versions import KnobVersionError
from qbench.tune.sweep.config import SweepOptions, build_config
from tests.run.target.test_frameworks import LITSERVE_APP

APP = LITSERVE_APP
USERS = 16


def scenario(tmp_path: Path) -> Path:
    raw = {"name": "predict", "protocol": "http", "endpoint": {"method": "POST", "path": "/predict",
                                                               "body": {"input": "$0"}},
           "payload": {"inputs": [{"text": {"words": [1, 4]}}]},
           # sized in requests: 12 rounds of the users, the first the warm-up
           "load": {"users": USERS, "requests": 12 * USERS, "timeout": 30}, "slo": {"p95_latency_s": 5.0},
           "sweep": {"capacity_trials": 0, "warmup": 0.2}}
    path = tmp_path / "predict.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(("knob", "equivalent"), [("concurrency_limit=1,2", "workers_per_device"),
                                                  ("batch_wait_ms=10", "batch_timeout (seconds"),
                                                  ("max_size=8", "it has no equivalent")])
def test_a_knob_litserve_lacks_ends_the_sweep_before_any_load(tmp_path: Path, knob: str,
                                                              equivalent: str) -> None:
    with pytest.raises(KnobVersionError, match="is a LitServe app, which has no") as error:
        build_config(SweepOptions(str(scenario(tmp_path)), grid=[knob], app=str(APP),
                                  out_root=str(tmp_path / "reports")))
    assert equivalent in str(error.value)
    assert not (tmp_path / "reports").exists()
