"""GradioProtocol without a server (qbench.run.protocols.gradio): discovery from a canned /config and
/info (a fake session answers GETs), the endpoint and its input types, the values sent for each input
(3.x's inline files, State as null, a component's props), output file URLs and the stream checks."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from qbench.errors import TargetError
from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio import GradioProtocol, front_of, in_session
from qbench.run.protocols.gradio_3x_ws import WebSocketWire
from qbench.run.protocols.gradio_4_9_sse import SessionStreamWire
from qbench.run.protocols.gradio_wire import GradioApp
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.payloads import FileValue
from qbench.run.scenario.schema import parse_scenario


class FakeResponse:
    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.status, self.body = status, body
        self.headers = headers or {"server": "uvicorn"}

    async def read(self) -> bytes:
        return self.body

    async def __aenter__(self) -> FakeResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    """Answers GET url with the canned (status, JSON or bytes); anything else is a 404."""

    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        self.routes, self.asked = routes, list[str]()
        self.headers: dict[str, str] | None = None  # every response's (None: an app server's own)

    def get(self, url: str) -> FakeResponse:
        self.asked.append(url)
        status, body = self.routes.get(url, (404, b"not found"))
        return FakeResponse(status, body if isinstance(body, bytes) else orjson.dumps(body), self.headers)


CONFIG: dict[str, Any] = {
    "version": "5.50.0",
    "protocol": "sse_v3",
    "api_prefix": "/gradio_api",
    "components": [
        {"id": 1, "type": "textbox", "props": {"label": "Prompt"}},
        {"id": 2, "type": "state", "props": {}},
        {"id": 3, "type": "slider", "props": {"label": "Steps", "minimum": 1, "maximum": 9}},
        {"id": 4, "type": "button", "props": {}, "skip_api": True},
    ],
    "dependencies": [
        {"id": 0, "api_name": "other", "inputs": []},
        {"id": 7, "api_name": "predict", "inputs": [1, 2, 3, 4]},
        {"id": 8, "api_name": "talk", "inputs": [1], "connection": "stream", "stream_every": 0.25},
    ],
}
INPUTS: list[dict[str, Any]] = [{"text": {"words": [2, 2]}}, {"number": {"min": 1, "max": 9}}]


def protocol(routes: dict[str, tuple[int, Any]], endpoint: dict[str, Any] | None = None,
             inputs: list[dict[str, Any]] | None = None, **raw: Any) -> GradioProtocol:
    scenario = parse_scenario({"name": "t", "endpoint": endpoint or {"api_name": "predict"},
                               "payload": {"inputs": INPUTS if inputs is None else inputs},
                               "load": {"burst": 1, "timeout": 5}, **raw})
    http: Any = FakeSession(routes)
    return GradioProtocol(scenario, "http://h/", http, Clock())


def discover(proto: GradioProtocol) -> dict[str, Any]:
    return asyncio.run(proto.discover())


def test_discovery_reads_the_family_prefix_version_and_endpoint() -> None:
    info = {"named_endpoints": {"/predict": {"parameters": [{"label": "Prompt"}, {"label": "Steps"}]}}}
    proto = protocol({"http://h/config": (200, CONFIG), "http://h/gradio_api/info": (200, info)})
    snapshot = discover(proto)
    assert proto.app == GradioApp(base="http://h", api="http://h/gradio_api", family="sse_v3",
                                  version=(5, 50, 0), fn_index=7)
    assert proto.input_types == ["textbox", None, "slider", None]  # State and skip_api: not API inputs
    assert isinstance(proto.wire, SessionStreamWire) and proto.chunk_wire is None
    assert snapshot["fn_index"] == 7 and snapshot["endpoint_info"] == info["named_endpoints"]["/predict"]
    assert snapshot["gradio"] == {"version": "5.50.0", "protocol": "sse_v3", "detected_protocol": "sse_v3",
                                  "api_prefix": "/gradio_api"}
    assert "stream" not in snapshot
    asyncio.run(proto.close())


def test_a_3x_config_speaks_ws_at_the_root_and_info_is_optional() -> None:
    config = {**CONFIG, "version": "3.50.2", "protocol": None, "api_prefix": None,
              "dependencies": [{"api_name": "predict", "inputs": [1, 3]}]}
    proto = protocol({"http://h/config": (200, config)})  # /info: 404
    snapshot = discover(proto)
    assert proto.app is not None
    assert (proto.app.family, proto.app.api, proto.app.fn_index) == ("ws", "http://h", 0)
    assert isinstance(proto.wire, WebSocketWire) and proto.wire.url == "ws://h/queue/join"
    assert snapshot["endpoint_info"] is None and snapshot["gradio"]["detected_protocol"] == "ws"


def test_the_scenario_can_force_a_family_and_an_endpoint_by_fn_index() -> None:
    proto = protocol({"http://h/config": (200, CONFIG)}, {"fn_index": 0}, [], gradio_protocol="sse_v1")
    snapshot = discover(proto)
    assert proto.app is not None and (proto.app.family, proto.app.fn_index) == ("sse_v1", 0)
    assert proto.endpoint_label == "fn_index=0"
    assert snapshot["gradio"]["protocol"] == "sse_v1" and snapshot["gradio"]["detected_protocol"] == "sse_v3"


@pytest.mark.parametrize(("routes", "message"), [
    ({"http://h/config": (200, [1, 2])}, "not a JSON object; is this a Gradio app?"),
    ({"http://h/config": (200, b"<html>")}, "http://h/config: not JSON; is this a Gradio app?"),
    ({}, "http://h/config: HTTP 404; is this a Gradio app?"),
    ({"http://h/config": (401, b"")}, "http://h/config: HTTP 401: "),
    ({"http://h/config": (200, {**CONFIG, "protocol": "sse_v9"})},
     "Gradio 5.50.0 speaks protocol 'sse_v9', which qbench does not know"),
    ({"http://h/config": (200, {**CONFIG, "dependencies": CONFIG["dependencies"][:1]})},
     "no endpoint 'predict'; the server has: other"),
])
def test_discovery_refusals_say_what_is_wrong(routes: dict[str, tuple[int, Any]], message: str) -> None:
    with pytest.raises(TargetError) as caught:
        discover(protocol(routes))
    assert message in str(caught.value)


def test_a_payload_that_does_not_fit_lists_the_inputs_and_the_lines_that_fit() -> None:
    with pytest.raises(TargetError) as caught:
        discover(protocol({"http://h/config": (200, CONFIG)}, inputs=INPUTS[:1]))
    text = str(caught.value)
    assert "endpoint 'predict' takes 2 input(s), the scenario's payload.inputs has 1" in text
    assert "1. Textbox 'Prompt'" in text and "2. Slider 'Steps'" in text and "qbench init" in text


def test_a_stream_event_gets_its_chunk_wire() -> None:
    proto = protocol({"http://h/config": (200, CONFIG)}, {"api_name": "talk", "chunks": 3}, INPUTS[:1])
    snapshot = discover(proto)
    assert proto.chunk_wire is not None and (proto.chunk_wire.chunks, proto.chunk_wire.every_s) == (3, 0.25)
    assert snapshot["stream"] == {"chunks": 3, "stream_every_s": 0.25, "time_limit_s": None}


@pytest.mark.parametrize(("config", "endpoint", "message"), [
    (CONFIG, {"api_name": "predict", "chunks": 2}, "is not a .stream() event"),
    ({**CONFIG, "protocol": "sse_v2"}, {"api_name": "talk"},
     "need Gradio 5.0 or later (protocol sse_v3), not sse_v2"),
    (CONFIG, {"api_name": "talk", "chunks": 30},
     "a stream of 30 chunks 0.25 s apart lasts 7.25 s, past load.timeout"),
])
def test_stream_settings_that_cannot_work_are_refused(config: dict[str, Any], endpoint: dict[str, Any],
                                                     message: str) -> None:
    inputs = INPUTS if endpoint["api_name"] == "predict" else INPUTS[:1]
    with pytest.raises(TargetError) as caught:
        discover(protocol({"http://h/config": (200, config)}, endpoint, inputs))
    assert message in str(caught.value)


def with_app(family: str, types: list[str | None], prop_inputs: dict[int, dict[str, Any]] | None = None
             ) -> GradioProtocol:
    proto = protocol({})
    proto.app = GradioApp(base="http://h", api="http://h/gradio_api", family=family, version=(3, 50),
                          fn_index=0)
    proto.input_types, proto.prop_inputs = types, prop_inputs or {}
    return proto


def record() -> RequestRecord:
    return RequestRecord(request_id=4, user_id=0, session_id="s", endpoint="predict", warmup=False,
                         intended_at_s=0.0)


def test_input_types_leave_out_state_and_skip_api_and_keep_unknown_ids() -> None:
    config = {"components": [{"id": 1, "type": "state"}, {"id": 2, "type": "image", "skip_api": True},
                             {"id": 3, "type": "image"}, "junk"]}
    types = GradioProtocol._input_types(config, {"inputs": [1, 2, 3, 42]})
    assert types == [None, None, "image", ""]  # an id /config does not list: an API input of no type


def test_3x_files_go_inline_as_data_urls_and_state_as_null() -> None:
    proto = with_app("ws", ["image", None, "file", "gallery", "textbox"])
    png = FileValue(data=b"abc", name="a.png", mime="image/png")
    r = record()
    data = asyncio.run(proto._data([png, png, png, "hi"], r))
    url = "data:image/png;base64,YWJj"
    assert data == [url, None, {"name": "a.png", "data": url, "is_file": False},
                    [{"name": "a.png", "data": url, "is_file": False}], "hi"]
    assert r.bytes_sent == 3 * len(url)


def test_several_files_and_a_component_taken_whole() -> None:
    proto = with_app("ws", ["file", "number"], {1: {"minimum": 0, "maximum": 9}})
    txt = FileValue(data=b"x", name="a.txt", mime="text/plain")
    data = asyncio.run(proto._data([[txt, txt], 3], record()))
    assert data is not None and len(data[0]) == 2 and data[0][0]["name"] == "a.txt"
    assert data[1] == {"minimum": 0, "maximum": 9, "value": 3}


@pytest.mark.parametrize(("ref", "url"), [
    ("https://cdn/x.png", "https://cdn/x.png"),
    ("/file=/tmp/a.png", "http://h/gradio_api/file=/tmp/a.png"),
    ("/gradio_api/file=/tmp/a.png", "http://h/gradio_api/file=/tmp/a.png"),
])
def test_output_file_urls(ref: str, url: str) -> None:
    assert with_app("sse_v3", [])._file_url(ref) == url


def test_sending_before_discovery_is_a_programming_error() -> None:
    with pytest.raises(AssertionError, match="discover"):
        asyncio.run(protocol({}).send(record(), [], 0))


@pytest.mark.parametrize(("headers", "found"), [
    ({"server": "uvicorn"}, None),
    ({}, None),
    ({"Server": "nginx/1.22.1", "X-Qbench-Upstream": "127.0.0.1:7861"},
     {"url": "http://h", "server": "nginx/1.22.1", "upstream": "127.0.0.1:7861", "qbench": True}),
    ({"server": "uvicorn", "X-Served-By": " replica-2 "}, {"url": "http://h", "server": "uvicorn",
                                                          "upstream": "replica-2"}),
    ({"server": "uvicorn", "via": "1.1 google"},
     {"url": "http://h", "server": "uvicorn", "via": "1.1 google"}),
    ({"server": "envoy"}, {"url": "http://h", "server": "envoy"}),
])
def test_the_proxy_in_front_shows_in_its_headers(headers: dict[str, str],
                                                  found: dict[str, str] | None) -> None:
    assert front_of(headers, "http://h") == found


def test_discovery_records_the_balancer_in_front() -> None:
    alone = protocol({"http://h/config": (200, CONFIG)})
    assert "front" not in discover(alone)
    behind = protocol({"http://h/config": (200, CONFIG)})
    http: Any = behind.http
    http.headers = {"server": "nginx/1.22.1"}
    assert discover(behind)["front"] == {"url": "http://h", "server": "nginx/1.22.1", "upstreams": []}
    configs = [url for url in http.asked if "/config" in url]
    assert len(configs) == 1 + 16  # nothing told the servers apart: asked UPSTREAM_SAMPLES more times


def test_discovery_tells_the_servers_behind_a_proxy_apart_by_their_app_id() -> None:
    """A proxy that names no upstream: each Gradio app's /config app_id tells them apart; asked with a
    new session_hash each time (for a balancer hashing on it) until two differ."""
    sample = "http://h/config?session_hash=qbench-upstream-{}"
    samples = {sample.format(k): (200, {**CONFIG, "app_id": 9 if k > 1 else 7}) for k in range(16)}
    behind = protocol({"http://h/config": (200, {**CONFIG, "app_id": 7}), **samples})
    http: Any = behind.http
    http.headers = {"server": "caddy"}
    assert discover(behind)["front"]["upstreams"] == ["app_id 7", "app_id 9"]
    configs = [url for url in http.asked if "/config" in url]
    assert len(configs) == 4  # /config, then samples 0, 1 (the same app) and 2 (another)


@pytest.mark.parametrize(("url", "session", "named"), [
    ("http://h/gradio_api/upload", "ab c", "http://h/gradio_api/upload?session_hash=ab%20c"),
    ("http://h/gradio_api/file=/tmp/a.png?x=1", "s1", "http://h/gradio_api/file=/tmp/a.png?x=1&session_hash=s1"),
    ("http://h/gradio_api/upload", None, "http://h/gradio_api/upload"),
    ("data:image/png;base64,YWJj", "s1", "data:image/png;base64,YWJj"),
])
def test_uploads_and_downloads_name_their_session(url: str, session: str | None, named: str) -> None:
    assert in_session(url, session) == named
