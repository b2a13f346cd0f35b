"""`qbench demo`: the main job end to end on an embedded default: serve the `image` preset, load it with
Poisson arrivals uploading generated images, print the summary and write the report."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from qbench.errors import ScenarioError
from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.scenario.schema import Scenario, parse_scenario
from qbench.tune.servers.server_process import start_reference_server

#: The embedded demo scenario: moderate Poisson load on the image preset (~70% of what this 2-core CPU
#: serves with batching), long enough to see queueing and batching, short enough to wait for.
DEMO_SCENARIO: dict[str, Any] = {
    "name": "demo-image",
    "description": "qbench demo: image classification (ViT-base-sized, random init) under Poisson arrivals",
    "protocol": "gradio",
    "endpoint": {"api_name": "classify"},
    "payload": {
        "seed": 1,
        "variants": 8,
        "inputs": [{"image": {"width": 224, "height": 224, "format": "jpeg"}}],
    },
    "load": {"rate": 2.5, "arrival": "poisson", "duration": 25, "warmup": 5, "timeout": 60},
    "slo": {"p95_latency_s": 10.0, "error_rate": 0.01},
}

#: The other model presets: (api_name, generated input, arrival rate) in place of the image ones.
DEMO_CALLS: dict[str, tuple[str, dict[str, Any], float]] = {
    "image": ("classify", DEMO_SCENARIO["payload"]["inputs"][0], 2.5),
    "text": ("classify", {"text": {"words": [8, 40]}}, 2.5),
    "audio": ("classify", {"audio": {"seconds": 2, "sample_rate": 16000}}, 2.0),
    "chat": ("generate", {"text": {"words": [5, 20]}}, 0.5),
}


#: `--preset abc`: Gradio's guide's three functions (a and b share a concurrency_id) under a 3:2:1 mix
#: of their events (docs/traffic-mixes-and-journeys.md).
DEMO_MIX: dict[str, Any] = {
    "mix": [{"weight": w, "endpoint": {"api_name": name},
             "payload": {"seed": 1, "inputs": [{"text": {"words": [2, 4]}}]}}
            for w, name in ((3, "a"), (2, "b"), (1, "c"))],
    "rate": 8.0,
}


@dataclass
class DemoResult:
    run: RunResult
    report_html: Path


def demo_scenario(preset: str = "image", overrides: dict[str, Any] | None = None) -> Scenario:
    """The embedded scenario, calling `preset`'s endpoint with inputs of its kind."""
    if preset not in (*DEMO_CALLS, "abc"):
        raise ScenarioError(
            f"qbench demo --preset {preset!r}: expected one of {', '.join(DEMO_CALLS)}, abc (a mix)")
    raw = copy.deepcopy(DEMO_SCENARIO)
    raw["name"] = f"demo-{preset}"
    if preset == "abc":
        raw["description"] = "qbench demo: Gradio's guide's three functions under a 3:2:1 mix of events"
        del raw["endpoint"], raw["payload"]
        raw["mix"], raw["load"]["rate"] = copy.deepcopy(DEMO_MIX["mix"]), DEMO_MIX["rate"]
        return parse_scenario(raw, source="qbench demo (embedded)", overrides=overrides)
    api_name, generated, rate = DEMO_CALLS[preset]
    raw["description"] = f"qbench demo: the {preset} preset (random init) under Poisson arrivals"
    raw["endpoint"] = {"api_name": api_name}
    raw["payload"]["inputs"] = [generated]
    raw["load"]["rate"] = rate
    return parse_scenario(raw, source="qbench demo (embedded)", overrides=overrides)


def run_demo(
    *,
    preset: str = "image",
    overrides: dict[str, Any] | None = None,
    reports: Path = Path("reports"),
    console: Console | None = None,
) -> DemoResult:
    """Serve `preset`, load it with the embedded scenario, write records + summary + report."""
    from qbench.report.build import build_report
    from qbench.run.console import render_summary

    console = console or Console()
    scenario = demo_scenario(preset, overrides)
    with contextlib.ExitStack() as stack:
        with console.status(f"starting the reference server (preset {preset!r}: loading the model)..."):
            url = stack.enter_context(start_reference_server(preset))
        console.print(f"[bold]reference server[/] ready on {url} (preset {preset})")
        result = run_scenario(scenario, target=url, out_dir=_run_dir(reports, scenario.name), live=True)
    render_summary(result.summary, console, open_loop=True, findings=result.diagnosis)
    with console.status("drawing charts and the HTML report..."):
        report = build_report(result.run_dir)
    console.print(f"records: {result.run_dir}")
    console.print(f"report:  {report.html}")
    return DemoResult(result, report.html)


def _run_dir(reports: Path, name: str) -> Path:
    from qbench.run.results.files import new_folder

    return new_folder("run", name, reports)
