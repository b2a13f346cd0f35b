"""A BentoML point's knobs proven from the startup hook's record (qbench/tune/points/bentoml_check.py):
the settings BentoML was handed, the batch sizes it handed the service, the workers that ran them, and
which knob a command kept from it."""

from __future__ import annotations

from typing import Any

from qbench.tune.points.bentoml_check import check_bentoml
from qbench.tune.servers.apphook import HookRecord


def record(api: dict[str, Any], service: dict[str, Any], sizes: dict[int, int], processes: int = 1,
           observed: tuple[str, ...] = (), batchable: bool = True) -> HookRecord:
    return HookRecord(launched=True, framework="bentoml", observed=list(observed), bentoml={
        "version": "1.4.40", "name": "Batched",
        "apis": [{"route": "/predict", "name": "predict",
                  "app": {"batchable": batchable, "max_batch_size": 16, "max_latency_ms": 1000},
                  "set": {}, "effective": {"batchable": batchable, **api}}],
        "service": {"app": {"workers": 1, "max_concurrency": None}, "set": {}, "effective": service}},
        batch_sizes={"/predict": sizes}, batch_processes=processes)


def test_knobs_bentoml_was_handed_and_batches_within_them_are_applied() -> None:
    hook = record({"max_batch_size": 4, "max_latency_ms": 500}, {"workers": 2, "max_concurrency": 32},
                  {1: 2, 3: 2, 4: 10}, processes=2)
    check = check_bentoml({"max_batch_size": 4, "max_latency_ms": 500, "workers": 2, "max_concurrency": 32},
                          hook)
    assert check.verdict == "applied"
    assert check.evidence == [
        "/predict runs max_batch_size=4", "/predict runs max_latency_ms=500", "the service runs workers=2",
        "the service runs max_concurrency=32", "BentoML handed /predict 14 batches of 1 to 4 (mean 3.4)",
        "2 worker processes ran batches (workers 2)"]


def test_a_batch_above_the_knob_or_more_workers_than_set_is_not_applied() -> None:
    hook = record({"max_batch_size": 4}, {"workers": 1}, {4: 3, 9: 1}, processes=2)
    check = check_bentoml({"max_batch_size": 4, "workers": 1}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence == [
        "BentoML handed /predict 4 batches of 4 to 9 (mean 5.2): above max_batch_size 4",
        "2 worker processes ran batches: more than workers=1"]


def test_a_knob_the_launch_command_kept_from_bentoml_is_named() -> None:
    hook = record({"max_batch_size": 16}, {"workers": 1}, {16: 4}, observed=("max_batch_size",))
    check = check_bentoml({"max_batch_size": 4}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence[0] == ("/predict runs max_batch_size=16, not 4 (the command passes "
                                 "{max_batch_size} itself, and it did not reach BentoML)")


def test_a_batch_knob_without_a_batchable_api_or_without_the_hook() -> None:
    hook = record({"max_batch_size": 16}, {"workers": 1}, {1: 5}, batchable=False)
    check = check_bentoml({"max_batch_size": 4}, hook)
    assert check.verdict == "not_applied" and "no batchable API" in check.evidence[0]
    assert check_bentoml({"max_batch_size": 4}, None).verdict == "unverified"
    gradio = HookRecord(launched=True, framework="gradio")
    assert check_bentoml({"workers": 2}, gradio).verdict == "unverified"
    assert check_bentoml({}, hook).verdict == "not_checked"
