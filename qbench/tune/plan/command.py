"""`qbench plan`: one replica's capacity from a `qbench capacity` folder (capacity.json, and its probe's
run.json for the settings and the generator's CPU) -> the plan (qbench.tune.plan.replicas) -> plan.json."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qbench.errors import ScenarioError
from qbench.run import RunInfo, Writer
from qbench.tune.knobs.reference import effective_knobs
from qbench.tune.knobs.versions import gradio_major
from qbench.tune.plan.replicas import Plan, Replica, Traffic, make_plan
from qbench.tune.ranking.recommend import gradio_code
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.values.ceiling import Probe
from qbench.tune.values.constraints import bounds_text


@dataclass(frozen=True)
class PlanRun:
    plan: Plan
    path: Path  # plan.json


def is_scenario(source: Path) -> bool:
    """A scenario file (YAML) rather than a capacity folder: `qbench plan` measures it first."""
    return source.suffix in (".yaml", ".yml")


def capacity_path(source: Path) -> Path:
    """capacity.json of a `qbench capacity` folder (or the file itself); ScenarioError when absent."""
    path = source / "capacity.json" if source.is_dir() else source
    if not path.is_file():
        raise ScenarioError(f"{source}: no capacity.json: pass a `qbench capacity` folder "
                            "(reports/capacity-<name>-<stamp>/) or its capacity.json")
    return path


def read_measured(source: Path) -> Replica:
    """One replica as its capacity folder recorded it; ScenarioError on a file without a capacity."""
    path = capacity_path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(data, Mapping) or data.get("kind") != "capacity":
        kind = data.get("kind") if isinstance(data, Mapping) else None
        raise ScenarioError(f"{path}: not a capacity.json (kind {kind!r}, expected 'capacity')")
    file = CapacityFile.from_dict(data)
    at = file.result.at_capacity
    rate = file.result.capacity_rps
    if rate is None or at is None:
        raise ScenarioError(f"{path}: result.capacity_rps is {rate}: the search found no rate meeting the "
                            "SLO, so there is nothing to plan with")
    info = _run_info(path.parent, at)
    slo = bounds_text(file.slo)
    if file.max_error_rate is not None:
        slo += f"{', ' if slo else ''}error_rate <= {file.max_error_rate:.1%}"
    return Replica(
        capacity_rps=rate, **at.figure_values(),
        confirmed=file.result.confirmed, slo=slo, source=str(path), target=file.target,
        settings=settings_of(info, at.run_dir) if info else {},
        generator_cpu_per_request_s=_cpu_per_request(info), generator_processes=_processes(info),
        arrival=_arrival(file.scenario),
    )


def _arrival(scenario: Mapping[str, Any]) -> str | None:
    content = scenario.get("content")
    load = content.get("load") if isinstance(content, Mapping) else None
    arrival = load.get("arrival") if isinstance(load, Mapping) else None
    return str(arrival) if arrival else None


def _run_info(folder: Path, probe: Probe) -> RunInfo | None:
    path = folder / probe.run_dir / "run.json"
    try:
        return RunInfo.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def settings_of(info: RunInfo, run_dir: str) -> dict[str, Any]:
    """The knobs the run was measured with, as code for its Gradio release: from the reference server's
    /status settings, else a Gradio app's /config ({} when neither)."""
    server = info.server
    release = (server.get("gradio") or {}).get("version") or (server.get("config") or {}).get("version")
    major = gradio_major(release)
    api = (info.scenario.get("endpoint") or {}).get("api_name")
    settings = (server.get("status") or {}).get("settings")
    if isinstance(settings, Mapping) and settings.get("functions"):
        knobs = effective_knobs(settings, api)
        max_size = (settings.get("queue") or {}).get("max_size")
        where = "the reference server's /status"
    else:
        deps = (server.get("config") or {}).get("dependencies") or []
        index = server.get("fn_index")
        dep = deps[index] if isinstance(index, int) and 0 <= index < len(deps) else None
        if not isinstance(dep, Mapping):
            return {}
        knobs = {"concurrency_limit": dep.get("concurrency_limit") or 1,
                 "max_batch_size": dep.get("max_batch_size") if dep.get("batch") else 1}
        max_size, where = None, "the app's /config (max_threads and max_size are not shown there)"
    return {"knobs": knobs, "max_size": max_size, "gradio": release,
            "code": gradio_code(knobs, max_size, major), "from": f"{where}, {run_dir}/run.json"}


def _cpu_per_request(info: RunInfo | None) -> float | None:
    gen = info.generator if info else None
    sent = (info.records if info else None) or 0
    return gen.cpu_s / sent if gen and gen.cpu_s and sent else None


def _processes(info: RunInfo | None) -> int:
    return info.generator.processes if info and info.generator else 1


def run_plan(source: Path, traffic: Traffic, headroom: float, price_per_hour: float | None,
             out: Path | None = None, spare: int = 0) -> PlanRun:
    """Read the capacity, make the plan, write plan.json (beside capacity.json unless `out`)."""
    measured = read_measured(source)
    plan = make_plan(measured, traffic, headroom, price_per_hour, spare)
    path = out or capacity_path(source).parent / "plan.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    Writer().json(path, plan.to_dict())
    return PlanRun(plan, path)


def parse_fraction(text: str, name: str) -> float:
    """'30%' or '0.3' -> 0.3 (at least 0)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ScenarioError(f"{name} {text!r}: expected a fraction such as 30% or 0.3")
    return value
