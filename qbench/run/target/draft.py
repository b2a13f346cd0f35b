"""`qbench init`: a scenario drafted from the app's own API (`read_target` -> `draft_for` -> `render`;
`app_scenario` for a run without a file). Design: docs/design/records-and-results.md."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import yaml

from qbench.errors import ScenarioError, TargetError
from qbench.run.protocols.base import make_http_session
from qbench.run.protocols.gradio_api import AppEndpoint, Suggestion, app_endpoints, describe, suggest
from qbench.run.protocols.gradio_wire import parse_version
from qbench.run.protocols.login import Authenticator
from qbench.run.scenario.credentials import Auth, refusal_hint, resolve
from qbench.run.scenario.schema import (
    Load,
    Scenario,
    apply_overrides,
    file_slug,
    parse_scenario,
    resolve_paths,
)
from qbench.run.target.draft_yaml import Draft, DraftInput, render, render_mix
from qbench.run.target.frameworks import (
    Framework,
    bentoml,
    bentoml_spec,
    litserve,
    management_url,
    rayserve,
    request_keys,
    torchserve,
)

PROTOCOLS = ("auto", "gradio", "openai", "http", "mcp")
STREAM_S = 10.0  # how long a drafted .stream() event streams (within the app's time limit)


@dataclass(frozen=True)
class GradioTarget:
    config: dict[str, Any]
    info: dict[str, Any]  # /info ({} when the app does not serve it)
    also_openai: bool = False  # the server answers GET /v1/models too (the reference server does)

    @property
    def version(self) -> str:
        return str(self.config.get("version") or "")


@dataclass(frozen=True)
class OpenAITarget:
    models: list[str]  # the ids GET /v1/models lists


@dataclass(frozen=True)
class HttpTarget:
    post_paths: list[str]  # POST routes of its /openapi.json (BentoML: its /schema.json's APIs; [] none)
    spec: dict[str, Any] | None = None  # its /openapi.json, or BentoML's APIs as one (None without either)
    framework: Framework | None = None  # the framework its own endpoints name (qbench.run.target.frameworks)
    request_keys: tuple[str, ...] = ()  # the body keys its app's code reads (`init --app`), when known


@dataclass(frozen=True)
class McpTarget:
    path: str  # the MCP URL's path (Gradio: /gradio_api/mcp/)
    server: dict[str, Any]  # its serverInfo
    tools: list[dict[str, Any]]  # tools/list: name, description, inputSchema
    base: str = ""  # the scenario's target: the MCP URL less `path`


Target = GradioTarget | OpenAITarget | HttpTarget | McpTarget


@dataclass(frozen=True)
class InitResult:
    text: str  # the scenario YAML, comments included
    draft: Draft


# ---------------------------------------------------------------- reading the target


def read_target(url: str, auth: Auth | None = None, protocol: str = "auto") -> Target:
    """What the server at `url` publishes about its API (logs in first when `auth` has a login)."""
    from qbench.run.load.executor import in_loop

    if protocol not in PROTOCOLS:
        raise ScenarioError(f"--protocol: value {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    return in_loop(_read(url.rstrip("/"), auth or Auth(), protocol))


async def _read(base: str, auth: Auth, protocol: str) -> Target:
    async with Authenticator(resolve(auth), base) as login:
        await login.start(0)
        async with make_http_session(Load.model_validate({"burst": 1}), login.middlewares) as http:
            if protocol == "mcp":
                return await _read_mcp(http, base)
            if protocol in ("auto", "gradio"):
                config = await _get(http, base + "/config", auth)
                if isinstance(config, dict) and "dependencies" in config:
                    prefix = str(config.get("api_prefix") or "")
                    info = await _get(http, base + prefix + "/info", auth)
                    also = protocol == "auto" and await _serves_models(http, base, auth)
                    return GradioTarget(config, info if isinstance(info, dict) else {}, also)
                if protocol == "gradio":
                    raise TargetError(f"{base}/config: no Gradio app there (no JSON with dependencies)")
            if protocol in ("auto", "openai"):
                models = await _get(http, base + "/v1/models", auth)
                if isinstance(models, dict) and isinstance(models.get("data"), list):
                    return OpenAITarget([str(m.get("id")) for m in models["data"] if isinstance(m, dict)])
                if protocol == "openai":
                    raise TargetError(f"{base}/v1/models: no OpenAI-compatible model list there")
            spec = await _get(http, base + "/openapi.json", auth)
            paths = spec.get("paths") if isinstance(spec, dict) else None
            framework = litserve(await _get(http, base + "/info", auth)) if "/info" in (paths or {}) else None
            if not isinstance(paths, dict):  # BentoML serves its own description instead (/schema.json)
                schema = await _get(http, base + "/schema.json", auth)
                framework = bentoml(schema)
                spec = bentoml_spec(schema) if framework is not None else spec
                paths = spec.get("paths") if isinstance(spec, dict) else None
            posts = [p for p, ops in (paths or {}).items() if isinstance(ops, dict) and "post" in ops]
            if framework is None:  # Ray Serve: its proxy's route table (the app's own /openapi.json is
                routes = await _get(http, base + "/-/routes", auth)  # there only behind FastAPI)
                framework = rayserve(routes)
                posts = posts or (sorted(routes) if framework is not None else posts)
            if framework is None and not posts:  # TorchServe: its own description, its models elsewhere
                framework, models = await _read_torchserve(http, base, auth)
                posts = [f"/predictions/{name}" for name in models] or (
                    ["/predictions/MODEL_NAME"] if framework is not None else [])
            return HttpTarget(posts, spec if isinstance(spec, dict) else None, framework)


async def _read_torchserve(http: aiohttp.ClientSession, base: str, auth: Auth
                           ) -> tuple[Framework | None, list[str]]:
    """TorchServe: its own description, and its models' names from its management API (the next port)."""
    described = await _get(http, base + "/api-description", auth)
    if torchserve(described) is None:
        return None, []
    management = management_url(base)
    models: list[dict[str, Any]] = []
    with contextlib.suppress(TargetError):  # no management API there: the models stay unknown
        listed = await _get(http, management + "/models", auth)
        for entry in (listed.get("models") or []) if isinstance(listed, dict) else []:
            found = await _get(http, f"{management}/models/{entry.get('modelName')}", auth)
            models += [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
    return torchserve(described, models, management), [str(m.get("modelName")) for m in models]


def mcp_candidates(url: str) -> list[tuple[str, str]]:
    """Where an MCP server may answer for `url`, in the order to try, as (target, path)."""
    parts = urlsplit(url.rstrip("/"))
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    from qbench.run.protocols.mcp import DEFAULT_PATH

    found = [(origin, path)] if path else []
    found.append((origin + path, DEFAULT_PATH))
    if not path:
        found.append((origin, "/mcp"))
    return found


async def _read_mcp(http: aiohttp.ClientSession, url: str) -> McpTarget:
    """The first of `mcp_candidates(url)` that answers as an MCP server; else TargetError naming each."""
    from qbench.run.protocols.mcp import ACCEPT, McpSession, McpSessions, list_tools

    problems = []
    for base, path in mcp_candidates(url):
        headers = {"Content-Type": "application/json", "Accept": ACCEPT}
        try:
            server, tools = await list_tools(http, base + path, headers)
        except TargetError as exc:
            problems.append(str(exc))
            continue
        sessions = McpSessions(http, base + path, headers, per_slot=False)
        sessions.every.append(McpSession(headers, opened=True))
        with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError):
            await sessions.close()
        return McpTarget(path, server, tools, base)
    if len(problems) == 1:
        raise TargetError(problems[0])
    raise TargetError("no MCP server answers there; tried:\n  " + "\n  ".join(problems))


async def _serves_models(http: aiohttp.ClientSession, base: str, auth: Auth) -> bool:
    """Whether GET /v1/models lists models (a refusal there is no error: it is only a hint)."""
    try:
        models = await _get(http, base + "/v1/models", auth)
    except TargetError:
        return False
    return isinstance(models, dict) and isinstance(models.get("data"), list)


async def _get(http: aiohttp.ClientSession, url: str, auth: Auth) -> Any:
    """The JSON at `url`; None when it is not there or not JSON. A refusal raises (log in first)."""
    try:
        async with http.get(url, allow_redirects=True) as resp:
            if resp.status in (401, 403):
                hint = (refusal_hint(resp.status, auth) if auth.is_set else
                        "the app asks for a login: pass --auth USER:PASSWORD (Gradio's auth=), "
                        "--bearer-env NAME or --header 'Name: value'")
                raise TargetError(f"{url}: HTTP {resp.status}: {hint}")
            if resp.status != 200:
                return None
            return orjson.loads(await resp.read())
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        raise TargetError(f"{url}: cannot connect ({exc.__class__.__name__}: {exc}); is the server "
                          "running, and is this its base URL?") from None
    except orjson.JSONDecodeError:
        return None


# ---------------------------------------------------------------- drafting


def draft_for(target: Target, api: str | None, *, strict: bool = False) -> Draft:
    """The draft for `api` (default: the only public endpoint, else the first, the others listed; `strict`:
    several without `api` is an error); for an OpenAI server `api` is the model (default: its first)."""
    if isinstance(target, GradioTarget):
        return _gradio_draft(target, api, strict)
    if isinstance(target, OpenAITarget):
        return _openai_draft(target, api)
    if isinstance(target, McpTarget):
        return _mcp_draft(target, api)
    return _http_draft(target)


def _gradio_draft(target: GradioTarget, api: str | None, strict: bool) -> Draft:
    version = parse_version(target.version)
    endpoints = app_endpoints(target.config, target.info)
    public = [e for e in endpoints if e.public]
    endpoint = _choose(endpoints, public, api, strict)
    inputs = [DraftInput(describe(i), suggest(i, version)) for i in endpoint.inputs]
    about = [f"Gradio {target.version or '(version not given)'}, endpoint /{endpoint.api_name} "
             f"({len(inputs)} input(s){', streams its output' if endpoint.generator else ''})"]
    others = [e for e in public if e is not endpoint]
    draft = Draft(endpoint.api_name, "gradio", {"api_name": endpoint.api_name}, inputs, about,
                  {"p95_latency_s": 10.0, "error_rate": 0.01})
    if others:
        draft.endpoint_notes = ["Other public endpoints (qbench init URL --api NAME):",
                                *(f"  {_signature(e)}" for e in others)]
    if others and api is None:
        draft.notes.append(f"{len(public)} public endpoints; wrote /{endpoint.api_name}. The others: "
                           + "; ".join(_signature(e) for e in others) + " (choose one with --api NAME)")
    if target.also_openai:
        draft.notes.append("this server also answers /v1/models (OpenAI-compatible): "
                           "`qbench init URL --protocol openai` writes that scenario")
    if endpoint.stream_every is not None:
        _stream_draft(draft, endpoint.stream_every, endpoint.time_limit)
    draft.fill_in = any(i.suggestion.fill_in for i in inputs)
    if draft.fill_in:
        draft.notes.append("edit the inputs marked FILL IN before running (qbench cannot generate them)")
    return draft


def _stream_draft(draft: Draft, every: float, time_limit: float | None) -> None:
    """A .stream() event: `chunks` for STREAM_S seconds (or its limit), `stream_every` apart; its SLOs."""
    chunks = max(2, round(min(STREAM_S, time_limit or STREAM_S) / every))
    draft.endpoint.update(chunks=chunks, stream_every=every)
    for item in draft.inputs:
        if "audio" in item.suggestion.spec:
            spec = {"audio": {**item.suggestion.spec["audio"], "seconds": every}}
            item.suggestion = replace(item.suggestion, spec=spec)
    limit = f", time_limit {time_limit:g} s" if time_limit else ""
    draft.about.append(f"A .stream() event: each request is one stream of {chunks} input chunks, one every "
                       f"{every:g} s (the app's stream_every{limit}).")
    draft.about.append("Users are concurrent streams; `qbench capacity` finds how many it holds.")
    draft.slo = {"p95_ttfo_s": 2.0, "p95_chunk_latency_s": round(2 * every, 3), "min_chunks_answered": 0.9,
                 "error_rate": 0.01}


def mix_drafts(target: Target, api: str | None) -> list[Draft]:
    """One draft per public endpoint of a Gradio app, for a `mix:` of them all."""
    if api is not None:
        raise ScenarioError("--mix writes every public endpoint: leave out --api (or --api without --mix)")
    if not isinstance(target, GradioTarget):
        raise TargetError("--mix reads a Gradio app's endpoints; this server is not a Gradio app "
                          "(write a mix: by hand, see docs/traffic-mixes-and-journeys.md)")
    public = [e for e in app_endpoints(target.config, target.info) if e.public]
    if not public:
        raise TargetError("the app has no public endpoint (api_name) to mix")
    drafts = [_gradio_draft(target, e.api_name, strict=False) for e in public]
    for draft in drafts:
        draft.endpoint_notes, draft.notes = [], [n for n in draft.notes if "OpenAI" not in n]
    if len(public) == 1:
        drafts[0].notes.append(f"the app has one public endpoint (/{public[0].api_name}): a mix of one")
    return drafts


def _choose(endpoints: list[AppEndpoint], public: list[AppEndpoint], api: str | None,
            strict: bool) -> AppEndpoint:
    listing = "\n".join(f"  {_signature(e)}" for e in public) or "  (none)"
    if api is not None:
        name = api.lstrip("/")
        found = next((e for e in endpoints if e.api_name == name), None)
        if found is None:
            raise TargetError(f"the app has no endpoint '{name}'; its public endpoints:\n{listing}")
        return found
    if not public:
        raise TargetError("the app has no public endpoint (api_name); name one with --api NAME")
    if len(public) > 1 and strict:
        raise TargetError(f"the app has {len(public)} public endpoints; choose one with --api NAME:\n"
                          f"{listing}")
    return public[0]


def _signature(endpoint: AppEndpoint) -> str:
    return f"/{endpoint.api_name}({', '.join(describe(i) for i in endpoint.inputs)})"


def _openai_draft(target: OpenAITarget, model: str | None) -> Draft:
    if not target.models:
        raise TargetError("GET /v1/models lists no model; set endpoint.model by hand")
    chosen = (model or target.models[0]).lstrip("/")
    if chosen not in target.models:
        raise TargetError(f"the server serves no model '{chosen}'; it lists: {', '.join(target.models)}")
    inputs = [DraftInput("the user's message", Suggestion({"text": {"words": [16, 64]}},
                                                          "a prompt of 16 to 64 words"))]
    draft = Draft(file_slug(f"openai-{chosen}"), "openai",
                  {"path": "/v1/chat/completions", "model": chosen, "max_tokens": 128, "stream": True},
                  inputs, [f"an OpenAI-compatible server, model {chosen}"],
                  {"p95_ttft_s": 2.0, "p95_latency_s": 30.0, "error_rate": 0.01})
    draft.endpoint_notes = ["stream: true times every token (TTFT, ITL); stream: false times only the "
                            "whole reply (drop the slo's token keys then)"]
    if len(target.models) > 1:
        draft.endpoint_notes.append(f"Models it serves: {', '.join(target.models)}")
    return draft


def _mcp_draft(target: McpTarget, tool: str | None) -> Draft:
    """One tool of an MCP server: its arguments (required ones, then the rest) from its inputSchema."""
    from qbench.run.protocols.gradio_schema import api_suggestion

    names = [str(t.get("name")) for t in target.tools]
    if not names:
        raise TargetError(f"{target.path}: the MCP server lists no tool")
    chosen = (tool or names[0]).lstrip("/")
    if chosen not in names:
        raise TargetError(f"the MCP server has no tool '{chosen}'; it lists: {', '.join(names)}")
    schema = next(t for t in target.tools if t.get("name") == chosen).get("inputSchema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [str(r) for r in schema.get("required") or [] if r in properties]
    order = required + [name for name in properties if name not in required]
    inputs = []
    for name in order:
        info = {"parameter_name": name, "type": properties[name]}
        made = api_suggestion(info) or ({"value": properties[name].get("default", "")}, "a value: check it")
        about = str(properties[name].get("description") or "")[:60]
        what = f"argument '{name}'" + (f" ({about})" if about else "")
        what += "" if name in required else ", optional"
        inputs.append(DraftInput(what, Suggestion(*made)))
    server = target.server.get("name") or "an MCP server"
    endpoint = {"path": target.path, "tool": chosen, "arguments": order}
    about_tool = f"{server} over MCP (Streamable HTTP), tool {chosen} ({len(order)} argument(s))"
    draft = Draft(file_slug(f"mcp-{chosen}"), "mcp", endpoint, inputs, [about_tool],
                  {"p95_latency_s": 10.0, "error_rate": 0.01})
    if len(names) > 1:
        draft.endpoint_notes = [f"Tools it serves: {', '.join(names)} (`--api NAME` picks one)"]
        draft.notes.append(f"the server has {len(names)} tools; wrote {chosen} (--api NAME for another)")
    return draft


def _http_draft(target: HttpTarget) -> Draft:
    """A plain HTTP server's draft: its POST route, one payload input per field of its OpenAPI body."""
    from qbench.run.protocols.gradio_schema import api_suggestion
    from qbench.run.target.openapi_body import body_fields, request_schema

    posts = target.post_paths
    declared = [p for p in posts if request_schema(target.spec, p) is not None]
    path = (posts[0] if len(posts) == 1 else "/predict" if "/predict" in posts or not posts
            else (declared or posts)[0])
    fields = body_fields(request_schema(target.spec, path) or {})
    if not fields:
        return _http_template(target, path)
    inputs, body = [], {}
    batched = target.framework is not None and path in target.framework.batchable
    for k, (name, schema, required) in enumerate(fields):
        made = api_suggestion({"parameter_name": name, "type": schema}) or (
            {"value": schema.get("default", "")}, "a value: check it")
        if batched:
            made = _one_row(made)
        about = str(schema.get("description") or schema.get("title") or "")[:60]
        inputs.append(DraftInput(f"field '{name}'" + (f" ({about})" if about else "")
                                 + ("" if required else ", optional"), Suggestion(*made)))
        body[name] = f"${k}"
    named = ", ".join(f"{name} ({schema.get('type') or 'any'})" for name, schema, _ in fields)
    where = "/schema.json" if target.framework and target.framework.name == "BentoML" else "/openapi.json"
    about = f"{_server(target)}; its {where} declares POST {path}'s JSON body: {named}"
    draft = Draft(file_slug(f"http{path}"), "http", {"method": "POST", "path": path, "body": body}, inputs,
                  [about], {"p95_latency_s": 10.0, "error_rate": 0.01})
    draft.endpoint_notes = ['"$0" is replaced by the first payload input, "$1" by the second...']
    if len(posts) > 1:
        draft.endpoint_notes.append(f"POST routes it serves: {', '.join(posts)}")
    if batched:
        draft.notes.append(f"{path} is batchable: {target.framework.name if target.framework else 'it'} "
                           "joins the lists of the requests it batches, so each request sends one row (a "
                           "list of one); a request of n rows counts n towards its max_batch_size")
    return draft


def _one_row(made: tuple[dict[str, Any], str]) -> tuple[dict[str, Any], str]:
    """A list input as one row: a batchable API's request carries one item of the batch."""
    generator, about = made
    rows = generator.get("json")
    if isinstance(rows, list) and len(rows) > 1:
        return {"json": rows[:1]}, "a list of 1 (one row of the batch)"
    return made


def _server(target: HttpTarget) -> str:
    """What the target is, in words: the framework its endpoints name, else a plain HTTP server."""
    framework = target.framework
    return f"a {framework.name} server ({framework.facts})" if framework else "a plain HTTP server"


def _http_template(target: HttpTarget, path: str) -> Draft:
    """No body declared for `path`: the keys its app's code reads, else a template and what to fill in."""
    posts = target.post_paths
    framework = target.framework
    routed = framework is not None and framework.name in ("Ray Serve", "TorchServe") and target.spec is None
    # (their POST routes from Ray Serve's /-/routes, TorchServe's management API: no description)
    known = (f"its /openapi.json lists POST {', '.join(posts)} but declares no JSON body for {path}"
             if posts and not routed else "it publishes no API description")
    slo = {"p95_latency_s": 10.0, "error_rate": 0.01}
    if target.request_keys:
        keys = target.request_keys
        reader = _reader(framework)
        inputs = [DraftInput(f"field '{key}' (read by the app's {reader})",
                             Suggestion({"text": {"words": [5, 20]}}, "text: check its type"))
                  for key in keys]
        draft = Draft(file_slug(f"http{path}"), "http",
                      {"method": "POST", "path": path, "body": {key: f"${k}" for k, key in enumerate(keys)}},
                      inputs, [f"{_server(target)}; {known}; its app's code reads {', '.join(keys)}"], slo)
        draft.endpoint_notes = [f"The body's keys are those its {reader} reads (qbench init --app);",
                                '"$0" is replaced by the first payload input, "$1" by the second...']
        draft.notes.append(f"{known}: the body's keys ({', '.join(keys)}) come from the app's code; their "
                           "values are text: change a generator where it reads another type")
        return draft
    body = dict(framework.convention) if framework and framework.convention else {"inputs": "$0"}
    inputs = [DraftInput("$0 in the body", Suggestion({"text": {"words": [5, 20]}}, "a text input"))]
    draft = Draft("http", "http", {"method": "POST", "path": path, "body": body}, inputs,
                  [f"{_server(target)}; {known}"], slo, fill_in=True)
    reads = f"{framework.name}'s {_reader(framework)}" if framework else "LitServe's decode_request"
    draft.endpoint_notes = ["FILL IN: the path your server answers and its JSON body (the keys your handler",
                            f'reads, e.g. {reads}); "$0" is replaced by the first payload',
                            'input, "$1" by the second...']
    if framework and framework.schema_hint:
        draft.notes.append(f"{framework.name}: {framework.schema_hint}; the body drafted is its docs' "
                           f"{body}: fill in endpoint.body and payload.inputs, then run it")
    else:
        draft.notes.append(f"no Gradio app and no OpenAI-compatible server there ({known}): fill in "
                           "endpoint.path, endpoint.body and payload.inputs, then run it")
    if framework and path in framework.streamed:
        draft.notes.append(f"{path} streams its answer (stream=True): the run times the whole stream")
    return draft


def _reader(framework: Framework | None) -> str:
    """What reads the request body in the app's code (qbench.run.target.frameworks.request_keys)."""
    if framework is not None and framework.name == "TorchServe":
        return "handler, from each request's body"
    return "__call__'s request.json()" if framework is not None and framework.name == "Ray Serve" \
        else "decode_request"


# ---------------------------------------------------------------- the whole step


def init_scenario(url: str, api: str | None = None, *, auth: dict[str, Any] | None = None,
                  protocol: str = "auto", strict: bool = False, command: str | None = None,
                  scenario_path: Path | None = None, mix: bool = False, app: Path | None = None
                  ) -> InitResult:
    """Read the app at `url` and write its scenario (checked to validate unless it needs filling in).
    `auth`: credential overrides (a password is written as ${APP_PASSWORD}); `scenario_path`: where the text
    goes, example files beside it; `mix`: every public endpoint; `app`: the source read for request keys."""
    credentials = auth_section(auth or {})
    target = read_target(url, credentials, protocol)
    if app is not None and isinstance(target, HttpTarget):
        try:
            target = replace(target, request_keys=tuple(request_keys(app)))
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            raise ScenarioError(f"--app {app}: cannot read it ({exc.__class__.__name__}: {exc})") from None
    drafts = mix_drafts(target, api) if mix else [draft_for(target, api, strict=strict)]
    if isinstance(target, GradioTarget):
        api_root = url.rstrip("/") + str(target.config.get("api_prefix") or "")
        for draft in drafts:
            prefix = f"{file_slug(draft.name)}-" if mix else ""
            _example_files(draft, url.rstrip("/"), api_root, credentials, scenario_path, prefix)
    command = command or f"qbench init {url}"
    if mix:
        text = render_mix(drafts, url.rstrip("/"), credentials, command)
        draft = replace(drafts[0], about=[f"a mix of {len(drafts)} endpoints: "
                                          + ", ".join(f"/{d.name}" for d in drafts)],
                        notes=[n for d in drafts for n in d.notes], fill_in=any(d.fill_in for d in drafts))
    else:
        (draft,) = drafts
        base = target.base if isinstance(target, McpTarget) and target.base else url.rstrip("/")
        text = render(draft, base, credentials, command)
    if not draft.fill_in:  # a writer's mistake fails here, not in the user's first run
        raw = yaml.safe_load(text)
        resolve_paths(raw, scenario_path.parent if scenario_path else Path.cwd())
        parse_scenario(raw, source=f"the scenario written for {url}", overrides=auth or {})
    return InitResult(text, draft)


def app_scenario(url: str, api: str | None, overrides: dict[str, Any], *, protocol: str = "auto",
                 command: str | None = None,
                 scenario_path: Path | None = None) -> tuple[InitResult, Scenario]:
    """The scenario of `url`'s endpoint `api`, parsed with `overrides`, for a run without a scenario file;
    several public endpoints without `api` is an error listing them."""
    auth = {k: v for k, v in overrides.items() if k == "auth" or k.startswith("auth.")}
    result = init_scenario(url, api, auth=auth, protocol=protocol, strict=True, command=command,
                           scenario_path=scenario_path)
    if result.draft.fill_in:
        raise ScenarioError("; ".join(result.draft.notes) + ": write the file with `qbench init URL -o "
                            "scenario.yaml`, edit it, then `qbench run scenario.yaml`")
    raw = yaml.safe_load(result.text)
    resolve_paths(raw, scenario_path.parent if scenario_path else Path.cwd())
    return result, parse_scenario(raw, source=f"the scenario of {url}", overrides=overrides)


# ---------------------------------------------------------------- the app's example files


def _example_files(draft: Draft, base: str, api_root: str, auth: Auth, scenario_path: Path | None,
                   prefix: str = "") -> None:
    """Download the draft's example files beside `scenario_path` (`<stem>-examples/`), else use generators."""
    from qbench.run.load.executor import in_loop

    folder = scenario_path.parent / f"{scenario_path.stem}-examples" if scenario_path else None
    for n, item in enumerate(draft.inputs):
        made = item.suggestion
        if not made.remote_files:
            continue
        refs = [v["file"] for v in made.spec["example"]["values"]]
        urls = [ref if ref.startswith("http") else f"{api_root}/{ref}" for ref in refs]
        try:
            if folder is None:
                raise TargetError("with -o FILE, qbench init saves them beside it and sends them")
            blobs = in_loop(_download(urls, auth, base))
        except TargetError as exc:
            item.suggestion = _generated_instead(made, str(exc))
            continue
        values = []
        for k, (url, data) in enumerate(zip(urls, blobs, strict=True)):
            name = f"{prefix}{n + 1}-{k + 1}-{Path(url.split('?')[0]).name}"[:120]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            values.append({"file": f"{folder.name}/{name}"})
        item.suggestion = replace(made, spec={"example": {"values": values}}, remote_files=False)
        draft.notes.append(f"{item.what}: the app's example files are saved in {folder}")
    draft.fill_in = any(i.suggestion.fill_in for i in draft.inputs)


def _generated_instead(made: Suggestion, why: str) -> Suggestion:
    """The generator an example-files input falls back to, saying why."""
    spec = made.alternative or {}
    note = made.note.replace("; the app's own example files", "")
    return Suggestion(spec, f"{note} (the app's examples are files, not sent: {why})",
                      fill_in="files" in spec)


async def _download(urls: list[str], auth: Auth, base: str) -> list[bytes]:
    async with Authenticator(resolve(auth), base) as login:
        await login.start(0)
        async with make_http_session(Load.model_validate({"burst": 1}), login.middlewares) as http:
            blobs = []
            for url in urls:
                try:
                    async with http.get(url) as resp:
                        if resp.status != 200:
                            raise TargetError(f"{url}: HTTP {resp.status}: cannot download the app's example")
                        blobs.append(await resp.read())
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                    raise TargetError(f"{url}: cannot download the app's example ({exc})") from None
            return blobs


def auth_section(overrides: dict[str, Any]) -> Auth:
    """The `auth:` section the dotted credential overrides describe."""
    data = apply_overrides({}, overrides, source="--auth/--header/--bearer-env")
    try:
        return Auth.model_validate(data.get("auth") or {})
    except ValueError as exc:
        raise ScenarioError(f"credentials: {exc}") from None


def write_app_scenario(url: str, api: str | None, auth: dict[str, Any], folder: Path) -> Path:
    """For `qbench capacity` and `sweep` without a scenario file: the app's scenario written into `folder`
    as `scenario-<api>-<stamp>.yaml` (stamp in UTC, example files beside it); returns the path."""
    from qbench.run.results.files import stamp

    path = folder / f"scenario-{file_slug(api.lstrip('/') if api else 'app')}-{stamp()}.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    result = init_scenario(url, api, auth=auth, strict=True, scenario_path=path)
    if result.draft.fill_in:
        raise ScenarioError("; ".join(result.draft.notes) + ": write it with `qbench init URL -o FILE` first")
    path.write_text(result.text.replace("THIS_FILE", str(path)), encoding="utf-8")
    return path
