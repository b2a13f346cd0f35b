"""Server settings: the Gradio queue/launch knobs plus the functions (event listeners) to serve.

    functions:                      # one entry per Gradio event listener (fn_index = position)
      - api_name: echo
        workload: echo              # a registered workload kind (reference_server.workloads)
        params: {}                  # validated by the workload factory
        concurrency_limit: default  # "default" -> queue.default_concurrency_limit | int | null (unlimited)
        concurrency_id: null        # functions share a group (and its lowest limit) only if they share an id
        batch: false
        max_batch_size: 4
        batch_wait_ms: 0            # EXTENSION (not in Gradio): wait up to this long to fill a batch
        queue: true
        api_visibility: public
    queue: {default_concurrency_limit: 1, max_size: null, status_update_rate: auto}
    launch: {max_threads: 40, host: 127.0.0.1, port: 7860}
    gradio: 6                       # the release emulated: 3 | 4 | 5 | 6 (see below)

`gradio` picks the release the server speaks as (http.gradio3_routes): 6 and 5 serve sse_v3 under
/gradio_api (5 reports 5.50.0), 4 serves sse_v3 at the root (4.44.1), 3 serves Gradio 3.50's websocket
queue at the root. Gradio 3 has no per-event concurrency: one pool of `queue.concurrency_count` workers
(default 1) serves every event, and `launch.max_threads` is raised to at least concurrency_count;
`concurrency_limit`, `concurrency_id` and `default_concurrency_limit` do not exist there (an error),
and `concurrency_count` exists only there.

Gradio's default concurrency_id is `id(fn)`, so listeners sharing one Python function object share a group.
Here each function is its own group unless an explicit `concurrency_id` joins them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reference_server.auth import AuthSettings

PRESET_DIR = Path(__file__).parent / "presets"
REVEAL = {"reveal_secrets": True}  # model_dump(context=REVEAL) keeps auth passwords and tokens


class SettingsError(ValueError):
    """Invalid server settings; the message names the file, the key, the value and the expectation."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CudaOverrides(_Strict):
    """A function's queue knobs when the server runs on CUDA (a preset that fits the device it runs
    on: a GPU gains from batches a CPU cannot use); applied by the lifespan once the device is known."""

    max_batch_size: int | None = Field(default=None, ge=1)
    concurrency_limit: int | Literal["default"] | None = "default"
    batch_wait_ms: float | None = Field(default=None, ge=0)


class FunctionSettings(_Strict):
    """One event listener: what it runs and how the queue schedules it."""

    api_name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    workload: str
    params: dict[str, Any] = Field(default_factory=dict)
    concurrency_limit: int | Literal["default"] | None = "default"
    concurrency_id: str | None = None
    batch: bool = False
    max_batch_size: int = Field(default=4, ge=1)
    batch_wait_ms: float = Field(default=0.0, ge=0)
    queue: bool = True
    api_visibility: Literal["public", "undocumented", "private"] = "public"
    on_cuda: CudaOverrides | None = None  # EXTENSION: queue knobs that replace these when serving on CUDA

    @field_validator("concurrency_limit")
    @classmethod
    def _positive_limit(cls, v: int | str | None) -> int | str | None:
        if isinstance(v, int) and v < 1:
            raise ValueError("must be >= 1, 'default' or null (unlimited)")
        return v

    @property
    def group_id(self) -> str:
        """The concurrency group: the explicit concurrency_id, else one group per function."""
        return self.concurrency_id if self.concurrency_id is not None else f"fn:{self.api_name}"


MIN_STATUS_UPDATE_RATE_S = 0.01  # a numeric rate below this would make the estimation loop spin


class QueueSettings(_Strict):
    default_concurrency_limit: int | None = Field(default=1, ge=1)
    concurrency_count: int | None = Field(default=None, ge=1)  # Gradio 3.x only (None there: 1)
    max_size: int | None = Field(default=None, ge=0)
    status_update_rate: Literal["auto"] | float = "auto"
    # Synthetic: each dispatch stalls the event loop this many ms per event still waiting in its group,
    # a server whose per-event work grows with its queue (real Gradio's throughput falls as its queue
    # grows); 0 = off. It makes the sustainable rate lower than the concurrency limit alone suggests.
    stall_ms_per_waiting: float = Field(default=0.0, ge=0)
    # Synthetic faults for soak runs (qbench soak), 0/None = off. A leak: keep this many bytes per
    # finished event, as a queue whose per-event dictionaries are never emptied; with
    # `leak_bound_events`, only the last that many events' bytes (a cache with a bound, as Gradio's
    # state_session_capacity). A stuck queue: start no event after `stop_after_events` were started
    # (joins are still accepted and never answered). A server that degrades with use: each job runs
    # `degrade_ms_per_1k_events` ms longer per 1,000 events started before it.
    leak_bytes_per_event: int = Field(default=0, ge=0)
    leak_bound_events: int | None = Field(default=None, ge=1)
    stop_after_events: int | None = Field(default=None, ge=0)
    degrade_ms_per_1k_events: float = Field(default=0.0, ge=0)

    @field_validator("status_update_rate")
    @classmethod
    def _positive_rate(cls, v: str | float) -> str | float:
        if not isinstance(v, str) and not MIN_STATUS_UPDATE_RATE_S <= v < float("inf"):
            raise ValueError(f"must be 'auto' or a finite number of seconds >= {MIN_STATUS_UPDATE_RATE_S} "
                             "(estimations are broadcast every that many seconds)")
        return v


class LaunchSettings(_Strict):
    max_threads: int = Field(default=40, ge=1)
    # Processes that parse uploads and decode image inputs (reference_server.io.decode_pool): auto = up to 8
    # on CUDA, 0 on a CPU; 0 = in the server's worker threads.
    decode_workers: int | Literal["auto"] = "auto"
    # HTTP front-end processes before the one queue (reference_server.http.front_ends; `python -m
    # reference_server` and `qbench serve` only): auto = 0 (off) everywhere until a GPU measurement
    # shows they help (measured on a 2-core CPU box only); 0 = HTTP in the server's own event loop.
    front_ends: int | Literal["auto"] = "auto"
    uploads_in_memory_mb: float = Field(default=256.0, ge=0)  # upload bytes kept in memory, then on disk
    host: str = "127.0.0.1"
    port: int = Field(default=7860, ge=0, le=65535)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "warning"
    access_log: bool = False


class ServerSettings(_Strict):
    functions: list[FunctionSettings] = Field(min_length=1)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    launch: LaunchSettings = Field(default_factory=LaunchSettings)
    heartbeat_interval_s: float = Field(default=15.0, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    torch_threads: int | None = Field(default=None, ge=1)
    max_file_size: int | None = Field(default=None, ge=1)
    show_error: bool = False
    admin_token: str | None = None
    title: str = "qbench reference server"
    auth: AuthSettings = Field(default_factory=AuthSettings)  # login users and bearer tokens (dumps: ***)
    gradio: Literal[3, 4, 5, 6] = 6  # the Gradio major release emulated (module docstring)

    @field_validator("launch")
    @classmethod
    def _workers(cls, v: LaunchSettings) -> LaunchSettings:
        if isinstance(v.decode_workers, int) and v.decode_workers < 0:
            raise ValueError(f"launch.decode_workers = {v.decode_workers}: expected auto or an integer >= 0")
        if isinstance(v.front_ends, int) and not 0 <= v.front_ends <= 64:
            raise ValueError(f"launch.front_ends = {v.front_ends}: expected auto or an integer 0-64")
        return v

    @model_validator(mode="after")
    def _unique_names_and_batch_rules(self) -> ServerSettings:
        seen: set[str] = set()
        for i, fn in enumerate(self.functions):
            if fn.api_name in seen:
                raise ValueError(f"functions[{i}].api_name {fn.api_name!r} is used twice; must be unique")
            seen.add(fn.api_name)
        problem = version_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def concurrency_count(self) -> int:
        """Gradio 3.x's one worker pool (1 unless set)."""
        return self.queue.concurrency_count or 1

    @property
    def max_threads(self) -> int:
        """Effective thread cap: Gradio 3.x's launch() raises max_threads to at least concurrency_count."""
        if self.gradio == 3:
            return max(self.launch.max_threads, self.concurrency_count)
        return self.launch.max_threads

    def group_id(self, fn: FunctionSettings) -> str:
        """The concurrency group of `fn`: Gradio 3.x has one queue-wide group, later releases one per
        concurrency_id (FunctionSettings.group_id)."""
        return GRADIO3_GROUP if self.gradio == 3 else fn.group_id

    def function_index(self, api_name: str) -> int | None:
        return next((i for i, f in enumerate(self.functions) if f.api_name == api_name), None)

    def resolved_limit(self, fn: FunctionSettings) -> int | None:
        """A function's limit with "default" resolved (None = unlimited); Gradio 3.x: concurrency_count."""
        if self.gradio == 3:
            return self.concurrency_count
        if fn.concurrency_limit == "default":
            return self.queue.default_concurrency_limit
        return fn.concurrency_limit

    def config_hash(self) -> str:
        """Short stable hash of the effective settings (admin token excluded)."""
        body = self.model_dump(mode="json", exclude={"admin_token"})
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"admin_token"})


GRADIO3_GROUP = "gradio3:queue"


def version_problem(settings: ServerSettings) -> str | None:
    """Why `settings` uses a knob its Gradio release lacks (naming the equivalent), else None."""
    if settings.gradio != 3:
        if settings.queue.concurrency_count is not None:
            return (f"queue.concurrency_count exists only in Gradio 3.x (gradio: 3), not in gradio: "
                    f"{settings.gradio}; its equivalent there is queue.default_concurrency_limit (per event)")
        return None
    if isinstance(settings.launch.front_ends, int) and settings.launch.front_ends > 0:
        return ("launch.front_ends needs the SSE queue of Gradio 4.x and later; Gradio 3.x's queue is a "
                "websocket, which the front ends do not forward (gradio: 3): set launch.front_ends: 0")
    if settings.queue.default_concurrency_limit != 1:  # 1, its default, is also what a round trip dumps
        return ("queue.default_concurrency_limit does not exist in Gradio 3.x (gradio: 3); the equivalent "
                "is queue.concurrency_count (one pool of workers shared by every event)")
    for i, fn in enumerate(settings.functions):
        if fn.concurrency_limit != "default":
            return (f"functions[{i}].concurrency_limit does not exist in Gradio 3.x (gradio: 3); the "
                    "equivalent is queue.concurrency_count (one pool of workers shared by every event)")
        if fn.concurrency_id is not None:
            return (f"functions[{i}].concurrency_id does not exist in Gradio 3.x (gradio: 3), which has "
                    "one queue-wide pool (queue.concurrency_count) and no per-event groups")
    return None


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per problem: `source: key.path = value: expectation`."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        lines.append(f"{source}: {key}{shown}: {err['msg'].removeprefix('Value error, ')}")
    return "invalid server settings\n  " + "\n  ".join(lines)


def parse_settings(raw: Any, source: str = "<settings>") -> ServerSettings:
    """Validate a settings mapping; raise SettingsError with readable messages."""
    if not isinstance(raw, dict):
        raise SettingsError(f"{source}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return ServerSettings.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(format_validation_error(exc, source)) from None


def read_settings_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise SettingsError(f"cannot read server settings file {p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{p}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def load_settings(path: str | Path) -> ServerSettings:
    """Load and validate a YAML settings file."""
    return parse_settings(read_settings_file(path), str(path))


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
        raise SettingsError(f"unknown preset {name!r}; expected one of: {known}")
    return path


def load_preset(name: str) -> ServerSettings:
    return load_settings(preset_path(name))


def with_overrides(settings: ServerSettings, overrides: dict[str, Any], source: str) -> ServerSettings:
    """Return new settings with dotted-key overrides applied (e.g. {"queue.max_size": 8})."""
    raw = settings.model_dump(mode="json", context=REVEAL)
    for dotted, value in overrides.items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_settings(raw, source)


def for_device(settings: ServerSettings, device: str) -> ServerSettings:
    """The settings as served on `device`: each function's `on_cuda` knobs applied on CUDA."""
    if device != "cuda" or not any(fn.on_cuda for fn in settings.functions):
        return settings
    functions = []
    for fn in settings.functions:
        cuda = fn.on_cuda
        if cuda is None:
            functions.append(fn)
            continue
        knobs = cuda.model_dump(exclude_unset=True)
        functions.append(fn.model_copy(update={k: v for k, v in knobs.items() if v is not None
                                               or k == "concurrency_limit"}))
    return settings.model_copy(update={"functions": functions})


def synthetic_settings(**fields: Any) -> ServerSettings:
    """Convenience for tests and benchmarks: one `echo` function unless `functions` is given."""
    raw: dict[str, Any] = {"functions": [{"api_name": "echo", "workload": "echo"}]}
    raw.update(fields)
    return parse_settings(raw, "<synthetic_settings>")
