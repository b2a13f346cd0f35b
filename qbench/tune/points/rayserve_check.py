"""Did a Ray Serve point's knobs take effect? What the startup hook saw inside the app, against the knobs.

A Ray Serve app's answers carry no server timestamps (plain HTTP), so the proof is the app's own processes
(qbench_rayserve_hook.py):

    settings     each @serve.batch method's max_batch_size, batch_wait_timeout_s and
                 max_concurrent_batches, and each deployment's num_replicas, max_ongoing_requests and
                 max_queued_requests, as Ray Serve was handed them when the app was built: the knob, or
                 the app's own value where a `--launch` command's {placeholder} never reached it
    batches      the batch sizes Ray Serve handed each batched method in its replicas: none above
                 max_batch_size; the processes that ran batches, at most num_replicas of them
    the cap      a batch never holds more requests than its replica runs at once: max_batch_size above
                 max_ongoing_requests can never be reached (ray-project/ray#43288); said, not a
                 contradiction (the knob is applied, the batches stop at max_ongoing_requests)

Verdicts as qbench.tune.points.knobcheck: `applied`, `unverified` (the hook never saw Ray Serve deploy the
app), `not_applied` (a setting or a batch contradicts a knob).
"""

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
    """(contradictions, observations) from the batches Ray Serve handed each batched method, how many
    replica processes ran them, and a max_batch_size its max_ongoing_requests caps."""
    wrong, seen = batches_and_processes("Ray Serve", knobs, hook, "num_replicas", "replica")
    return wrong, seen + [note for note in [batch_cap(knobs, hook)] if note]


def batch_cap(knobs: Mapping[str, Any], hook: HookRecord) -> str:
    """"max_batch_size=16 above max_ongoing_requests=5: ..." when a batched method's size cannot be
    reached because its deployment's replica runs fewer requests at once ("" otherwise)."""
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
    """The verdict on one Ray Serve point's knobs, from the startup hook's record."""
    return framework_verdict(
        "rayserve", knobs, hook,
        "the hook saw no Ray Serve app deployed in the app's process (started by another interpreter, or "
        "not a Ray Serve app), so nothing proves the knobs reached Ray Serve",
        [settings_evidence, hook_problems, batch_evidence])
