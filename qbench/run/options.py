"""`qbench run` as a library call: RunOptions (what the command line asked) -> `run_with_options`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qbench.errors import QbenchError, ScenarioError
from qbench.run.load.generator import StopHook
from qbench.run.pipeline import RunResult, load_scenario, run_scenario
from qbench.run.results.files import new_folder, remove_if_empty
from qbench.run.scenario.schema import Scenario

NO_SCENARIO = "no scenario file: pass one, or --target URL (and --api NAME) to write it from the app"


@dataclass(frozen=True)
class RunOptions:
    """What `qbench run` was asked: a scenario file (or `target` + `api`), overrides, the generator."""

    scenario: Path | None = None
    target: str | None = None
    api: str | None = None  # without a scenario file: the endpoint to load
    out: Path | None = None  # the run directory (default: reports/<time>-<name>)
    sets: dict[str, Any] = field(default_factory=dict)  # --set key=value, parsed
    credentials: dict[str, Any] = field(default_factory=dict)  # --auth / --header / --bearer-env overrides
    processes: int | None = None  # load.processes
    replay: Path | None = None  # load.replay: a past run folder
    ray: str | None = None  # load.executor: ray at this address
    workers: str | None = None  # Ray actors: a number or "auto"
    live: bool = True

    def overrides(self) -> dict[str, Any]:
        """Dotted scenario keys: --set first, then the credentials, then the dedicated options."""
        overrides = self.sets | self.credentials
        if self.processes is not None:
            overrides["load.processes"] = self.processes
        if self.replay is not None:
            overrides["load.replay"] = str(self.replay.resolve())
        if self.ray is not None:
            overrides["load.executor"] = "ray"
            overrides["load.ray_address"] = self.ray
        if self.workers is not None:
            overrides["load.workers"] = workers_value(self.workers)
        return overrides


def workers_value(text: str) -> int | str:
    """--workers N|auto: a number of Ray actors, else the text (the scenario's check names a bad one)."""
    try:
        return int(text)
    except ValueError:
        return text.strip()


@dataclass
class OptionsRun:
    """A finished `qbench run`: the scenario, the result, and the scenario written from the app (or None)."""

    scenario: Scenario
    result: RunResult
    written: Path | None = None


def run_with_options(options: RunOptions, stop_when: StopHook | None = None) -> OptionsRun:
    """Load or write the scenario, run it (`stop_when`: its stop hook), keep a written one by the records."""
    check_api_option(options.scenario, options.api)
    overrides = options.overrides()
    if options.scenario is not None:
        scenario = load_scenario(options.scenario, overrides)
        result = run_scenario(scenario, target=options.target, out_dir=options.out, live=options.live,
                              stop_when=stop_when)
        return OptionsRun(scenario, result)
    out = options.out or new_folder("run", options.api.lstrip("/") if options.api else "app")
    try:
        text, scenario = scenario_from_app(options.target, options.api, overrides, out / "scenario.yaml")
    except QbenchError:
        remove_if_empty(out)  # no scenario, no run: no empty folder left behind
        raise
    result = run_scenario(scenario, target=options.target, out_dir=out, live=options.live,
                          stop_when=stop_when)
    saved = result.run_dir / "scenario.yaml"
    saved.write_text(text.replace("THIS_FILE", str(saved)), encoding="utf-8")
    return OptionsRun(scenario, result, saved)


def scenario_from_app(target: str | None, api: str | None, overrides: dict[str, Any],
                      path: Path) -> tuple[str, Scenario]:
    """Without a scenario file: the text written from `target`'s API (saved as `path`), parsed."""
    from qbench.run.target.draft import app_scenario

    if target is None:
        raise ScenarioError(NO_SCENARIO)
    command = f"qbench init {target} --api {api}" if api else f"qbench init {target}"
    result, scenario = app_scenario(target, api, overrides, command=command, scenario_path=path)
    return result.text, scenario


def check_api_option(scenario: Path | None, api: str | None) -> None:
    """--api names the endpoint of a scenario written from the app: not beside a scenario file."""
    if scenario is not None and api is not None:
        raise ScenarioError(f"--api {api}: applies without a scenario file (with --target); {scenario} "
                            "names its own endpoint (change it with --set endpoint.api_name=NAME)")
