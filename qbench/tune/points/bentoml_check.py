"""Did a BentoML point's knobs take effect? Each batchable API's and the service's settings and the batches
BentoML handed, as the startup hook (qbench_bentoml_hook.py) saw them -> KnobCheck."""

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
    """(contradictions, observations) from the batches BentoML handed, and the workers that ran them."""
    return batches_and_processes("BentoML", knobs, hook, "workers", "worker")


def check_bentoml(knobs: Mapping[str, Any], hook: HookRecord | None) -> KnobCheck:
    return framework_verdict(
        "bentoml", knobs, hook,
        "the hook saw no @bentoml.service built in the app's processes (started by "
        "another interpreter, or not a BentoML service), so nothing proves the knobs reached BentoML",
        [settings_evidence, hook_problems, batch_evidence])
