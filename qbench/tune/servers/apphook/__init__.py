"""The startup hook, qbench's side: the environment that puts it into a launched app, and its record. The
hook: sitecustomize.py, qbench_litserve_hook.py, qbench_bentoml_hook.py, qbench_rayserve_hook.py,
qbench_torchserve_hook.py and qbench_hook_batches.py (the batch counts), copied into the app's environment."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qbench.run import Readable
from qbench.tune.knobs.frameworks import (
    LITSERVE_API_KNOBS,
    RAYSERVE_BATCH_KNOBS,
    RAYSERVE_DEPLOYMENT_KNOBS,
    TORCHSERVE_KNOBS,
)

HOOK_FILE = Path(__file__).with_name("sitecustomize.py")
HOOK_FILES = (HOOK_FILE, *(Path(__file__).with_name(f"qbench_{part}.py")  # copied beside each other
                          for part in ("litserve_hook", "bentoml_hook", "rayserve_hook", "torchserve_hook",
                                       "hook_batches")))
RECORD_NAME = "hook-record.json"


def hook_env(
    knobs: Mapping[str, Any], port: int, events: Sequence[str] | None, work_dir: Path,
    observe: Sequence[str] = (),
) -> dict[str, str]:
    """Environment for a launched app: the hook's folder first on PYTHONPATH, the point in QBENCH_HOOK;
    `events` None: every queued event; `observe`: knobs the command passes itself (a framework's hook records
    them without setting them; Gradio's sets every knob)."""
    folder = work_dir / "qbench-hook"
    folder.mkdir(parents=True, exist_ok=True)
    for source in HOOK_FILES:
        shutil.copyfile(source, folder / source.name)
    record = work_dir / RECORD_NAME
    for old in (record, *work_dir.glob(f"{RECORD_NAME}.batches.*")):
        old.unlink(missing_ok=True)  # a relaunch of the same point must not read the last record
    plan = {"knobs": dict(knobs), "events": list(events) if events is not None else None, "port": port,
            "record": str(record.resolve()), "observe": list(observe)}  # absolute: TorchServe's workers
    # run in the model's folder
    pythonpath = first_on_path(folder, os.environ.get("PYTHONPATH", ""))
    return {"PYTHONPATH": pythonpath, "QBENCH_HOOK": json.dumps(plan)}


def first_on_path(folder: Path, pythonpath: str) -> str:
    """A PYTHONPATH with `folder` first (its sitecustomize.py runs at start-up), then `pythonpath`'s own."""
    return os.pathsep.join([str(folder), *[p for p in pythonpath.split(os.pathsep) if p]])


@dataclass
class EventRecord(Readable, tolerant=True):
    """One event listener of the launched app as the hook saw it."""

    fn_index: int = -1
    api_name: str | None = None
    chosen: bool = False  # the hook set this event's knobs (a driven event, or every queued one)
    queued: bool = True
    app: dict[str, Any] = field(default_factory=dict)  # the app's own settings
    set: dict[str, Any] = field(default_factory=dict)  # what the hook set
    effective: dict[str, Any] = field(default_factory=dict)  # concurrency_limit, batch, max_batch_size

    @property
    def name(self) -> str:
        return self.api_name or f"fn_index {self.fn_index}"

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Gradio's api_name=False (no API endpoint): none."""
        return {**data, "api_name": data.get("api_name") or None}


@dataclass
class HookRecord(Readable, tolerant=True):
    """What the hook found in the app and set (the hook's JSON record, read back)."""

    launched: bool = False
    gradio_version: str | None = None
    scope: str = "driven"  # driven: the scenario's events; all: every queued event
    driven: list[str] = field(default_factory=list)  # the scenario's events (api_name or fn_index)
    queue: dict[str, Any] = field(default_factory=dict)  # {app, set, effective, enabled}
    launch: dict[str, Any] = field(default_factory=dict)  # {app, set}
    events: list[EventRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    app_reads: list[str] = field(default_factory=list)  # QBENCH_* variables the app read itself
    launch_checked: bool | None = None  # launch()'s own local check (url_ok) answered; None: not yet
    framework: str = "gradio"  # gradio, litserve, bentoml or rayserve (the server the app started)
    litserve: dict[str, Any] = field(default_factory=dict)  # {version, apis: [{api_path, app, set,
    # effective}], server: {app, set, effective}} (qbench_litserve_hook.py)
    bentoml: dict[str, Any] = field(default_factory=dict)  # {version, apis: [{route, name, app, set,
    # effective}], service: {app, set, effective}} (qbench_bentoml_hook.py)
    rayserve: dict[str, Any] = field(default_factory=dict)  # {version, batches: [{name, app, set,
    # effective}], deployments: [{name, app_name, ingress, app, set, effective}]} (qbench_rayserve_hook.py)
    torchserve: dict[str, Any] = field(default_factory=dict)  # {version, config, point_config, models:
    # [{name, version, yaml, app, set, effective}]} (qbench_torchserve_hook.py)
    batch_sizes: dict[str, dict[int, int]] = field(default_factory=dict)  # api path -> {size: batches}, all
    # the app's processes together: what the framework really handed the user's function
    batch_processes: int = 0  # how many of the app's processes ran batches
    observed: list[str] = field(default_factory=list)  # knobs the launch command passes itself (not set)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def chosen(self) -> list[EventRecord]:
        return [e for e in self.events if e.chosen]

    @property
    def major(self) -> int | None:
        head = str(self.gradio_version or "").split(".")[0]
        return int(head) if head.isdigit() else None

    def own_queue_cap(self) -> str:
        """The cap on waiting requests the app's own code sets ("" when none)."""
        if self.framework == "bentoml":
            found = ((self.bentoml.get("service") or {}).get("app") or {}).get("max_concurrency")
            return f"max_concurrency={found}" if found is not None else ""
        if self.framework == "torchserve":
            sizes = {(m.get("app") or {}).get("job_queue_size") for m in self.torchserve.get("models") or []}
            return f"job_queue_size={sizes.pop()}" if len(sizes) == 1 and None not in sizes else ""
        if self.framework != "rayserve":
            return ""
        deployments = self.rayserve.get("deployments") or []
        caps = {str(d.get("name")): (d.get("app") or {}).get("max_queued_requests")
                for d in deployments}
        capped = {name: cap for name, cap in caps.items() if isinstance(cap, int) and cap >= 0}
        if len(caps) == 1 and capped:
            return f"max_queued_requests={next(iter(capped.values()))}"
        return ", ".join(f"{name}'s max_queued_requests={cap}" for name, cap in capped.items())

    def app_settings(self, event: EventRecord) -> dict[str, Any]:
        """The app's own settings that decide `event`'s concurrency and batching (for the advice)."""
        queue_app = self.queue.get("app") or {}
        own: dict[str, Any] = {}
        if self.major == 3:
            own["concurrency_count"] = queue_app.get("concurrency_count", 1)
        else:
            limit = event.app.get("concurrency_limit", "default")
            if limit == "default":
                own["default_concurrency_limit"] = queue_app.get("default_concurrency_limit", 1)
            else:
                own["concurrency_limit"] = limit
        if event.app.get("batch"):
            own["max_batch_size"] = event.app.get("max_batch_size")
        if "max_size" in queue_app:
            own["max_size"] = queue_app["max_size"]
        threads = (self.launch.get("app") or {}).get("max_threads")
        if threads is not None:
            own["max_threads"] = threads
        return own


def read_hook_record(work_dir: Path) -> HookRecord | None:
    """The hook's record with every process's batch counts summed; None when there is none."""
    try:
        data = json.loads((work_dir / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    data["batch_sizes"], data["batch_processes"] = batch_counts(work_dir)
    return HookRecord.from_dict(data)


def batch_counts(work_dir: Path) -> tuple[dict[str, dict[str, int]], int]:
    """Every process's batch counts summed: ({api path: {size: batches}}, processes that counted)."""
    total: dict[str, dict[str, int]] = {}
    processes = 0
    for path in sorted(work_dir.glob(f"{RECORD_NAME}.batches.*.json")):
        try:
            counts = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a file being replaced: os.replace makes that rare
        counted = False
        for api, sizes in (counts.items() if isinstance(counts, dict) else ()):
            mine = total.setdefault(str(api), {})
            for size, n in (sizes.items() if isinstance(sizes, dict) else ()):
                mine[str(size)] = mine.get(str(size), 0) + int(n)
                counted = counted or int(n) > 0
        processes += counted
    return total, processes


_EVENT_KNOBS = ("concurrency_limit", "concurrency_id", "max_batch_size")
_APP_KNOBS = ("concurrency_count", "default_concurrency_limit", "max_size", "max_threads")
_LAUNCH_KNOBS = ("num_workers", "ssr_mode")


def app_change(hook: HookRecord, knobs: Mapping[str, Any]) -> list[str]:
    """The recommendation as changes to the app's own settings, one line each."""
    if hook.framework == "litserve":
        return litserve_change(hook, knobs)
    if hook.framework == "bentoml":
        return bentoml_change(hook, knobs)
    if hook.framework == "rayserve":
        return rayserve_change(hook, knobs)
    if hook.framework == "torchserve":
        return torchserve_change(hook, knobs)
    release = f" (Gradio {hook.gradio_version})" if hook.gradio_version else ""
    lines = []
    for event in hook.chosen:
        own = hook.app_settings(event)
        wanted = {k: v for k, v in knobs.items() if k in _EVENT_KNOBS}
        if not wanted:
            continue
        before: dict[str, Any] = {}
        if "concurrency_limit" in wanted:  # the event's own limit, else the queue's default it takes
            before.update({k: own[k] for k in ("concurrency_limit", "default_concurrency_limit",
                                               "concurrency_count") if k in own})
        for name in ("max_batch_size", "concurrency_id"):
            if name in wanted:
                before[name] = own.get(name, event.app.get(name))
        lines.append(f"your app{release}: {_pairs(before) or 'Gradio defaults'} -> recommended "
                     f"{_pairs(wanted)} on `{event.name}`")
    queue = {k: v for k, v in knobs.items() if k in _APP_KNOBS}
    if queue:
        own = hook.app_settings(hook.chosen[0]) if hook.chosen else dict(hook.queue.get("app") or {})
        before = {k: own.get(k, "default") for k in queue}
        lines.append(f"your app{release}: {_pairs(before)} -> recommended {_pairs(queue)}")
    launch = {k: v for k, v in knobs.items() if k in _LAUNCH_KNOBS}
    if launch:
        own_launch = hook.launch.get("app") or {}
        before = {k: "default" if own_launch.get(k) is None else own_launch[k] for k in launch}
        lines.append(f"your app{release}: launch({_pairs(before)}) -> recommended launch({_pairs(launch)})")
    return lines


def litserve_change(hook: HookRecord, knobs: Mapping[str, Any]) -> list[str]:
    """A LitServe app's recommendation as changes to its LitAPI and LitServer arguments."""
    release = f" (LitServe {hook.litserve.get('version')})" if hook.litserve.get("version") else ""
    lines = []
    wanted = {k: v for k, v in knobs.items() if k in LITSERVE_API_KNOBS}
    for api in hook.litserve.get("apis") or []:
        own = {k: v for k, v in (api.get("app") or {}).items() if k in LITSERVE_API_KNOBS}
        if wanted:
            name = api.get("type") or "LitAPI"
            lines.append(f"your app{release}: {name}({_pairs(own)}) -> recommended "
                         f"{name}({_pairs({**own, **wanted})}) at {api.get('api_path', '/predict')}")
    if "workers_per_device" in knobs:
        own_workers = ((hook.litserve.get("server") or {}).get("app") or {}).get("workers_per_device", 1)
        lines.append(f"your app{release}: LitServer(workers_per_device={own_workers}) -> recommended "
                     f"LitServer(workers_per_device={knobs['workers_per_device']})")
    return lines


def bentoml_change(hook: HookRecord, knobs: Mapping[str, Any]) -> list[str]:
    """A BentoML service's recommendation as changes to its @bentoml.api and @bentoml.service."""
    release = f" (BentoML {hook.bentoml.get('version')})" if hook.bentoml.get("version") else ""
    lines = []
    wanted = {k: v for k, v in knobs.items() if k in ("max_batch_size", "max_latency_ms")}
    for api in hook.bentoml.get("apis") or []:
        own = {k: v for k, v in (api.get("app") or {}).items() if k in ("max_batch_size", "max_latency_ms")}
        if wanted and (api.get("app") or {}).get("batchable"):
            lines.append(f"your service{release}: @bentoml.api({_pairs(own)}) -> recommended "
                         f"@bentoml.api({_pairs({**own, **wanted})}) on {api.get('name', 'predict')}")
    service = {k: v for k, v in knobs.items() if k in ("workers", "max_concurrency")}
    if service:
        own_service = (hook.bentoml.get("service") or {}).get("app") or {}
        before = {k: own_service.get(k) for k in service}
        lines.append(f"your service{release}: @bentoml.service({_pairs(before)}) -> recommended "
                     f"@bentoml.service({_pairs(service)})")
    return lines


def rayserve_change(hook: HookRecord, knobs: Mapping[str, Any]) -> list[str]:
    """A Ray Serve app's recommendation as changes to its @serve.batch and @serve.deployment."""
    release = f" (Ray Serve {hook.rayserve.get('version')})" if hook.rayserve.get("version") else ""
    lines = []
    wanted = {k: v for k, v in knobs.items() if k in RAYSERVE_BATCH_KNOBS}
    for batch in hook.rayserve.get("batches") or [] if wanted else []:
        own = {k: v for k, v in (batch.get("app") or {}).items() if k in RAYSERVE_BATCH_KNOBS}
        lines.append(f"your app{release}: @serve.batch({_pairs(own)}) -> recommended "
                     f"@serve.batch({_pairs({**own, **wanted})}) on {batch.get('name', '?')}")
    options = {k: v for k, v in knobs.items() if k in RAYSERVE_DEPLOYMENT_KNOBS}
    for deployment in hook.rayserve.get("deployments") or [] if options else []:
        own = {k: v for k, v in (deployment.get("app") or {}).items() if k in options}
        lines.append(f"your app{release}: @serve.deployment({_pairs(own)}) -> recommended "
                     f"@serve.deployment({_pairs(options)}) on {deployment.get('name', '?')}")
    return lines


def torchserve_change(hook: HookRecord, knobs: Mapping[str, Any]) -> list[str]:
    """A TorchServe model's recommendation as changes to its configuration, one line a model."""
    release = f" (TorchServe {hook.torchserve.get('version')})" if hook.torchserve.get("version") else ""
    wanted = {k: v for k, v in knobs.items() if k in TORCHSERVE_KNOBS}
    lines = []
    for model in hook.torchserve.get("models") or [] if wanted else []:
        own = {k: (model.get("app") or {}).get(k) for k in wanted}
        lines.append(f"your config{release}: model {model.get('name', '?')}: {_pairs(own)} -> recommended "
                     f"{_pairs(wanted)}")
    return lines


def _pairs(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
