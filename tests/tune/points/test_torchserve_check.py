"""A TorchServe point's knobs proven from the launcher's record (qbench/tune/points/torchserve_check.py):
each model as TorchServe's management API describes it, the batch sizes its frontend handed the handler,
the worker processes that ran them, and the model-config.yaml that kept a knob from it."""

from __future__ import annotations

from typing import Any

from qbench.tune.points.torchserve_check import check_torchserve
from qbench.tune.servers.apphook import HookRecord


def record(effective: dict[str, Any], sizes: dict[int, int], processes: int = 1,
           yaml: dict[str, Any] | None = None) -> HookRecord:
    return HookRecord(launched=True, framework="torchserve", torchserve={
        "version": "0.12.0", "models": [{"name": "batched", "version": "1.0", "yaml": yaml or {},
                                         "app": {"batch_size": 4}, "set": {}, "effective": effective}]},
        batch_sizes={"/predictions/batched": sizes}, batch_processes=processes)


def test_settings_torchserve_describes_and_batches_within_them_are_applied() -> None:
    hook = record({"batch_size": 8, "max_batch_delay": 20, "workers": 2, "job_queue_size": 50},
                  {1: 2, 5: 2, 8: 10}, processes=2)
    check = check_torchserve({"batch_size": 8, "max_batch_delay": 20, "workers": 2, "job_queue_size": 50},
                             hook)
    assert check.verdict == "applied" and check.max_batch_size == 8
    assert check.evidence == [
        "model batched runs batchSize 8 (its management API)",
        "model batched runs maxBatchDelay 20 (its management API)",
        "model batched runs workers READY 2 (its management API)",
        "model batched runs job queue 50 (its management API)",
        "TorchServe handed /predictions/batched 14 batches of 1 to 8 (mean 6.6)",
        "2 worker processes ran batches (workers 2)"]


def test_a_model_config_yaml_that_keeps_a_knob_is_named() -> None:
    hook = record({"batch_size": 4}, {4: 3}, yaml={"batch_size": 4})
    check = check_torchserve({"batch_size": 16}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence[0] == ("model batched runs batchSize 4, not batch_size=16 (its management API): "
                                 "its model-config.yaml sets 4, which wins over config.properties")


def test_a_batch_above_the_knob_or_more_workers_than_set_is_not_applied() -> None:
    hook = record({"batch_size": 4, "workers": 1}, {4: 3, 9: 1}, processes=2)
    check = check_torchserve({"batch_size": 4, "workers": 1}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence == [
        "TorchServe handed /predictions/batched 4 batches of 4 to 9 (mean 5.2): above batch_size 4",
        "2 worker processes ran batches: more than workers=1"]
    quiet = check_torchserve({"batch_size": 4}, record({"batch_size": 4}, {1: 7}))
    assert quiet.verdict == "applied" and "never queued a second request" in quiet.evidence[1]


def test_no_model_or_no_launch_proves_nothing() -> None:
    empty = HookRecord(launched=True, framework="torchserve", torchserve={"models": []})
    assert check_torchserve({"batch_size": 4}, empty).verdict == "not_applied"
    assert check_torchserve({"batch_size": 4}, None).verdict == "unverified"
    assert check_torchserve({"batch_size": 4}, HookRecord(launched=False, framework="torchserve")
                            ).verdict == "unverified"
    assert check_torchserve({}, empty).verdict == "not_checked"
