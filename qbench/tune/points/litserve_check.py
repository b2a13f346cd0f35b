"""Did a LitServe point's knobs take effect? Each LitAPI's and the server's settings and the batches LitServe
handed, as the startup hook (qbench_litserve_hook.py) saw them -> KnobCheck."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qbench.run import json_int
from qbench.tune.knobs.frameworks import LITSERVE_API_KNOBS
from qbench.tune.points.knobcheck import (
    KnobCheck,
    framework_verdict,
    handed_batches,
    hook_problems,
    kept_by_command,
    same_setting,
)
from qbench.tune.servers.apphook import HookRecord

WHO = "LitServe"  # in what a knob check says


def settings_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, confirmations) from each API's and the server's settings as LitServe held them."""
    wrong: list[str] = []
    right: list[str] = []
    apis = hook.litserve.get("apis") or []
    for api in apis:
        path, effective = api.get("api_path", "/predict"), api.get("effective") or {}
        for name in LITSERVE_API_KNOBS:
            if name not in knobs:
                continue
            if same_setting(name, effective.get(name), knobs[name]):
                right.append(f"{path} runs {name}={effective.get(name)}")
            else:
                wrong.append(f"{path} runs {name}={effective.get(name)}, not {knobs[name]}"
                             f"{kept_by_command(name, hook, WHO)}")
    if not apis and any(k in knobs for k in LITSERVE_API_KNOBS):
        wrong.append("LitServe started no LitAPI the hook could read")
    if "workers_per_device" in knobs:
        server = (hook.litserve.get("server") or {}).get("effective") or {}
        workers = server.get("workers_per_device")
        if same_setting("workers_per_device", workers, knobs["workers_per_device"]):
            right.append(f"workers_per_device={workers}")
        else:
            wrong.append(f"LitServer runs workers_per_device={workers}, not {knobs['workers_per_device']}"
                         f"{kept_by_command('workers_per_device', hook, WHO)}")
    return wrong, right


def batch_evidence(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """(contradictions, observations) from the batches LitServe handed, and the processes that ran them."""
    wrong, seen = handed_batches("LitServe", hook, "max_batch_size", json_int(knobs.get("max_batch_size")),
                                 "the load never queued a second request while one ran")
    if hook.batch_processes:
        wanted = json_int(knobs.get("workers_per_device"))
        per = f" (workers_per_device {wanted} per device)" if wanted is not None else ""
        seen.append(f"{hook.batch_processes} inference processes ran batches{per}")
    return wrong, seen


def check_litserve(knobs: Mapping[str, Any], hook: HookRecord | None) -> KnobCheck:
    return framework_verdict(
        "litserve", knobs, hook,
        "the hook saw no LitServer.run() in the app's process (started by another "
        "interpreter, or not a LitServe app), so nothing proves the knobs reached LitServe",
        [settings_evidence, hook_problems, batch_evidence])
