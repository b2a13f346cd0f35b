"""Did a TorchServe point's knobs take effect? Each model as TorchServe's management API describes it and the
batches its frontend handed, as qbench's launcher (qbench_torchserve_hook.py) saw them -> KnobCheck."""

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
    """(contradictions, observations) from the batches TorchServe handed, and the workers that ran them."""
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
