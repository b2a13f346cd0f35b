"""Did a BentoML point's knobs take effect? What the startup hook saw inside the service, against the knobs.

A BentoML service's answers carry no server timestamps, so the proof is its own processes
(qbench_bentoml_hook.py):

    settings     each batchable API's max_batch_size and max_latency_ms, and the service's workers and
                 traffic max_concurrency, as BentoML was handed them when the service was built: the
                 knob, or the service's own value where a `--launch` command's {placeholder} never
                 reached it
    batches      the batch sizes BentoML handed each API's function in its workers: none above
                 max_batch_size; the processes that ran batches, at most `workers` of them

Verdicts as qbench.tune.points.knobcheck: `applied`, `unverified` (the hook never saw BentoML build the
service), `not_applied` (a setting or a batch contradicts a knob).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qbench.tune.knobs.frameworks import BENTOML_API_KNOBS, BENTOML_SERVICE_KNOBS
from qbench.tune.points.knobcheck import (
    KnobCheck,
    batches_and_processes,
    framework_verdict,
    hook_problems,
    kept_by_command,
    same_setting,
)
from qbench.tune.servers.apphook import HookRecord

WHO = "BentoML"  # in what a knob check says


def settings_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, confirmations) from each API's and the service's settings."""
    wrong: list[str] = []
    right: list[str] = []
    apis = [a for a in hook.bentoml.get("apis") or [] if (a.get("app") or {}).get("batchable")]
    for api in apis:
        route, effective = api.get("route", "/predict"), api.get("effective") or {}
        for name in BENTOML_API_KNOBS:
            if name not in knobs:
                continue
            if same_setting(name, effective.get(name), knobs[name]):
                right.append(f"{route} runs {name}={effective.get(name)}")
            else:
                wrong.append(f"{route} runs {name}={effective.get(name)}, not {knobs[name]}"
                             f"{kept_by_command(name, hook, WHO)}")
    if not apis and any(k in knobs for k in BENTOML_API_KNOBS):
        wrong.append("the service has no batchable API (@bentoml.api(batchable=True)) for a batch knob")
    service = (hook.bentoml.get("service") or {}).get("effective") or {}
    for name in BENTOML_SERVICE_KNOBS:
        if name not in knobs:
            continue
        if same_setting(name, service.get(name), knobs[name]):
            right.append(f"the service runs {name}={service.get(name)}")
        else:
            wrong.append(f"the service runs {name}={service.get(name)}, not {knobs[name]}"
                         f"{kept_by_command(name, hook, WHO)}")
    return wrong, right


def batch_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, observations) from the batches BentoML handed each API, and how many of its
    worker processes ran them."""
    return batches_and_processes("BentoML", knobs, hook, "workers", "worker")


def check_bentoml(knobs: Mapping[str, Any], hook: HookRecord | None) -> KnobCheck:
    """The verdict on one BentoML point's knobs, from the startup hook's record."""
    return framework_verdict(
        "bentoml", knobs, hook,
        "the hook saw no @bentoml.service built in the app's processes (started by "
        "another interpreter, or not a BentoML service), so nothing proves the knobs reached BentoML",
        [settings_evidence, hook_problems, batch_evidence])
