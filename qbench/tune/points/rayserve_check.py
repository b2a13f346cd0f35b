"""Did a Ray Serve point's knobs take effect? Each batched method's and deployment's settings and the batches
Ray Serve handed, as the startup hook (qbench_rayserve_hook.py) saw them -> KnobCheck."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qbench.run import json_int
from qbench.tune.knobs.frameworks import RAYSERVE_BATCH_KNOBS, RAYSERVE_DEPLOYMENT_KNOBS
from qbench.tune.points.knobcheck import (
    KnobCheck,
    batches_and_processes,
    framework_verdict,
    hook_problems,
    kept_by_command,
    same_setting,
)
from qbench.tune.servers.apphook import HookRecord

WHO = "Ray Serve"  # in what a knob check says


def settings_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, confirmations) from each batched method's and each deployment's settings."""
    wrong: list[str] = []
    right: list[str] = []
    for part, names, label, missing in (
            ("batches", RAYSERVE_BATCH_KNOBS, "{}", "the app has no @serve.batch method for a batch knob"),
            ("deployments", RAYSERVE_DEPLOYMENT_KNOBS, "deployment {}",
             "the hook saw no deployment of the app built (serve.run never ran?)")):
        entries = hook.rayserve.get(part) or []
        for entry in entries:
            name, effective = label.format(entry.get("name", "?")), entry.get("effective") or {}
            for knob in (k for k in names if k in knobs):
                if same_setting(knob, effective.get(knob), knobs[knob]):
                    right.append(f"{name} runs {knob}={effective.get(knob)}")
                else:
                    wrong.append(f"{name} runs {knob}={effective.get(knob)}, not {knobs[knob]}"
                                 f"{kept_by_command(knob, hook, WHO)}")
        if not entries and any(k in knobs for k in names):
            wrong.append(missing)
    return wrong, right


def batch_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, observations) from the batches, the replicas that ran them, and `batch_cap`'s note."""
    wrong, seen = batches_and_processes("Ray Serve", knobs, hook, "num_replicas", "replica")
    return wrong, seen + [note for note in [batch_cap(knobs, hook)] if note]


def batch_cap(knobs: Mapping[str, Any], hook: HookRecord) -> str:
    """The note when a method's max_batch_size exceeds its max_ongoing_requests ("" otherwise)."""
    sizes = [json_int(b.get("effective", {}).get("max_batch_size"))
             for b in hook.rayserve.get("batches") or []]
    ongoing = [json_int(d.get("effective", {}).get("max_ongoing_requests"))
               for d in hook.rayserve.get("deployments") or []]
    size = max([s for s in sizes if s is not None], default=None)
    cap = min([o for o in ongoing if o is not None], default=None)
    if size is None or cap is None or size <= cap:
        return ""
    return (f"max_batch_size={size} above max_ongoing_requests={cap}: a replica holds at most {cap} "
            f"requests, so its batches stop at {cap} (raise max_ongoing_requests to fill them; "
            "ray-project/ray#43288)")


def check_rayserve(knobs: Mapping[str, Any], hook: HookRecord | None) -> KnobCheck:
    return framework_verdict(
        "rayserve", knobs, hook,
        "the hook saw no Ray Serve app deployed in the app's process (started by another interpreter, or "
        "not a Ray Serve app), so nothing proves the knobs reached Ray Serve",
        [settings_evidence, hook_problems, batch_evidence])
