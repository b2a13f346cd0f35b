"""What a sweep is asked to do: CLI options + the scenario's `sweep:` section -> SweepConfig.

    # in a scenario file (every key optional; CLI options win, axis by axis)
    sweep:
      grid: {concurrency_limit: [1, 2, 4, 8], max_batch_size: [1, 4, 8, 16], max_threads: [8, 40]}
      link: {users: "2 * concurrency_limit * max_batch_size"}
      slo: {p95_latency_s: 2}          # merged over the scenario's own slo:
      server: {preset: image}          # or {config: path/to/server.yaml} (relaunch and live modes)
      launch: "python app.py --concurrency {concurrency_limit}"   # launch mode
      repeat: 1
      search: grid                     # grid | smart | model
      duration: 4                      # seconds of load per point (load.duration)
      max_memory_mb: 8000
      max_error_rate: 0.01
      tolerated_wait_s: 10             # for the max_size advice

`SweepOptions` are the raw, JSON-able inputs; they are saved in sweep.json so that `--resume DIR` rebuilds
exactly the same `SweepConfig`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from qbench.errors import ScenarioError
from qbench.run.scenario import (
    Scenario,
    Slo,
    file_slug,
    parse_scenario,
    read_scenario_mapping,
    resolve_paths,
)
from qbench.tune.grid import Grid, build_grid, is_server_knob, parse_link
from qbench.tune.recommend import Constraints

Mode = Literal["relaunch", "live", "launch", "target"]
SearchMode = Literal["grid", "smart", "model"]
SWEEP_KEYS = {
    "grid",
    "link",
    "slo",
    "server",
    "launch",
    "repeat",
    "search",
    "duration",
    "warmup",
    "max_memory_mb",
    "max_error_rate",
    "tolerated_wait_s",
    "capacity_trials",
}


@dataclass
class SweepOptions:
    """Raw inputs of a sweep (CLI + defaults), JSON-able."""

    scenario: str
    grid: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    slo: dict[str, float] = field(default_factory=dict)
    repeat: int | None = None
    search: str | None = None
    live: bool = False
    preset: str | None = None
    server_config: str | None = None
    launch: str | None = None
    target: str | None = None
    duration: float | None = None
    warmup: float | None = None
    max_memory_mb: float | None = None
    max_error_rate: float | None = None
    tolerated_wait_s: float | None = None
    capacity_trials: int | None = None
    ready_timeout_s: float = 60.0
    out_root: str = "reports"


@dataclass
class SweepConfig:
    """Everything `run_sweep` needs, validated."""

    options: SweepOptions
    scenario: Scenario
    grid: Grid
    constraints: Constraints
    mode: Mode
    sweep_dir: Path
    base_settings: dict[str, Any] | None = None
    api_name: str | None = None
    launch: str | None = None
    target: str | None = None
    repeat: int = 1
    search: SearchMode = "grid"
    point_duration_s: float | None = None
    warmup_s: float | None = None
    stop_runaway: bool = True
    capacity_trials: int = 5
    ready_timeout_s: float = 60.0

    def describe(self) -> dict[str, Any]:
        """The sweep.json body (besides id and time)."""
        return {
            "scenario": {"path": self.options.scenario, "content": self.scenario.model_dump(mode="json")},
            "mode": self.mode,
            "grid": self.grid.to_dict(),
            "slo": self.constraints.slo,
            "constraints": asdict(self.constraints),
            "search": self.search,
            "repeat": self.repeat,
            "server": {"settings": self.base_settings, "launch": self.launch, "target": self.target},
            "options": asdict(self.options),
        }


def read_sweep_scenario(path: Path) -> tuple[Scenario, dict[str, Any]]:
    """The scenario without its `sweep:` section, and that section (validated keys)."""
    raw = read_scenario_mapping(path)
    section = raw.pop("sweep", None) or {}
    if not isinstance(section, dict):
        raise ScenarioError(f"{path}: key 'sweep': expected a mapping, got {section!r}")
    unknown = set(section) - SWEEP_KEYS
    if unknown:
        raise ScenarioError(
            f"{path}: key 'sweep': unknown keys {sorted(unknown)}; expected {sorted(SWEEP_KEYS)}"
        )
    raw.setdefault("name", path.stem)
    resolve_paths(raw, path.parent)
    return parse_scenario(raw, source=str(path)), section


def _server_settings(
    options: SweepOptions, section: dict[str, Any], source: str, scenario_name: str
) -> dict[str, Any] | None:
    """Base reference-server settings: --server-config, --preset, sweep.server, else the preset named
    like the scenario (if there is one)."""
    from reference_server.settings import PRESET_DIR, SettingsError, load_preset, load_settings

    server = section.get("server") or {}
    if not isinstance(server, dict):
        raise ScenarioError(f"{source}: key 'sweep.server': expected {{preset: NAME}} or {{config: PATH}}")
    try:
        if options.server_config:
            settings = load_settings(options.server_config)
        elif options.preset:
            settings = load_preset(options.preset)
        elif "config" in server:
            settings = load_settings(Path(source).parent / str(server["config"]))
        elif "preset" in server:
            settings = load_preset(str(server["preset"]))
        elif (PRESET_DIR / f"{scenario_name}.yaml").is_file():
            settings = load_preset(scenario_name)  # scenarios/image.yaml pairs with the `image` preset
        else:
            return None
    except SettingsError as exc:
        raise ScenarioError(str(exc)) from None
    return settings.model_dump(mode="json", exclude={"admin_token"})


def _constraints(
    options: SweepOptions, scenario: Scenario, section: dict[str, Any], source: str
) -> Constraints:
    slo = dict(scenario.slo.thresholds()) if scenario.slo else {}
    slo.update(section.get("slo") or {})
    slo.update(options.slo)
    try:
        Slo(**slo)
    except ValidationError as exc:
        bad = "; ".join(_slo_problem(e) for e in exc.errors())
        raise ScenarioError(f"{source}: SLO {slo}: {bad}") from None
    max_error = options.max_error_rate or section.get("max_error_rate") or slo.pop("error_rate", None) or 0.01
    slo.pop("error_rate", None)
    return Constraints(
        slo=slo,
        max_error_rate=float(max_error),
        max_memory_mb=options.max_memory_mb or section.get("max_memory_mb"),
        tolerated_wait_s=options.tolerated_wait_s or section.get("tolerated_wait_s"),
    )


def _slo_problem(error: ErrorDetails) -> str:
    key = ".".join(map(str, error["loc"]))
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown SLO key; expected one of {', '.join(Slo.model_fields)}"
    return f"{key}: {error['msg']}"


def _grid(options: SweepOptions, section: dict[str, Any]) -> Grid:
    """Merge the scenario's grid and links with the CLI's, axis by axis; links may use axes from both."""
    axes: dict[str, Any] = dict(section.get("grid") or {})
    cli_axes = build_grid(options.grid).axes
    section_links = section.get("link") or {}
    if not isinstance(section_links, dict):
        raise ScenarioError(f"key 'sweep.link': expected a mapping name: expression, got {section_links!r}")
    links = {str(name): str(source) for name, source in section_links.items()}
    axes.update(cli_axes)
    links.update({name: expr.source for name, expr in map(parse_link, options.links)})
    for name in list(links):
        if name in cli_axes:
            links.pop(name)
    if not axes:
        raise ScenarioError("nothing to sweep: give --grid name=v1,v2 (or sweep.grid in the scenario)")
    return build_grid(axes, links)


def _mode(options: SweepOptions, section: dict[str, Any], grid: Grid) -> Mode:
    launch = options.launch or section.get("launch")
    if sum(bool(x) for x in (launch, options.target, options.live)) > 1:
        raise ScenarioError("choose one of --launch, --target and --live")
    if options.target:
        server = [k for k in grid.axes if is_server_knob(k)]
        if server:
            raise ScenarioError(
                f"--target {options.target}: qbench cannot change that server, so server knobs {server} "
                "cannot be swept; sweep client knobs (rate, users, load.*) or use --launch / a preset"
            )
        return "target"
    if launch:
        return "launch"
    if options.live and "concurrency_id" in grid.axes:
        raise ScenarioError("--live: concurrency_id cannot change on a running server; drop --live")
    return "live" if options.live else "relaunch"


def new_sweep_dir(root: Path, scenario_name: str) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    slug = file_slug(scenario_name, default="scenario")
    path = root / f"sweep-{slug}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"sweep-{slug}-{stamp}-{n}"
    return path


def build_config(options: SweepOptions, sweep_dir: Path | None = None) -> SweepConfig:
    """Validate options + scenario into a SweepConfig (a new sweep dir unless one is given)."""
    path = Path(options.scenario)
    scenario, section = read_sweep_scenario(path)
    grid = _grid(options, section)
    mode = _mode(options, section, grid)
    settings = (
        _server_settings(options, section, str(path), scenario.name) if mode in ("relaunch", "live") else None
    )
    if mode in ("relaunch", "live") and settings is None:
        raise ScenarioError(
            f"{path}: a sweep over the reference server needs a base server config: "
            "--preset NAME, --server-config FILE or sweep.server {preset: NAME | config: FILE}"
        )
    search_name = options.search or section.get("search") or "grid"
    if search_name not in ("grid", "smart", "model"):
        raise ScenarioError(f"search {search_name!r}: expected grid, smart or model")
    search = cast(SearchMode, search_name)
    return SweepConfig(
        options=options,
        scenario=scenario,
        grid=grid,
        constraints=_constraints(options, scenario, section, str(path)),
        mode=mode,
        sweep_dir=sweep_dir or new_sweep_dir(Path(options.out_root), scenario.name),
        base_settings=settings,
        api_name=scenario.endpoint.api_name,
        launch=options.launch or section.get("launch"),
        target=options.target,
        repeat=int(options.repeat or section.get("repeat") or 1),
        search=search,
        point_duration_s=options.duration or section.get("duration"),
        warmup_s=options.warmup if options.warmup is not None else section.get("warmup"),
        capacity_trials=int(
            options.capacity_trials
            if options.capacity_trials is not None
            else section.get("capacity_trials", 5)
        ),
        ready_timeout_s=options.ready_timeout_s,
    )


def resume_options(sweep_dir: Path) -> SweepOptions:
    """The options a sweep was started with (from its sweep.json)."""
    import json

    path = sweep_dir / "sweep.json"
    try:
        saved = json.loads(path.read_text())["options"]
    except (OSError, ValueError, KeyError) as exc:
        raise ScenarioError(f"--resume {sweep_dir}: cannot read {path}: {exc}") from None
    known = set(SweepOptions.__dataclass_fields__)
    return SweepOptions(**{k: v for k, v in saved.items() if k in known})


def parse_slo_options(items: list[str]) -> dict[str, float]:
    """`["p95_latency_s=2"]` -> {"p95_latency_s": 2.0}."""
    slo: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            slo[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ScenarioError(f"--slo {item!r}: expected metric=number (e.g. p95_latency_s=2)")
    return slo


def sweep_options(scenario: Path, **values: Any) -> SweepOptions:
    """SweepOptions from CLI values (paths become strings so the options stay JSON-able)."""
    clean: dict[str, Any] = {k: (str(v.resolve()) if isinstance(v, Path) else v) for k, v in values.items()}
    return SweepOptions(scenario=str(scenario.resolve()), **clean)
