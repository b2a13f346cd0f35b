"""A Ray Serve point's knobs proven from the startup hook's record (qbench/tune/points/rayserve_check.py):
the settings Ray Serve was handed (the batched method's, the deployment's), the batch sizes it handed the
app, the replicas that ran them, which knob a command kept from it, and a max_batch_size its replica's
max_ongoing_requests never lets fill."""

from __future__ import annotations

from typing import Any

from qbench.tune.points.rayserve_check import check_rayserve
from qbench.tune.servers.apphook import HookRecord

OWN_BATCH = {"max_batch_size": 4, "batch_wait_timeout_s": 0.01, "max_concurrent_batches": 1}
OWN_DEPLOYMENT = {"num_replicas": 1, "max_ongoing_requests": 5, "max_queued_requests": -1}


def record(batch: dict[str, Any], deployment: dict[str, Any], sizes: dict[int, int], processes: int = 1,
           observed: tuple[str, ...] = (), batched: bool = True) -> HookRecord:
    batches = [{"name": "BatchedModel.predict", "app": OWN_BATCH, "set": {},
                "effective": {**OWN_BATCH, **batch}}] if batched else []
    return HookRecord(launched=True, framework="rayserve", observed=list(observed), rayserve={
        "version": "2.60.0", "batches": batches,
        "deployments": [{"name": "BatchedModel", "app_name": "default", "ingress": True,
                         "app": OWN_DEPLOYMENT, "set": {}, "effective": {**OWN_DEPLOYMENT, **deployment}}]},
        batch_sizes={"BatchedModel.predict": sizes} if sizes else {}, batch_processes=processes)


def test_knobs_ray_serve_was_handed_and_batches_within_them_are_applied() -> None:
    hook = record({"max_batch_size": 8, "batch_wait_timeout_s": 0.05}, {"max_ongoing_requests": 16,
                                                                         "num_replicas": 2},
                  {1: 2, 5: 2, 8: 10}, processes=2)
    check = check_rayserve({"max_batch_size": 8, "batch_wait_timeout_s": 0.05, "max_ongoing_requests": 16,
                            "num_replicas": 2}, hook)
    assert check.verdict == "applied"
    assert check.evidence == [
        "BatchedModel.predict runs max_batch_size=8", "BatchedModel.predict runs batch_wait_timeout_s=0.05",
        "deployment BatchedModel runs num_replicas=2", "deployment BatchedModel runs max_ongoing_requests=16",
        "Ray Serve handed BatchedModel.predict 14 batches of 1 to 8 (mean 6.6)",
        "2 replica processes ran batches (num_replicas 2)"]


def test_a_batch_size_the_replicas_own_limit_caps_is_said_not_refused() -> None:
    """ray-project/ray#43288: max_ongoing_requests=5 (Ray Serve's default) holds a batch of 16 at 5."""
    check = check_rayserve({"max_batch_size": 16}, record({"max_batch_size": 16}, {}, {5: 20, 3: 1}))
    assert check.verdict == "applied"
    assert check.evidence[-1] == (
        "max_batch_size=16 above max_ongoing_requests=5: a replica holds at most 5 requests, so its batches "
        "stop at 5 (raise max_ongoing_requests to fill them; ray-project/ray#43288)")
    fills = check_rayserve({"max_batch_size": 16, "max_ongoing_requests": 32},
                           record({"max_batch_size": 16}, {"max_ongoing_requests": 32}, {16: 3}))
    assert fills.verdict == "applied" and not any("ray#43288" in line for line in fills.evidence)


def test_a_batch_above_the_knob_or_more_replicas_than_set_is_not_applied() -> None:
    hook = record({"max_batch_size": 4}, {"num_replicas": 1}, {4: 3, 9: 1}, processes=2)
    check = check_rayserve({"max_batch_size": 4, "num_replicas": 1}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence == [
        "Ray Serve handed BatchedModel.predict 4 batches of 4 to 9 (mean 5.2): above max_batch_size 4",
        "2 replica processes ran batches: more than num_replicas=1"]


def test_a_knob_the_launch_command_kept_from_ray_serve_is_named() -> None:
    hook = record({}, {}, {4: 4}, observed=("max_ongoing_requests",))
    check = check_rayserve({"max_ongoing_requests": 32}, hook)
    assert check.verdict == "not_applied"
    assert check.evidence[0] == ("deployment BatchedModel runs max_ongoing_requests=5, not 32 (the command "
                                 "passes {max_ongoing_requests} itself, and it did not reach Ray Serve)")


def test_a_batch_knob_without_a_batched_method_or_without_the_hook() -> None:
    hook = record({}, {}, {}, batched=False)
    check = check_rayserve({"max_batch_size": 4}, hook)
    assert check.verdict == "not_applied" and "no @serve.batch method" in check.evidence[0]
    assert check_rayserve({"max_batch_size": 4}, None).verdict == "unverified"
    litserve = HookRecord(launched=True, framework="litserve")
    assert check_rayserve({"num_replicas": 2}, litserve).verdict == "unverified"
    assert check_rayserve({}, hook).verdict == "not_checked"
    refused = HookRecord(launched=True, framework="rayserve", problems=[
        "BatchedModel.options(num_replicas=2): Ray Serve refused it (ValueError: ...); not set"],
        rayserve={"deployments": [{"name": "BatchedModel", "effective": {"num_replicas": "auto"}}]})
    check = check_rayserve({"num_replicas": 2}, refused)
    assert check.verdict == "not_applied" and check.evidence[1].startswith("BatchedModel.options(")
