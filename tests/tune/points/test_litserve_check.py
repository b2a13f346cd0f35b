"""A LitServe point's knobs proven from the startup hook's record (qbench/tune/points/litserve_check.py):
the settings LitServe held, the batch sizes it handed the app, and which knob a command kept from it."""

from __future__ import annotations

from typing import Any

from qbench.tune.points.litserve_check import check_litserve
from qbench.tune.servers.apphook import HookRecord


def record(effective: dict[str, Any], sizes: dict[int, int], workers: int = 1, processes: int = 1,
           observed: tuple[str, ...] = ()) -> HookRecord:
    return HookRecord(launched=True, framework="litserve", observed=list(observed), litserve={
        "version": "0.2.19",
        "apis": [{"api_path": "/predict", "type": "BatchedAPI", "app": {"max_batch_size": 4},
                  "set": {}, "effective": effective}],
        "server": {"app": {"workers_per_device": 1}, "set": {},
                   "effective": {"workers_per_device": workers}}},
        batch_sizes={"/predict": sizes}, batch_processes=processes)


def test_knobs_litserve_held_and_batches_within_them_are_applied() -> None:
    hook = record({"max_batch_size": 8, "batch_timeout": 0.05}, {1: 2, 5: 3, 8: 10}, workers=2, processes=2)
    check = check_litserve({"max_batch_size": 8, "batch_timeout": 0.05, "workers_per_device": 2}, hook)
    assert check.verdict == "applied"
    assert check.evidence == [
        "/predict runs max_batch_size=8", "/predict runs batch_timeout=0.05", "workers_per_device=2",
        "LitServe handed /predict 15 batches of 1 to 8 (mean 6.5)",
        "2 inference processes ran batches (workers_per_device 2 per device)"]
    assert check.max_batch_size == 8


def test_a_setting_the_command_kept_from_litserve_is_not_applied() -> None:
    hook = record({"max_batch_size": 4, "batch_timeout": 0.01}, {4: 20}, observed=("max_batch_size",))
    check = check_litserve({"max_batch_size": 8}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence == ["/predict runs max_batch_size=4, not 8 (the command passes {max_batch_size} "
                              "itself, and it did not reach LitServe)"]


def test_a_batch_above_the_knob_contradicts_it() -> None:
    check = check_litserve({"max_batch_size": 4}, record({"max_batch_size": 4}, {4: 3, 6: 1}))
    assert check.verdict == "not_applied"
    assert check.evidence == ["LitServe handed /predict 4 batches of 4 to 6 (mean 4.5): above "
                              "max_batch_size 4"]


def test_batches_of_one_under_a_larger_knob_say_the_load_never_filled_them() -> None:
    check = check_litserve({"max_batch_size": 8}, record({"max_batch_size": 8}, {1: 30}))
    assert check.verdict == "applied"
    assert check.evidence[1].endswith("(mean 1.0): the load never queued a second request while one ran")


def test_without_the_hooks_record_nothing_proves_the_knobs() -> None:
    assert check_litserve({"max_batch_size": 8}, None).verdict == "unverified"
    assert check_litserve({"max_batch_size": 8}, HookRecord(launched=False)).verdict == "unverified"
    assert check_litserve({}, None).verdict == "not_checked"


def test_the_hooks_problems_are_evidence() -> None:
    hook = record({"max_batch_size": 8}, {})
    hook.problems.append("LitAPI(): cannot read its arguments; batch knobs not set")
    check = check_litserve({"max_batch_size": 8}, hook)
    assert check.verdict == "not_applied" and check.evidence == hook.problems
