"""Did a TorchServe point's knobs take effect? What TorchServe itself says, and what its workers did.

qbench's launcher (qbench_torchserve_hook.py) writes the knobs into the point's copy of the user's
config.properties; TorchServe may still run with others (a model archive's model-config.yaml wins over
config.properties' models=, pytorch/serve#2365; a value of 0 or less falls back to the default). So the
proof is TorchServe's own:

    settings     each model as its management API describes it once its workers are READY: batchSize,
                 maxBatchDelay, the workers READY, the job queue's size (remainingCapacity + pendingRequests)
    batches      the batch sizes its frontend handed each model's handler (counted in its Python workers):
                 none above batch_size, and, under load, some above 1 (batching really on); the worker
                 processes that ran them, at most `workers`

Verdicts as qbench.tune.points.knobcheck: `applied`, `unverified` (the launcher never saw the models READY),
`not_applied` (a setting or a batch contradicts a knob, with the model-config.yaml that set it where one did).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from qbench.run import json_int
from qbench.tune.knobs.frameworks import TORCHSERVE_KNOBS
from qbench.tune.points.knobcheck import (
    KnobCheck,
    batches_and_processes,
    framework_verdict,
    hook_problems,
    same_setting,
)
from qbench.tune.servers.apphook import HookRecord

#: the knob -> what TorchServe's management API calls it
DESCRIBED = {"batch_size": "batchSize", "max_batch_delay": "maxBatchDelay", "workers": "workers READY",
             "job_queue_size": "job queue"}


def settings_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, confirmations) from each model's settings as TorchServe's management API says."""
    wrong: list[str] = []
    right: list[str] = []
    models = hook.torchserve.get("models") or []
    for model in models:
        name, effective = model.get("name", "?"), model.get("effective") or {}
        yaml = model.get("yaml") or {}
        for knob in TORCHSERVE_KNOBS:
            if knob not in knobs:
                continue
            said = f"{DESCRIBED[knob]} {effective.get(knob)}"
            if same_setting(knob, effective.get(knob), knobs[knob]):
                right.append(f"model {name} runs {said} (its management API)")
                continue
            why = (f": its model-config.yaml sets {yaml[knob]}, which wins over config.properties"
                   if knob in yaml else "")
            wrong.append(f"model {name} runs {said}, not {knob}={knobs[knob]} (its management API){why}")
    if not models:
        wrong.append("TorchServe loaded no model the launcher could read (config.properties' load_models)")
    return wrong, right


def batch_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, observations) from the batches TorchServe handed each model's handler, and how
    many worker processes ran them."""
    return batches_and_processes("TorchServe", knobs, hook, "workers", "worker", "batch_size",
                                 "the load never queued a second request while a batch formed")


def check_torchserve(knobs: Mapping[str, Any], hook: HookRecord | None) -> KnobCheck:
    """The verdict on one TorchServe point's knobs, from the launcher's record."""
    check = framework_verdict(
        "torchserve", knobs, hook,
        "qbench's launcher never saw TorchServe's models READY (not started with --app config.properties, "
        "or it exited), so nothing proves the knobs reached TorchServe",
        [settings_evidence, hook_problems, batch_evidence])
    return replace(check, max_batch_size=json_int(knobs.get("batch_size")) or 1)
