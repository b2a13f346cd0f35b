"""CLI options + the scenario's `sweep:` section -> a validated `SweepConfig` (`SweepOptions`: the
inputs sweep.json saves for `--resume`, the capacity ones nested). Keys, modes and the objective rule:
docs/design/sweeps-and-capacity.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast

from qbench.errors import ScenarioError
from qbench.run import (
    Scenario,
    Writer,
    new_folder,
    parse_scenario,
    read_scenario_mapping,
    resolve_paths,
    run_secrets,
    with_overrides,
)
from qbench.tune.capacity.bisect import SearchPlan
from qbench.tune.knobs.frameworks import app_framework, check_framework_knobs, check_framework_values
from qbench.tune.knobs.grid import Grid, build_grid, is_server_knob, parse_link
from qbench.tune.knobs.versions import check_knobs
from qbench.tune.servers.app_process import app_launch_line
from qbench.tune.values.constraints import Constraints, Objective, build_constraints, require_slo
from qbench.tune.values.sweep_info import SweepInfo

Mode = Literal["relaunch", "live", "launch", "target"]
SearchMode = Literal["grid", "smart", "model", "sim"]
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
    "capacity_tolerance",
    "capacity_duration",
    "confirm_duration",
    "objective",
}
DEFAULT_SWEEP_CONFIRM_S = 60.0  # the winner's capacity is confirmed by a run this long (qbench capacity's)
LOAD_SHAPE_KNOBS = frozenset({"rate", "users", "load.rate", "load.users", "load.burst", "load.stages"})


@dataclass(frozen=True)
class CapacityOptions:
    """How the sweep's capacities are searched and confirmed, as asked (None: the `sweep:` section's key,
    else its default)."""

    trials: int | None = None  # rate probes per search (0: none)
    tolerance: float | None = None  # the search stops at this relative bracket width
    duration: float | None = None  # seconds per probe (default: the point duration)
    confirm_duration: float | None = None  # seconds of the sustained run confirming the winner (0: off)


# sweep.json's `options` and the `sweep:` section name them flat
CAPACITY_KEYS = {"trials": "capacity_trials", "tolerance": "capacity_tolerance",
                 "duration": "capacity_duration", "confirm_duration": "confirm_duration"}


@dataclass(frozen=True)
class CapacitySettings:
    """`CapacityOptions` resolved over the `sweep:` section (SweepConfig.capacity)."""

    trials: int = 5
    tolerance: float = 0.1
    duration_s: float | None = None
    confirm_duration_s: float = DEFAULT_SWEEP_CONFIRM_S  # 0: no confirmation

    def plan(self, confirm: bool = False) -> SearchPlan:
        """The search's plan; with `confirm` (and a confirmation length) it ends with the sustained run."""
        return SearchPlan(tolerance=self.tolerance, max_probes=self.trials,
                          confirm=confirm and self.confirm_duration_s > 0)


@dataclass(frozen=True)
class SweepOptions:
    """Raw inputs of a sweep (CLI + defaults), JSON-able (`to_json`, `from_json`)."""

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
    capacity: CapacityOptions = field(default_factory=CapacityOptions)
    objective: str | None = None
    ready_timeout_s: float = 60.0
    out_root: str = "reports"
    app: str | None = None  # --app app.py: `python app.py [app_args]` with the startup hook
    app_args: list[str] = field(default_factory=list)
    python: str | None = None  # the interpreter for --app (default: qbench's own)
    knob_scope: str = "driven"  # driven: the scenario's events get the event knobs; all: every queued one
    overrides: dict[str, Any] = field(default_factory=dict)  # --set key=value on the scenario

    def to_json(self) -> dict[str, Any]:
        """sweep.json's `options`: every field, the capacity ones flat (CAPACITY_KEYS) in its place."""
        out: dict[str, Any] = {}
        for name, value in asdict(self).items():
            flat = {CAPACITY_KEYS[k]: v for k, v in value.items()} if name == "capacity" else {name: value}
            out.update(flat)
        return out

    @classmethod
    def from_json(cls, saved: Mapping[str, Any]) -> SweepOptions:
        """The options `to_json` saved (keys it does not know are dropped)."""
        capacity = CapacityOptions(**{k: saved[key] for k, key in CAPACITY_KEYS.items() if key in saved})
        known = {f.name for f in fields(cls)} - {"capacity"}
        return cls(**{k: v for k, v in saved.items() if k in known}, capacity=capacity)


@dataclass(frozen=True)
class SweepConfig:
    """Everything `run_sweep` needs, validated; never changed once built (`with_auth` derives a copy)."""

    options: SweepOptions
    scenario: Scenario
    grid: Grid
    constraints: Constraints
    mode: Mode
    sweep_dir: Path
    base_settings: dict[str, Any] | None = None
    api_name: str | None = None
    launch: str | None = None
    repeat: int = 1
    search: SearchMode = "grid"
    point_duration_s: float | None = None
    warmup_s: float | None = None
    stop_runaway: bool = True
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    objective_why: str = ""  # why constraints.objective ranks the points (choose_objective)
    # the Gradio release of the server (reference server: its `gradio` setting; launch and target modes:
    # read from the first point's /config); None until known or for a plain HTTP server
    gradio_major: int | None = None
    # launch mode, a Gradio app: start it with the startup hook (qbench.tune.servers.apphook), which sets the
    # point's knobs on `hook_events` (the scenario's api_name / fn_index; None: every queued event)
    hook: bool = False
    hook_events: list[str] | None = None
    # launch mode: the framework the app serves with ("litserve"; qbench.tune.knobs.frameworks), read from
    # --app's code, else from the hook's record at the first point; None: Gradio or not known yet
    framework: str | None = None

    def with_auth(self, overrides: dict[str, Any]) -> SweepConfig:
        """This config with command-line credentials, kept out of the saved options."""
        if not overrides:
            return self
        return replace(self, scenario=with_overrides(self.scenario, overrides))

    @property
    def writer(self) -> Writer:
        """Writes the sweep's files, masking the scenario's, target's and launched servers' secrets."""
        secrets = run_secrets(self.scenario, self.options.target or "")
        return Writer(secrets.with_values(*server_secrets(self.base_settings)))

    def probe_duration_s(self, otherwise: float) -> float:
        """Seconds per capacity probe: asked for, else the point's, else the scenario's, else `otherwise`."""
        return self.capacity.duration_s or self.point_duration_s or self.scenario.load.duration or otherwise

    def describe(self) -> dict[str, Any]:
        """The sweep.json body (besides id and time)."""
        return {
            "scenario": {"path": self.options.scenario, "content": self.scenario.model_dump(mode="json")},
            "mode": self.mode,
            "grid": self.grid.to_dict(),
            "slo": self.constraints.slo,
            "constraints": asdict(self.constraints),
            "search": self.search,
            "objective": self.constraints.objective,
            "objective_why": self.objective_why,
            "confirm_duration_s": self.capacity.confirm_duration_s,
            "repeat": self.repeat,
            "server": {
                "settings": masked_settings(self.base_settings),  # auth passwords and tokens as ***
                "launch": self.launch,
                "target": self.options.target,
            },
            "options": self.options.to_json(),
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
    """Base reference-server settings: the options, sweep.server, or the scenario's preset; else None."""
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
    # the launched servers need the real auth block; sweep.json shows it masked (masked_settings)
    return settings.model_dump(mode="json", exclude={"admin_token"}, context={"reveal_secrets": True})


def server_secrets(settings: dict[str, Any] | None) -> list[str]:
    """The passwords and tokens of a launched server's `auth` block."""
    auth = (settings or {}).get("auth")
    if not isinstance(auth, dict):
        return []
    return [str(v) for v in (auth.get("users") or {}).values()] + [str(t) for t in auth.get("tokens") or []]


def masked_settings(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """Server settings as sweep.json shows them: auth passwords and tokens as ***."""
    auth = (settings or {}).get("auth")
    if settings is None or not isinstance(auth, dict):
        return settings
    users = {user: "***" for user in auth.get("users") or {}}
    return {**settings, "auth": {"users": users, "tokens": ["***" for _ in auth.get("tokens") or []]}}


def _constraints(
    options: SweepOptions, scenario: Scenario, section: dict[str, Any], source: str
) -> Constraints:
    constraints = build_constraints(
        scenario, {**(section.get("slo") or {}), **options.slo}, source,
        max_error_rate=options.max_error_rate or section.get("max_error_rate"),
    )
    return replace(
        constraints,
        max_memory_mb=options.max_memory_mb or section.get("max_memory_mb"),
        tolerated_wait_s=options.tolerated_wait_s or section.get("tolerated_wait_s"),
    )


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
    launch = options.app or options.launch or section.get("launch")
    if options.app and options.launch:
        raise ScenarioError("choose one of --app and --launch (--app app.py is --launch 'python app.py')")
    if sum(bool(x) for x in (launch, options.target, options.live)) > 1:
        raise ScenarioError("choose one of --app/--launch, --target and --live")
    if launch:
        _check_event_knobs(str(launch), grid)
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


def build_config(options: SweepOptions, sweep_dir: Path | None = None) -> SweepConfig:
    """Validate options + scenario into a SweepConfig (a new sweep dir unless one is given)."""
    path = Path(options.scenario)
    scenario, section = read_sweep_scenario(path)
    if options.overrides:
        scenario = with_overrides(scenario, options.overrides)
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
    major = int(settings.get("gradio", 6)) if settings is not None else None
    check_knobs(swept_server_knobs(grid), major, f"the reference server (gradio: {major})")
    framework = _app_framework(options, mode, grid)
    search = _search(options, section)
    asked = options.capacity
    trials = int(asked.trials if asked.trials is not None else section.get("capacity_trials", 5))
    constraints = _constraints(options, scenario, section, str(path))
    objective, why = choose_objective(options.objective or section.get("objective"), scenario, grid,
                                      constraints, trials)
    tolerance = asked.tolerance or section.get("capacity_tolerance") or 0.1
    if not 0.001 <= float(tolerance) <= 1:
        raise ScenarioError(f"capacity tolerance {tolerance!r}: expected a relative width in [0.001, 1]")
    launch = app_command(options) or options.launch or section.get("launch")
    hook_events = driven_events(scenario, options.knob_scope)
    capacity = CapacitySettings(trials, float(tolerance), asked.duration or section.get("capacity_duration"),
                                confirm_duration(asked, section))
    return SweepConfig(
        options=options,
        scenario=scenario,
        grid=grid,
        constraints=replace(constraints, objective=objective),
        objective_why=why,
        capacity=capacity,
        mode=mode,
        sweep_dir=sweep_dir or new_folder("sweep", scenario.name, Path(options.out_root)),
        base_settings=settings,
        api_name=scenario.endpoint.api_name,
        launch=launch,
        # a plain HTTP app too: the hook sets the knobs of a LitServe app, and does nothing in any other
        hook=mode == "launch" and scenario.protocol in ("gradio", "http"),
        hook_events=hook_events,
        framework=framework,
        repeat=int(options.repeat or section.get("repeat") or 1),
        search=search,
        point_duration_s=options.duration or section.get("duration"),
        warmup_s=options.warmup if options.warmup is not None else section.get("warmup"),
        gradio_major=major,
    )


def confirm_duration(asked: CapacityOptions, section: dict[str, Any]) -> float:
    """Seconds of the winner's sustained confirmation (--confirm-duration, sweep.confirm_duration; 0: off)."""
    value = asked.confirm_duration
    if value is None:
        value = section.get("confirm_duration", DEFAULT_SWEEP_CONFIRM_S)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:
        raise ScenarioError(f"confirm duration {value!r}: expected seconds >= 0 (0 = no confirmation)")
    return seconds


def app_command(options: SweepOptions) -> str | None:
    """`--app app.py [-- args]` as a launch command (--python's interpreter, else qbench's); None: no app."""
    if not options.app:
        return None
    if not Path(options.app).is_file():
        raise ScenarioError(f"--app {options.app}: no such file")
    return app_launch_line(Path(options.app), options.python, options.app_args)


def _search(options: SweepOptions, section: dict[str, Any]) -> SearchMode:
    name = options.search or section.get("search") or "grid"
    if name not in ("grid", "smart", "model", "sim"):
        raise ScenarioError(f"search {name!r}: expected grid, smart, model or sim")
    return cast(SearchMode, name)


def _app_framework(options: SweepOptions, mode: Mode, grid: Grid) -> str | None:
    """The framework --app's code imports (None: Gradio or no app); KnobVersionError for a knob it lacks."""
    if mode in ("relaunch", "live"):
        check_framework_knobs(swept_server_knobs(grid), "gradio", "the reference server")
    if not options.app:
        return None
    try:
        framework = app_framework(Path(options.app).read_text(errors="replace"))
    except OSError:
        return None
    if framework is not None:
        check_framework_knobs(swept_server_knobs(grid), framework, f"--app {options.app}")
        check_framework_values(grid.axes, framework, f"--app {options.app}")
    return framework


def _check_event_knobs(launch: str, grid: Grid) -> None:
    """ScenarioError for an event-scoped knob (`limit@a`) with no placeholder in the launch command."""
    for name in [*grid.axes, *grid.links]:
        if "@" in name and is_server_knob(name) and "{" + name + "}" not in launch:
            raise ScenarioError(
                f"knob {name!r}: an app qbench launches gets a knob of one event only through a "
                f"{{{name}}} placeholder in --launch (the startup hook sets the knobs of the events the "
                "scenario drives: see --knob-scope); sweep it on the reference server (--preset), or "
                "sweep the unscoped knob")


def driven_events(scenario: Scenario, scope: str) -> list[str] | None:
    """The events whose per-event knobs the hook sets: the scenario's (`driven`), None for `all`."""
    if scope not in ("driven", "all"):
        raise ScenarioError(f"--knob-scope {scope!r}: expected driven or all")
    if scope == "all":
        return None
    names = [e.api_name if e.api_name else e.fn_index for _, e, _ in scenario.endpoints()]  # a mix: each
    events = list(dict.fromkeys(str(n).lstrip("/") for n in names if n is not None))
    return events or None


def swept_server_knobs(grid: Grid) -> list[str]:
    """The server knobs a grid sets (axes and linked variables)."""
    return [k for k in [*grid.axes, *grid.links] if is_server_knob(k)]


def choose_objective(
    requested: str | None, scenario: Scenario, grid: Grid, constraints: Constraints, trials: int
) -> tuple[Objective, str]:
    """The objective that ranks the points, and why. `requested` None: `capacity` for an open-loop load
    with a latency SLO, probes and no swept load knob, else `latency`; ScenarioError when it cannot be met."""
    load = scenario.load
    swept = sorted(LOAD_SHAPE_KNOBS & set(grid.axes))
    if requested not in (None, "capacity", "latency"):
        raise ScenarioError(f"objective {requested!r}: expected capacity or latency")
    if requested == "latency":
        return "latency", "asked for (--objective latency): points ranked by goodput at the scenario's load"
    if requested == "capacity":
        require_slo(constraints, "--objective capacity")
        if trials <= 0:
            raise ScenarioError("--objective capacity needs capacity probes: capacity_trials must be > 0")
        if swept:
            raise ScenarioError(
                f"--objective capacity searches the arrival rate itself: do not sweep {', '.join(swept)}"
            )
        return "capacity", "asked for (--objective capacity): points ranked by the highest arrival rate " \
            "meeting the SLO"
    size = {"users": f"{load.users} closed-loop users", "burst": f"a burst of {load.burst} requests"}
    if swept:
        return "latency", f"the grid sweeps the load itself ({', '.join(swept)}): points ranked at their load"
    if load.shape in size:
        return "latency", (f"the scenario's load has a fixed size ({size[load.shape]}): points ranked by "
                           "goodput at that load")
    if not any(not m.startswith("min_") for m in constraints.slo):
        return "latency", "no latency SLO to hold, so no capacity to search: points ranked by goodput"
    if trials <= 0:
        return "latency", "capacity_trials is 0: points ranked by goodput at the scenario's load"
    return "capacity", (f"the scenario's load is an open-loop {load.shape} (no fixed size): points ranked by "
                        "the highest arrival rate meeting the SLO")


def resumed_config(sweep_dir: Path) -> SweepConfig:
    """`--resume DIR`: the config the sweep in DIR was started with, writing into DIR."""
    return build_config(resume_options(sweep_dir), sweep_dir=sweep_dir)


def check_app_args(args: list[str], app: Path | None) -> None:
    """Arguments after `--` are the app's (--app): refused without an app to give them to."""
    if args and app is None:
        raise ScenarioError(f"unexpected arguments {args}: arguments after -- go to --app's app")


def resume_options(sweep_dir: Path) -> SweepOptions:
    """The options a sweep was started with (from its sweep.json)."""
    import json

    path = sweep_dir / "sweep.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"--resume {sweep_dir}: cannot read {path}: {exc}") from None
    saved = SweepInfo.from_dict(data if isinstance(data, dict) else {}).options
    if not saved:
        raise ScenarioError(f"--resume {sweep_dir}: cannot read {path}: it holds no 'options' (not a sweep?)")
    return SweepOptions.from_json(saved)
