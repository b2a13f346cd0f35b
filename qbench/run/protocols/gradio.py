"""Gradio apps of every release since 3.x: discovery from GET /config (family, api_prefix, version, the
endpoint), inputs and uploads in the release's format, output downloads; the family's QueueWire does the
rest."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import numpy as np
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import Clock, fail, fail_http, http_problem, status_kind, upload_tag
from qbench.run.protocols.gradio_api import NOT_API, app_endpoints, expected_inputs
from qbench.run.protocols.gradio_values import event_data, event_files, prop_inputs, wrap_file
from qbench.run.protocols.gradio_wire import FAMILIES, OUTPUT_FILES, GradioApp, QueueWire, parse_version
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.credentials import refusal_hint
from qbench.run.scenario.payloads import MIME, FileValue, PayloadGenerator, file_bytes
from qbench.run.scenario.schema import Scenario

if TYPE_CHECKING:
    from qbench.run.protocols.gradio_stream import ChunkStreamWire


class GradioProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock,
                 payloads: PayloadGenerator | None = None) -> None:
        self.scenario = scenario
        self.payloads = payloads  # a streamed input's later chunks (None: each repeats the first)
        self.base = target.rstrip("/")
        self.http = http
        self.clock = clock
        self.endpoint_label = scenario.endpoint.api_name or f"fn_index={scenario.endpoint.fn_index}"
        self.app: GradioApp | None = None
        self.wire: QueueWire | None = None
        self.chunk_wire: ChunkStreamWire | None = None  # a .stream() event's wire (gradio_stream)
        self.input_types: list[str | None] = []  # per input: component type (None: not an API input)
        self.prop_inputs: dict[int, dict[str, Any]] = {}  # inputs sent with their component's props (6.x)
        self.front: dict[str, Any] | None = None  # the proxy or balancer that answered /config (front_of)

    # ------------------------------------------------------------ discovery

    async def discover(self) -> dict[str, Any]:
        config = await self._get_json(self.base + "/config", front=True)
        if not isinstance(config, dict):
            raise TargetError(f"{self.base}/config: not a JSON object; is this a Gradio app?")
        if self.front is not None:
            self.front["upstreams"] = await self._upstreams(config)
        detected = str(config.get("protocol") or "ws")
        family = self.scenario.gradio_protocol or detected
        version = str(config.get("version", ""))
        if family not in FAMILIES:
            raise TargetError(
                f"{self.base}: Gradio {version or '(version unknown)'} speaks protocol '{family}', which "
                f"qbench does not know (it speaks {', '.join(FAMILIES)}); set gradio_protocol to force one"
            )
        prefix = str(config.get("api_prefix") or "")
        index, dep = self._find_dependency(config)
        self.app = GradioApp(
            base=self.base,
            api=self.base + prefix,
            family=family,
            version=parse_version(version),
            fn_index=int(dep.get("id", index)),
            event_data=event_data(dep, config),
        )
        self.input_types = self._input_types(config, dep)
        self.prop_inputs = prop_inputs(config, dep)
        info = await self._get_json(self.app.api + "/info", required=False)
        wanted, given = sum(t is not None for t in self.input_types), len(self.scenario.payload.inputs)
        if wanted != given and not (given == 0 and self.scenario.load.trace is not None):  # inline inputs
            raise TargetError(self._count_problem(config, info, dep, wanted, given))
        named = info.get("named_endpoints", {}) if isinstance(info, dict) else {}
        if family != "ws":
            await self._hold_event_files()
        from qbench.run.protocols.gradio_families import make_wire

        pool = self.scenario.load.sessions
        pool = pool if isinstance(pool, int) else 0
        self.wire = make_wire(self.app, self.http, self.clock, pool)
        stream = self._stream(dep, pool)
        return {
            "config": config,
            "endpoint_info": named.get("/" + str(dep.get("api_name"))),
            "fn_index": self.app.fn_index,
            "gradio": {
                "version": version or None,
                "protocol": family,
                "detected_protocol": detected,
                "api_prefix": prefix,
            },
            **({"stream": stream} if stream else {}),
            **({"front": self.front} if self.front else {}),
        }

    def _stream(self, dep: dict[str, Any], pool: int) -> dict[str, Any] | None:
        """A .stream() event's chunk wire and its run.json snapshot; None for any other event."""
        assert self.app is not None
        ep = self.scenario.endpoint
        if dep.get("connection") != "stream":
            if ep.chunks is not None:
                raise TargetError(f"{self.base}: endpoint '{self.endpoint_label}' is not a .stream() event "
                                  "(it takes no chunks): drop endpoint.chunks and endpoint.stream_every")
            return None
        if self.app.family != "sse_v3":
            raise TargetError(f"{self.base}: streamed inputs need Gradio 5.0 or later (protocol sse_v3), "
                              f"not {self.app.family}")
        from qbench.run.protocols.gradio_families import make_chunk_wire

        every = ep.stream_every or dep.get("stream_every")
        self.chunk_wire = make_chunk_wire(self.app, self.http, self.clock, pool, chunks=ep.chunks or 1,
                                          every_s=float(every) if every else None)
        self.chunk_wire.download = self.download if self.scenario.fetch_outputs else None
        length = (self.chunk_wire.chunks - 1) * self.chunk_wire.every_s
        if length >= self.scenario.load.timeout:
            raise TargetError(f"{self.base}: a stream of {self.chunk_wire.chunks} chunks "
                              f"{self.chunk_wire.every_s:g} s apart lasts {length:g} s, past load.timeout "
                              f"({self.scenario.load.timeout:g} s): raise the timeout or send fewer chunks")
        return {"chunks": self.chunk_wire.chunks, "stream_every_s": self.chunk_wire.every_s,
                "time_limit_s": dep.get("time_limit")}

    def _find_dependency(self, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ep = self.scenario.endpoint
        deps = [d for d in config.get("dependencies", []) if isinstance(d, dict)]
        for index, dep in enumerate(deps):
            if ep.fn_index is not None and dep.get("id", index) == ep.fn_index:
                return index, dep
            if ep.api_name is not None and dep.get("api_name") == ep.api_name:
                return index, dep
        names = sorted(str(d["api_name"]) for d in deps if d.get("api_name"))
        raise TargetError(
            f"{self.base}: no endpoint '{self.endpoint_label}'; the server has: {', '.join(names)}"
        )

    def _count_problem(self, config: dict[str, Any], info: Any, dep: dict[str, Any], wanted: int,
                       given: int) -> str:
        """The input-count error: each expected input, what it accepts and the YAML line that fits."""
        assert self.app is not None
        name = dep.get("api_name")
        endpoint = next((e for e in app_endpoints(config, info if isinstance(info, dict) else None)
                         if e.api_name == name), None)
        listing = f":\n{expected_inputs(endpoint, self.app.version)}" if endpoint is not None else ""
        return (
            f"{self.base}: endpoint '{self.endpoint_label}' takes {wanted} input(s), the scenario's "
            f"payload.inputs has {given}{listing}"
            + ("\n(lines that fit, for payload.inputs; `qbench init URL --api NAME` writes a whole scenario)"
               if listing else "")
        )

    @staticmethod
    def _input_types(config: dict[str, Any], dep: dict[str, Any]) -> list[str | None]:
        components = {c.get("id"): c for c in config.get("components", []) if isinstance(c, dict)}
        types: list[str | None] = []
        for cid in dep.get("inputs", []):
            comp = components.get(cid, {})
            is_api = not comp.get("skip_api") and comp.get("type") not in NOT_API
            types.append(str(comp.get("type", "")) if is_api else None)
        return types

    async def _hold_event_files(self) -> None:
        """Upload a file for each FileData in the event data and name it there, once a run."""
        assert self.app is not None
        for file in event_files(self.app.event_data):
            name = str(file.get("orig_name") or "file.txt")
            suffix = "." + name.rsplit(".", 1)[-1].lower()
            form = aiohttp.FormData()
            form.add_field("files", file_bytes(suffix, 1024, np.random.default_rng(0)), filename=name,
                           content_type=MIME.get(suffix.lstrip("."), "text/plain"))
            try:
                async with self.http.post(self.app.api + "/upload", data=form) as resp:
                    if resp.status == 200:
                        file["path"] = orjson.loads(await resp.read())[0]
                        if "url" in file:
                            file["url"] = f"{self.app.api}/file={file['path']}"
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, orjson.JSONDecodeError, IndexError):
                continue

    async def _upstreams(self, config: dict[str, Any]) -> list[str]:
        """The servers seen behind the front that answered /config (asked up to UPSTREAM_SAMPLES times)."""
        assert self.front is not None
        seen = {u for u in (self.front.get("upstream") or _app_id(config),) if u}
        url = self.base + "/config"
        for k in range(UPSTREAM_SAMPLES):
            if len(seen) > 1:
                break
            try:
                async with self.http.get(f"{url}?session_hash=qbench-upstream-{k}") as resp:
                    found = upstream_header(resp.headers)
                    if found is None and resp.status == 200:
                        found = _app_id(orjson.loads(await resp.read()))
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, orjson.JSONDecodeError):
                break
            if found:
                seen.add(found)
        return sorted(seen)

    async def _get_json(self, url: str, required: bool = True, front: bool = False) -> Any:
        try:
            async with self.http.get(url) as resp:
                if front:
                    self.front = front_of(resp.headers, self.base)
                if resp.status != 200:
                    if not required:
                        return {}
                    if resp.status in (401, 403):
                        raise TargetError(
                            f"{url}: HTTP {resp.status}: {refusal_hint(resp.status, self.scenario.auth)}"
                        )
                    raise TargetError(f"{url}: HTTP {resp.status}; is this a Gradio app?")
                return orjson.loads(await resp.read())
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if not required:
                return {}
            raise TargetError(f"{url}: cannot connect ({exc.__class__.__name__}: {exc})") from exc
        except orjson.JSONDecodeError as exc:
            if not required:
                return {}
            raise TargetError(f"{url}: not JSON; is this a Gradio app?") from exc

    # ------------------------------------------------------------ one request

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        assert self.wire is not None, "discover() first"
        record.sent_at_s = self.clock.now()
        record.session_id = (self.chunk_wire or self.wire).session_hash(record, slot)  # its uploads carry it
        try:
            data = await self._data(inputs, record)
        except (aiohttp.ClientError, OSError) as exc:
            fail(record, "connect", f"upload: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        if data is not None and self.chunk_wire is not None:
            await self.chunk_wire.stream(record, data, slot, lambda k: self._chunk(record, k, inputs))
        elif data is not None:
            await self.wire.send(record, data, slot)
        files = OUTPUT_FILES.pop(id(record), None)
        if files and record.ok and self.scenario.fetch_outputs:
            await self._fetch(record, files)

    async def _fetch(self, record: RequestRecord, files: list[str]) -> None:
        """Fetch the result's output files one after the other; the request ends when the last has arrived."""
        record.result_at_s, record.completed_at_s = record.completed_at_s, None  # the timeout still holds
        for ref in files:
            problem = await self.download(record, ref)
            if problem is not None:
                fail(record, *problem, self.clock.now())
                return
        record.completed_at_s = self.clock.now()

    async def download(self, record: RequestRecord, ref: str) -> tuple[str, str] | None:
        """GET one output file, its bytes counted on `record`; None, or (error kind, message)."""
        url = self._file_url(ref)
        url = in_session(url, record.session_id) if url.startswith(self.base + "/") else url  # not a CDN's
        try:
            async with self.http.get(url) as resp:
                if resp.status >= 400:
                    record.http_status = resp.status
                    return status_kind(resp.status), http_problem("GET", url, resp.status, await resp.read())
                async for chunk in resp.content.iter_any():
                    record.download_bytes += len(chunk)
                    record.bytes_received += len(chunk)
        except (aiohttp.ClientError, OSError) as exc:
            return "stream_broken", f"download {url}: {exc.__class__.__name__}: {exc}"
        record.downloads += 1
        return None

    def _file_url(self, ref: str) -> str:
        """An output file's URL: absolute as given, `/file=` under the API prefix, else under the root."""
        assert self.app is not None
        if ref.startswith(("http://", "https://")):
            return ref
        return (self.app.api if ref.startswith("/file=") else self.base) + ref

    async def _chunk(self, record: RequestRecord, k: int, first: list[Any]) -> list[Any] | None:
        """Chunk k (1, 2, ...) of a streamed input: payload variant request_id + k, uploaded."""
        payloads = self.payloads
        inputs = first if payloads is None or payloads.fixed is not None else payloads.inputs(
            record.request_id + k)
        try:
            return await self._data(inputs, record)
        except (aiohttp.ClientError, OSError) as exc:
            fail(record, "connect", f"upload: {exc.__class__.__name__}: {exc}", self.clock.now())
            return None

    async def _data(self, inputs: list[Any], record: RequestRecord) -> list[Any] | None:
        values = iter(inputs)
        data: list[Any] = []
        for index, kind in enumerate(self.input_types):
            value = next(values) if kind is not None else None
            if kind == "gallery" and isinstance(value, FileValue):
                value = [value]  # a gallery is a list of images
            if isinstance(value, FileValue):
                value = await self._file(value, kind, record)
                if value is None:
                    return None
            elif isinstance(value, list) and value and all(isinstance(v, FileValue) for v in value):
                value = [await self._file(v, kind, record) for v in value]  # file_count="multiple"
                if any(v is None for v in value):
                    return None
            if index in self.prop_inputs:  # the function takes the component (gr.Number) itself
                value = {**self.prop_inputs[index], "value": value}
            data.append(value)
        return data

    async def _file(self, file: FileValue, kind: str | None, record: RequestRecord) -> Any:
        assert self.app is not None
        if self.app.family == "ws":
            url = f"data:{file.mime};base64,{base64.b64encode(file.data).decode()}"
            record.bytes_sent += len(url)
            return url if kind == "image" else {"name": file.name, "data": url, "is_file": False}
        uploaded = await self._upload(file, record)
        return None if uploaded is None else wrap_file(kind, uploaded, file.mime, self.app.version)

    async def _upload(self, file: FileValue, record: RequestRecord) -> dict[str, Any] | None:
        assert self.app is not None
        url = self.app.api + "/upload"
        form = aiohttp.FormData()
        form.add_field("files", file.data, filename=file.name, content_type=file.mime)
        record.bytes_sent += len(file.data)
        tag = {"session_hash": upload_tag(record.request_id)}  # joins the server's upload trace to it
        async with self.http.post(in_session(url, record.session_id), data=form, headers=tag) as resp:
            raw = await resp.read()
            if resp.status != 200:
                fail_http(record, "POST", url, resp.status, raw, self.clock.now())
                return None
        path = orjson.loads(raw)[0]
        return {"path": path, "orig_name": file.name, "meta": {"_type": "gradio.FileData"}}

    def abandon(self, record: RequestRecord) -> None:
        """Timeout: the family's cancel (in the background)."""
        wire = self.chunk_wire or self.wire
        if wire is not None:
            wire.abandon(record)

    async def close(self) -> None:
        for wire in (self.wire, self.chunk_wire):
            if wire is not None:
                await wire.close()


def in_session(url: str, session_hash: str | None) -> str:
    """`url` with `session_hash=` in its query, so a balancer hashing on sessions keeps it on one replica."""
    if not session_hash or url.startswith("data:"):
        return url
    return f"{url}{'&' if '?' in url else '?'}session_hash={quote(session_hash, safe='')}"


#: Server headers of proxies and load balancers (lower case, the product before any "/version").
PROXIES = ("nginx", "openresty", "tengine", "envoy", "istio-envoy", "haproxy", "traefik", "caddy", "apache",
           "cloudflare", "awselb", "google frontend", "kong", "varnish", "squid", "litespeed", "h2o")


#: Response headers naming the server behind a proxy (lower case): qbench's nginx's first
UPSTREAM_HEADERS = ("x-qbench-upstream", "x-upstream", "x-upstream-addr", "x-upstream-server", "x-served-by",
                    "x-backend", "x-backend-server")
UPSTREAM_SAMPLES = 16  # /config asked again at most so many times to see a second upstream (1/2^15 missed)


def upstream_header(headers: Mapping[str, str]) -> str | None:
    """The upstream a proxy says it sent the request to, None when it names none."""
    lower = {k.lower(): v for k, v in headers.items()}
    return next((lower[h].strip() for h in UPSTREAM_HEADERS if lower.get(h, "").strip()), None)


def _app_id(config: Any) -> str | None:
    app_id = config.get("app_id") if isinstance(config, dict) else None
    return f"app_id {app_id}" if app_id is not None else None


def front_of(headers: Mapping[str, str], url: str) -> dict[str, Any] | None:
    """The proxy or balancer in front of the app, from its response headers; None when none shows."""
    lower = {k.lower(): v for k, v in headers.items()}
    server = lower.get("server", "")
    upstream, via = upstream_header(headers) or "", lower.get("via", "")
    product = server.split("/", 1)[0].strip().lower()
    if not (upstream or via or product in PROXIES):
        return None
    found = {"url": url, "server": server, "via": via, "upstream": upstream,
             "qbench": bool(lower.get("x-qbench-upstream"))}
    return {k: v for k, v in found.items() if v}
