"""Scenario: a YAML file -> a validated, frozen config. `load_scenario` fails before any request, with a
ScenarioError naming the file, the key, the value and what was expected."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from qbench.errors import ScenarioError
from qbench.run.scenario.credentials import REVEAL, Auth, Secrets, redact_headers
from qbench.run.scenario.input_specs import InputSpec

SHAPES = ("burst", "rate", "stages", "users", "trace", "replay")
MAX_VARIANTS = 100_000  # generated payloads
MAX_CHUNKS = 1_000_000  # input chunks streamed into one event


class _Model(BaseModel):
    # No inf/nan anywhere: every float is a duration, rate, size or bound that must be a real number.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# ---------------------------------------------------------------- payload


class Payload(_Model):
    seed: int = Field(0, ge=0)
    # distinct generated bodies, all made before the run and cycled (bounds generator CPU)
    variants: int = Field(64, ge=1, le=MAX_VARIANTS)
    inputs: list[InputSpec] = Field(default_factory=list)


# ---------------------------------------------------------------- endpoint


class Endpoint(_Model):
    """What to call: gradio `api_name` or `fn_index`; http `method`, `path`, `body` ("$i": input i),
    `headers`; openai `path`, `model`, `max_tokens`, `stream`, `body` (extra fields); mcp `tool`,
    `arguments`, `progress`; a `.stream()` event's `chunks`, `stream_every`; any protocol: `page`."""

    api_name: str | None = None
    fn_index: int | None = Field(default=None, ge=0)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    path: str | None = None
    body: Any = None
    headers: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = True
    tool: str | None = None  # protocol: mcp
    page: str | None = None  # a page load (any protocol): the page's path, e.g. "/"
    arguments: list[str] = Field(default_factory=list)  # protocol: mcp, one name per payload input
    progress: bool | None = None  # protocol: mcp, a progressToken on each call (None: yes)
    chunks: int | None = Field(default=None, ge=1, le=MAX_CHUNKS)  # gradio .stream(): chunks per event
    stream_every: float | None = Field(default=None, gt=0)  # seconds between chunks (default: the app's)

    @field_serializer("headers")
    def _hide_headers(self, value: dict[str, str], info: SerializationInfo) -> dict[str, str]:
        return redact_headers(value, [], info)  # an API key header shows as ***

    @field_validator("api_name")
    @classmethod
    def _strip_slash(cls, v: str | None) -> str | None:
        return v.lstrip("/") if v else v


# ---------------------------------------------------------------- load


class Stage(_Model):
    """`duration` seconds at `rate` req/s, or ramping linearly from `rate` to `to`."""

    duration: float = Field(gt=0)
    rate: float = Field(ge=0)
    to: float | None = Field(None, ge=0)


DRAIN_GRACE_S = 1.0  # default drain = timeout + this


class TraceSpec(_Model):
    """A trace file as the schedule: one request per line (JSONL or CSV; see qbench.run.scenario.trace)."""

    file: Path
    speedup: float = Field(1.0, gt=0)  # 2 = the trace's arrivals twice as fast
    window: tuple[float, float] | None = None  # [start, end) in trace seconds; the slice starts at 0
    loop: bool = False  # start the trace again when it ends (needs duration or requests)

    @field_validator("window")
    @classmethod
    def _ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0 <= v[0] < v[1]:
            raise ValueError("expected [start_s, end_s] with 0 <= start_s < end_s")
        return v


class Load(_Model):
    """The load shape (exactly one of SHAPES), stop conditions and client limits."""

    burst: int | None = Field(None, ge=1)  # N requests at once (every `interval` s if set)
    interval: float | None = Field(None, gt=0)
    rate: float | None = Field(None, gt=0)  # requests per second (open loop)
    arrival: Literal["constant", "poisson"] = "constant"
    stages: list[Stage] | None = Field(None, min_length=1)  # piecewise-linear rates, in order
    users: int | None = Field(None, ge=1)  # closed loop: each user waits for its response
    trace: TraceSpec | None = None  # a trace file's send times (open loop); a path or a mapping
    replay: Path | None = None  # a past run folder: its intended send times and request ids (open loop)
    think_time: float = Field(0.0, ge=0)  # seconds between a user's response and its next request
    think: Literal["constant", "exponential"] = "constant"
    ramp_up: float = Field(0.0, ge=0)  # users start evenly spread over this many seconds
    duration: float | None = Field(None, gt=0)  # stop sending after this many seconds
    requests: int | None = Field(None, ge=1)  # stop after this many requests
    warmup: float = Field(0.0, ge=0)  # requests intended in the first N seconds are not summarised
    timeout: float = Field(60.0, gt=0)  # per request; fires a cancel on the server
    drain: float | None = Field(
        None, ge=0
    )  # wait for in-flight requests after the last send (default: timeout + DRAIN_GRACE_S)
    sessions: Literal["per_request"] | int = "per_request"  # or a pool size (like browser tabs)
    max_in_flight: int | None = Field(None, ge=1)  # cap on concurrent requests (reported; adds send lag)
    max_connections: int = Field(0, ge=0)  # HTTP connection pool limit; 0 = unlimited
    connect_timeout: float = Field(10.0, gt=0)
    processes: int = Field(1, ge=1, le=64)  # generator processes (when one core is not enough)
    executor: Literal["local", "ray"] = "local"  # where generators run: this machine, or Ray actors
    workers: Literal["auto"] | int = "auto"  # Ray actors (auto: one per alive node with a CPU)
    ray_address: str | None = None  # Ray cluster: local (start one here), auto, ray://host:10001...

    @model_validator(mode="after")
    def _one_shape(self) -> Load:
        shapes = [s for s in SHAPES if getattr(self, s) is not None]
        if len(shapes) != 1:
            raise ValueError(
                f"expected exactly one load shape of {', '.join(SHAPES)}, got {shapes or 'none'}"
            )
        if self.rate is not None and self.duration is None and self.requests is None:
            raise ValueError("a rate needs a stop condition: set duration and/or requests")
        if self.users is not None and self.duration is None and self.requests is None:
            raise ValueError("users need a stop condition: set duration and/or requests")
        if isinstance(self.sessions, int) and self.sessions < 1:
            raise ValueError("sessions: expected 'per_request' or a pool size >= 1")
        if self.interval is not None and self.duration is None:
            raise ValueError("a repeated burst (interval) needs a duration")
        if self.trace is not None and self.trace.loop and self.duration is None and self.requests is None:
            raise ValueError("a looped trace needs a stop condition: set duration and/or requests")
        self._check_executor()
        return self

    def _check_executor(self) -> None:
        if isinstance(self.workers, int) and not 1 <= self.workers <= 1024:
            raise ValueError(f"workers: expected 'auto' or 1..1024 Ray actors, got {self.workers}")
        if self.executor == "ray" and self.processes > 1:
            raise ValueError("processes: splits a run on this machine; with executor: ray use workers: N")
        if self.executor != "ray" and (self.workers != "auto" or self.ray_address is not None):
            raise ValueError("workers and ray_address apply to executor: ray (on one machine use processes)")

    @field_validator("trace", mode="before")
    @classmethod
    def _trace_path(cls, v: Any) -> Any:
        return {"file": v} if isinstance(v, str | Path) else v

    @property
    def shape(self) -> str:
        return next(s for s in SHAPES if getattr(self, s) is not None)

    @property
    def drain_s(self) -> float:
        """`drain`, else `timeout` + DRAIN_GRACE_S."""
        return self.timeout + DRAIN_GRACE_S if self.drain is None else self.drain


# ---------------------------------------------------------------- SLO


#: SLO phases that are not a record property -> the record field a single request is judged by
#: (a request meets an inter-token-gap bound when its own p99 gap does, a chunk-latency bound when
#: its own p95 chunk latency does).
ITL_PER_REQUEST = {"itl_s": "itl_p99_s", "chunk_latency_s": "chunk_latency_p95_s"}


#: SLO phases that only a streamed token response has (qbench.run.protocols.openai).
TOKEN_PHASES = ("ttft_s", "tpot_s", "itl_s")


def token_slo_keys(slo: Slo) -> list[str]:
    """The SLO's keys that need a streamed token response (pXX_ttft_s, pXX_tpot_s, pXX_itl_s)."""
    return [k for k in slo.thresholds() if k.partition("_")[2] in TOKEN_PHASES]


class Slo(_Model):
    """Thresholds; any violated one makes `qbench run` exit 3. `pXX_<phase>` caps a percentile."""

    p50_latency_s: float | None = Field(None, gt=0)
    p90_latency_s: float | None = Field(None, gt=0)
    p95_latency_s: float | None = Field(None, gt=0)
    p99_latency_s: float | None = Field(None, gt=0)
    max_latency_s: float | None = Field(None, gt=0)
    p50_queue_wait_s: float | None = Field(None, ge=0)
    p95_queue_wait_s: float | None = Field(None, ge=0)
    p99_queue_wait_s: float | None = Field(None, ge=0)
    p95_service_s: float | None = Field(None, gt=0)
    p99_service_s: float | None = Field(None, gt=0)
    p95_ttfo_s: float | None = Field(None, gt=0)
    p99_ttfo_s: float | None = Field(None, gt=0)
    p50_ttft_s: float | None = Field(None, gt=0)  # time to first token from the actual send
    p95_ttft_s: float | None = Field(None, gt=0)
    p99_ttft_s: float | None = Field(None, gt=0)
    p95_tpot_s: float | None = Field(None, gt=0)  # time per output token after the first
    p99_tpot_s: float | None = Field(None, gt=0)
    p50_itl_s: float | None = Field(None, gt=0)  # inter-token gap, over every gap (run.results.summary)
    p90_itl_s: float | None = Field(None, gt=0)
    p95_itl_s: float | None = Field(None, gt=0)
    p99_itl_s: float | None = Field(None, gt=0)
    p50_chunk_latency_s: float | None = Field(None, gt=0)  # streamed inputs: chunk sent -> its answer
    p95_chunk_latency_s: float | None = Field(None, gt=0)
    min_chunks_answered: float | None = Field(None, ge=0, le=1)  # share of streamed chunks an output answered
    min_output_tps: float | None = Field(None, ge=0)  # ok requests' output tokens per second, in total
    error_rate: float | None = Field(None, ge=0, le=1)  # max share of sent requests that failed
    min_throughput: float | None = Field(None, ge=0)  # ok requests per second
    min_goodput: float | None = Field(None, ge=0)  # ok requests meeting the latency thresholds per second

    def thresholds(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def per_request_limits(self) -> dict[str, float]:
        """Phase -> tightest latency threshold, applied per request to compute goodput."""
        limits: dict[str, float] = {}
        for name, value in self.thresholds().items():
            stat, _, phase = name.partition("_")
            if phase.endswith("_s") and (stat.startswith("p") or stat == "max"):
                phase = ITL_PER_REQUEST.get(phase, phase)
                limits[phase] = min(value, limits.get(phase, value))
        return limits


# ---------------------------------------------------------------- mix (several endpoints in one run)


class MixEntry(_Model):
    """One endpoint of a `mix:` (qbench.run.load.mix): its weight, what it sends, optionally its own SLO."""

    weight: float = Field(1.0, gt=0)  # relative share of the requests (any positive number)
    endpoint: Endpoint
    payload: Payload = Payload.model_validate({})
    name: str | None = None  # the label records carry (default: the endpoint's, as without a mix)
    slo: Slo | None = None  # thresholds replacing the scenario's for this endpoint (the others apply)
    users: int | None = Field(default=None, ge=1)  # closed loop: its own users (load.users: the sum)
    start: float = Field(default=0.0, ge=0)  # seconds into the run before this entry gets requests

    @field_validator("weight", mode="before")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
            raise ValueError("expected a weight > 0 (leave an endpoint that gets no requests out of the mix)")
        return v


class JourneyStep(_Model):
    """One step of a `journey:`: an endpoint called `repeat` times, `think_time` s after each answer."""

    endpoint: Endpoint
    payload: Payload = Payload.model_validate({})
    repeat: int = Field(1, ge=1, le=10_000)
    think_time: float = Field(0.0, ge=0)  # seconds before each call of this step (reading the answer)
    name: str | None = None  # the label records carry (default: the endpoint's)


JOURNEY_SHAPES = ("users", "rate", "stages", "burst")


def endpoint_label(protocol: str, endpoint: Endpoint) -> str:
    """What records carry in `endpoint` for this endpoint (the protocols write the same)."""
    if endpoint.page is not None:
        return f"page {endpoint.page}"
    if protocol == "gradio":
        return endpoint.api_name or f"fn_index={endpoint.fn_index}"
    if protocol == "openai":
        path = endpoint.path or "/v1/chat/completions"
        return Secrets().with_url(path).redact(f"POST {path}")  # no ?key= value
    if protocol == "mcp":
        return f"mcp:{endpoint.tool}"
    return Secrets().with_url(endpoint.path).redact(f"{endpoint.method} {endpoint.path}")


# ---------------------------------------------------------------- scenario


class Expect(_Model):
    """Server settings the records should show (`expect:`; qbench.tune.points.knobcheck warns when not)."""

    concurrency_limit: int | None = Field(default=None, ge=1)
    concurrency_count: int | None = Field(default=None, ge=1)
    max_batch_size: int | None = Field(default=None, ge=1)


class Scenario(_Model):
    name: str = "scenario"
    description: str = ""
    target: str | None = None
    protocol: Literal["gradio", "http", "openai", "mcp"] = "gradio"
    endpoint: Endpoint = Endpoint()
    # Gradio wire family; default: what the app's /config announces (absent there: ws, Gradio 3.x)
    gradio_protocol: Literal["ws", "sse", "sse_v1", "sse_v2", "sse_v2.1", "sse_v3"] | None = None
    payload: Payload = Payload.model_validate({})
    mix: list[MixEntry] | None = None  # several endpoints, each with its weight (replaces endpoint/payload)
    journey: list[JourneyStep] | None = None  # what one user does, in order, in one session
    fetch_outputs: bool = True  # gradio: fetch output files as users' browsers and gradio_client do
    load: Load
    slo: Slo | None = None
    expect: Expect | None = None  # server settings the records should show (a warning when they do not)
    auth: Auth = Auth()  # credentials, any protocol (run.scenario.credentials); dumps show *** for secrets

    @model_serializer(mode="wrap")
    def _hide_listed_endpoint_headers(self, handler: SerializerFunctionWrapHandler,
                                      info: SerializationInfo) -> dict[str, Any]:
        """Endpoint headers named in auth.secret_headers are secrets too (Endpoint alone cannot know)."""
        data: dict[str, Any] = handler(self)
        if self.mix is not None or self.journey is not None:  # they replace endpoint and payload
            data.pop("endpoint", None)
            data.pop("payload", None)
        entries = (data.get("mix") or []) + (data.get("journey") or [])
        for endpoint in [data.get("endpoint")] + [e.get("endpoint") for e in entries]:
            headers = (endpoint or {}).get("headers")
            if endpoint is not None and headers and self.auth.secret_headers:
                endpoint["headers"] = redact_headers(headers, self.auth.secret_headers, info)
        return data

    @model_validator(mode="before")
    @classmethod
    def _mix_or_endpoint(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("mix") is not None and data.get("journey") is not None:
            raise ValueError("journey: a journey's steps replace a mix (a user does one thing after "
                             "another): drop mix, or drop journey")
        for key in ("mix", "journey"):
            both = [k for k in ("endpoint", "payload") if data.get(k) is not None]
            if data.get(key) is not None and both:
                raise ValueError(f"{key}: a {key} replaces endpoint and payload (each entry has its own): "
                                 f"drop {' and '.join(both)}: {data[both[0]]!r}, or drop {key}")
        return data

    @model_validator(mode="after")
    def _endpoint_fits_protocol(self) -> Scenario:
        if self.mix is not None and not self.mix:
            raise ValueError("mix: expected a list of at least one {weight, endpoint, payload}")
        if self.journey is not None:
            self._check_journey(self.journey)
        if self.mix:
            self._check_mix(self.mix)
        for where, ep, payload in self.endpoints():
            self._check_endpoint(where, ep, payload)
        if self.protocol != "gradio" and self.gradio_protocol is not None:
            raise ValueError("gradio_protocol applies to protocol: gradio only")
        self._check_token_slo()
        return self

    def _check_token_slo(self) -> None:
        """Refuse a TTFT, TPOT or ITL key on an openai endpoint that does not stream (never measurable)."""
        if self.protocol != "openai":
            return
        entries: list[tuple[str, Endpoint, str, Slo | None]]
        if self.mix is not None:
            entries = [(f"mix.{i}.", e.endpoint, f"mix.{i}.slo" if e.slo else "slo", e.slo or self.slo)
                       for i, e in enumerate(self.mix)]
        elif self.journey is not None:
            entries = [(f"journey.{i}.", e.endpoint, "slo", self.slo) for i, e in enumerate(self.journey)]
        else:
            entries = [("", self.endpoint, "slo", self.slo)]
        for where, ep, slo_at, slo in entries:
            keys = [] if ep.stream or slo is None else token_slo_keys(slo)
            if slo is not None and keys:
                raise ValueError(f"{slo_at}.{keys[0]}: value {slo.thresholds()[keys[0]]!r}: {where}endpoint."
                                 "stream is false, and a response that is not streamed has no first token "
                                 f"or inter-token gaps to time: set {where}endpoint.stream: true, or drop "
                                 f"{', '.join(f'{slo_at}.{k}' for k in keys)}")

    def token_warnings(self) -> list[str]:
        """One warning per openai endpoint that does not stream (no token timings); [] when all stream."""
        if self.protocol != "openai":
            return []
        return [f"{'' if where == 'endpoint' else where + '.'}endpoint.stream is false: the responses are "
                "not streamed, so this run measures no TTFT, TPOT or ITL (only latency and tokens from "
                "usage)" for where, ep, _ in self.endpoints() if ep.page is None and not ep.stream]

    @property
    def seed(self) -> int:
        """The seed of arrivals and endpoint draws: the payload's, or a mix's or journey's first entry's."""
        first = (self.mix or self.journey or [None])[0]
        return self.payload.seed if first is None else first.payload.seed

    def _check_mix(self, entries: list[MixEntry]) -> None:
        users = [e.users for e in entries]
        if any(u is not None for u in users):
            if any(u is None for u in users):
                i = users.index(None)
                raise ValueError(f"mix.{i}.users: value None: some entries have their own users, this one "
                                 "has none: give every entry its users (or none, to draw each request's "
                                 "entry by weight)")
            total = sum(u for u in users if u is not None)
            if self.load.users != total:
                have = f"load.users is {self.load.users}" if self.load.users else f"load is {self.load.shape}"
                raise ValueError(f"mix: the entries' users add up to {total}, but {have}: a mix with users "
                                 f"per entry runs closed loop with load.users: {total}")
        starts = [e.start for e in entries]
        if min(starts) > 0:
            raise ValueError(f"mix: every entry starts after 0 s (the first at {min(starts):g} s): at least "
                             "one entry needs start: 0, or nothing is sent until then")
        end = self.load.duration
        late = [i for i, e in enumerate(entries) if end is not None and e.start >= end]
        if late:
            at = entries[late[0]].start
            raise ValueError(f"mix.{late[0]}.start: value {at:g}: not before the run's end (load.duration: "
                             f"{end:g} s)")

    def _check_journey(self, steps: list[JourneyStep]) -> None:
        if not steps:
            raise ValueError("journey: expected a list of at least one {endpoint, payload} step")
        if self.load.shape not in JOURNEY_SHAPES:
            raise ValueError(f"journey: runs with load {' or '.join(JOURNEY_SHAPES)} (users: N journeys at "
                             f"a time; rate: new journeys per second), not {self.load.shape}")
        if self.load.processes > 1 or self.load.executor != "local":
            raise ValueError("journey: runs in one generator process (drop processes / executor: ray)")

    def endpoints(self) -> list[tuple[str, Endpoint, Payload]]:
        """(where in the file, endpoint, payload): the one endpoint, each of a mix, each journey step."""
        if self.journey is not None:
            return [(f"journey.{i}", e.endpoint, e.payload) for i, e in enumerate(self.journey)]
        if self.mix is None:
            return [("endpoint", self.endpoint, self.payload)]
        return [(f"mix.{i}", e.endpoint, e.payload) for i, e in enumerate(self.mix)]

    def _check_endpoint(self, where: str, ep: Endpoint, payload: Payload) -> None:
        at = "" if where == "endpoint" else f"{where}: "
        if ep.page is not None:
            if not ep.page.startswith("/"):
                raise ValueError(f"{at}endpoint.page {ep.page!r}: expected a path on the target, e.g. /")
            return  # a page load: nothing of the protocol's endpoint applies
        if self.protocol == "gradio" and ep.api_name is None and ep.fn_index is None:
            raise ValueError(f"{at}a gradio endpoint needs api_name (or fn_index)")
        if self.protocol == "http" and ep.path is None:
            raise ValueError(f"{at}an http endpoint needs a path (e.g. /predict)")
        if self.protocol == "mcp":
            self._check_mcp(at, ep, payload)
        if ep.progress is not None and self.protocol != "mcp":
            raise ValueError(f"{at}endpoint.progress {str(ep.progress).lower()}: progress notifications "
                             "(an MCP call's progressToken) apply to protocol: mcp only")
        if ep.chunks is not None and self.protocol != "gradio":
            raise ValueError(f"{at}endpoint.chunks (streamed inputs into a .stream() event) applies to "
                             "protocol: gradio only")
        if ep.stream_every is not None and ep.chunks is None:
            raise ValueError(f"{at}endpoint.stream_every {ep.stream_every:g}: set endpoint.chunks too (how "
                             "many chunks one event gets)")
        if self.protocol == "openai" and ep.body is not None and not isinstance(ep.body, dict):
            raise ValueError(f"{at}an openai endpoint's body is a mapping of extra request fields")
        recorded = self.load.shape in ("trace", "replay")
        if self.protocol == "openai" and not payload.inputs and not recorded:
            raise ValueError(f"{at}an openai scenario needs a payload input (the prompt): "
                             "text: {words: [8, 32]}")
        if self.protocol != "openai" and any(s.text and s.text.turns for s in payload.inputs):
            raise ValueError(f"{at}payload text turns (a multi-turn chat) apply to protocol: openai only")


    @staticmethod
    def _check_mcp(at: str, ep: Endpoint, payload: Payload) -> None:
        if not ep.tool:
            raise ValueError(f"{at}an mcp endpoint needs the tool to call: endpoint: {{tool: NAME, "
                             "arguments: [...]}} (`qbench init URL --protocol mcp` lists them)")
        if len(ep.arguments) != len(payload.inputs):
            raise ValueError(f"{at}endpoint.arguments names {len(ep.arguments)} argument(s) "
                             f"({', '.join(ep.arguments) or 'none'}) for {len(payload.inputs)} payload "
                             "input(s): one name per input, in order")
        if len(set(ep.arguments)) != len(ep.arguments):
            raise ValueError(f"{at}endpoint.arguments: a name given twice: {ep.arguments}")


def file_slug(name: str, default: str = "run") -> str:
    """A scenario name as one safe path segment (no separators, no `..`): `a/../../x` -> `a-x`."""
    return re.sub(r"(?:[^A-Za-z0-9_.-]|\.\.+)+", "-", name).strip("-.") or default


def read_scenario_mapping(path: Path) -> dict[str, Any]:
    """The YAML mapping in a scenario file; unreadable files and non-mappings raise ScenarioError."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date such as 2024-02-30
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: not valid YAML: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def load_scenario(path: Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read and validate a scenario file (relative paths against its folder; a `sweep:` section ignored)."""
    raw = read_scenario_mapping(path)
    raw.pop("sweep", None)
    raw.setdefault("name", path.stem)
    resolve_paths(raw, path.parent)
    return parse_scenario(raw, source=str(path), overrides=overrides)


def parse_scenario(
    raw: dict[str, Any], *, source: str = "<scenario>", overrides: dict[str, Any] | None = None
) -> Scenario:
    """Validate a scenario mapping, after applying dotted-key overrides such as {"load.rate": 12}."""
    data = apply_overrides(raw, overrides or {}, source=source)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(exc, source)) from None
    return scenario


def with_overrides(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """A copy of `scenario` with dotted-key overrides applied and validated again."""
    raw = scenario.model_dump(mode="json", by_alias=True, exclude_none=True, context=REVEAL)
    return parse_scenario(raw, source=f"overrides to {scenario.name}", overrides=overrides)


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any], *, source: str) -> dict[str, Any]:
    """Set dotted keys; setting one load shape (load.rate, load.users, ...) removes the others."""
    data = copy.deepcopy(raw)
    for key, value in overrides.items():
        parts = key.split(".")
        node: dict[str, Any] | list[Any] = data
        for part in parts[:-1]:
            if isinstance(node, list):  # an entry of a list (mix.1.weight, journey.0.repeat)
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(f"{source}: override key '{key}': '{part}' is not an index of "
                                        f"that list (0..{len(node) - 1})")
                child = node[int(part)]
            else:
                child = node.setdefault(part, {})
            if not isinstance(child, dict | list):
                raise ScenarioError(f"{source}: override key '{key}': '{part}' is not a mapping")
            node = child
        if isinstance(node, list):
            raise ScenarioError(f"{source}: override key '{key}': set a key of one entry ({key}.0...)")
        if parts[0] == "load" and len(parts) == 2 and parts[1] in SHAPES and value is not None:
            for other in SHAPES:
                node.pop(other, None)
            if parts[1] != "users":
                _users_to_weights(data)
        node[parts[-1]] = value
    return data


def _users_to_weights(data: dict[str, Any]) -> None:
    """An open-loop shape set on a mix with per-entry users: each entry's users become its weight."""
    mix = data.get("mix")
    if not isinstance(mix, list):
        return
    for entry in mix:
        if isinstance(entry, dict) and isinstance(entry.get("users"), int):
            entry["weight"] = entry.pop("users")


def format_errors(exc: ValidationError, source: str) -> str:
    """One line per offending key; alternatives of a union (e.g. 'per_request' or an int) are merged."""
    problems: dict[str, tuple[Any, list[str]]] = {}
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"] if not _UNION_TAG.match(str(p))) or "<top>"
        msg = err["msg"].removeprefix("Value error, ")
        if key == "<top>" and (named := _NAMED_KEY.match(msg)):  # a check across keys names its key
            key, msg = named.group(1), msg[named.end():]
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; expected one of {', '.join(_known_keys(err['loc'][:-1]))}"
        entry = problems.setdefault(key, (err.get("input"), []))
        if msg not in entry[1]:
            entry[1].append(msg)
    lines = [f"{source}: invalid scenario ({len(problems)} problem(s))"]
    for key, (value, msgs) in problems.items():
        shown = "" if isinstance(value, dict) else f" value {value!r}:"
        lines.append(f"  key '{key}':{shown} {'; or '.join(msgs)}")
    return "\n".join(lines)


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            continue
        nested = [t for t in _flatten(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if nested:
            model = nested[0]
    return [f.alias or name for name, f in model.model_fields.items()]


def _flatten(annotation: Any) -> list[Any]:
    args = get_args(annotation)
    return [t for arg in args for t in _flatten(arg)] if args else [annotation]


_NAMED_KEY = re.compile(
    r"^((?:mix|journey)(?:\.\d+(?:\.[a-z0-9_]+)*)?|endpoint|payload|slo(?:\.[a-z0-9_]+)?): ")
_UNION_TAG = re.compile(r"^(literal\[.*\]|int|float|str|bool|none|(list|dict|tuple)\[.*\]|[A-Z]\w*Spec)$")


def resolve_paths(raw: dict[str, Any], base: Path) -> None:
    """A scenario's relative paths (payload files, trace, replay, users file) made absolute against `base`."""
    auth = raw.get("auth")
    login = auth.get("login") if isinstance(auth, dict) else None
    users = login.get("users") if isinstance(login, dict) else None
    if isinstance(login, dict) and isinstance(users, str) and not Path(users).is_absolute():
        login["users"] = str(base / users)
    load = raw.get("load")
    if isinstance(load, dict):
        if isinstance(load.get("trace"), str):
            load["trace"] = {"file": load["trace"]}
        trace = load.get("trace")
        for node, key in ((trace, "file"), (load, "replay")):
            value = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict) and isinstance(value, str) and not Path(value).is_absolute():
                node[key] = str(base / value)
    mix = raw.get("mix")
    journey = raw.get("journey")
    entries = (mix if isinstance(mix, list) else []) + (journey if isinstance(journey, list) else [])
    for payload in [raw.get("payload")] + [e.get("payload") for e in entries if isinstance(e, dict)]:
        _resolve_payload_paths(payload, base)


def _resolve_payload_paths(payload: Any, base: Path) -> None:
    inputs = payload.get("inputs") if isinstance(payload, dict) else None
    for spec in inputs if isinstance(inputs, list) else []:
        for kind, key in (("text", "file"), ("files", "dir")):
            sub = spec.get(kind) if isinstance(spec, dict) else None
            if isinstance(sub, dict) and isinstance(sub.get(key), str) and not Path(sub[key]).is_absolute():
                sub[key] = str(base / sub[key])
        example = spec.get("example") if isinstance(spec, dict) else None
        values = example.get("values") if isinstance(example, dict) else None
        for value in values if isinstance(values, list) else []:  # {file: cat.jpg}: an example file
            if is_file_ref(value) and not Path(value["file"]).is_absolute():
                value["file"] = str(base / value["file"])


def is_file_ref(value: Any) -> bool:
    """`{file: PATH}`: a file sent as an upload (an `example` value, a trace line's input)."""
    return isinstance(value, dict) and set(value) == {"file"} and isinstance(value["file"], str)
