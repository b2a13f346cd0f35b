"""The wire protocol against a real uvicorn server in a thread: SSE framing, message order, routes."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from PIL import Image
from starlette.datastructures import QueryParams

from reference_server.http import gradio_routes
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

FUNCTIONS = [
    {"api_name": "echo", "workload": "echo"},
    {"api_name": "gen", "workload": "stream", "params": {"chunks": 3, "interval_ms": 5}},
    {"api_name": "slow", "workload": "sleep", "params": {"base_ms": 400}},
    {"api_name": "img", "workload": "imageop", "params": {"size": 8}},
    {"api_name": "hidden", "workload": "echo", "api_visibility": "undocumented"},
    {"api_name": "fail", "workload": "fail", "params": {"message": "nope"}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = synthetic_settings(functions=FUNCTIONS, heartbeat_interval_s=0.2, max_file_size=10_000)
    with serve_in_thread(settings) as running:
        yield running


def join(url: str, fn_index: int, data: list[Any], session: str) -> str:
    r = httpx.post(
        f"{url}/gradio_api/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": session}
    )
    assert r.status_code == 200, r.text
    return str(r.json()["event_id"])


def read_stream(url: str, session: str) -> tuple[httpx.Response, bytes]:
    with httpx.stream(
        "GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=10
    ) as r:
        return r, r.read()


def messages(raw: bytes) -> list[dict[str, Any]]:
    frames = raw.split(b"\n\n")
    assert frames[-1] == b""
    out = []
    for f in frames[:-1]:
        assert f.startswith(b"data: ") and b"\n" not in f
        out.append(orjson.loads(f[len(b"data: ") :]))
    return out


def test_config_and_info(server: RunningServer) -> None:
    config = httpx.get(f"{server.url}/config").json()
    assert (config["protocol"], config["api_prefix"], config["root"]) == ("sse_v3", "/gradio_api", server.url)
    deps = config["dependencies"]
    assert [d["id"] for d in deps] == list(range(len(FUNCTIONS)))
    assert deps[1]["types"] == {"generator": True, "cancel": False}
    info = httpx.get(f"{server.url}/gradio_api/info").json()
    assert set(info["named_endpoints"]) == {"/echo", "/gen", "/slow", "/img", "/fail"}
    assert "/hidden" in httpx.get(f"{server.url}/gradio_api/info?all_endpoints=1").json()["named_endpoints"]


def test_message_order_and_framing(server: RunningServer) -> None:
    eid = join(server.url, 0, ["hi"], "s-order")
    resp, raw = read_stream(server.url, "s-order")
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    msgs = messages(raw)
    assert [m["msg"] for m in msgs] == ["estimation", "process_starts", "process_completed", "close_stream"]
    assert msgs[0] == {"msg": "estimation", "event_id": eid, "rank": 0, "queue_size": 1, "rank_eta": None}
    done = msgs[2]
    assert list(done["output"]) == [
        "data",
        "is_generating",
        "duration",
        "average_duration",
        "render_config",
        "changed_state_ids",
        "used_cache",
    ]
    assert done["output"]["data"] == ["hi"] and done["success"] is True and done["title"] is None
    assert msgs[3] == {"msg": "close_stream", "event_id": None}


def test_one_stream_carries_all_session_events(server: RunningServer) -> None:
    e1 = join(server.url, 0, ["a"], "s-multi")
    e2 = join(server.url, 1, ["b"], "s-multi")
    _, raw = read_stream(server.url, "s-multi")
    msgs = messages(raw)
    assert msgs[-1]["msg"] == "close_stream"
    completed = [m["event_id"] for m in msgs if m["msg"] == "process_completed"]
    assert sorted(completed) == sorted([e1, e2])
    gens = [m for m in msgs if m["msg"] == "process_generating"]
    assert gens[0]["output"]["data"] == ["b"] and gens[1]["output"]["data"] == [[["append", [], " 1"]]]


def test_unknown_session_gets_unexpected_error(server: RunningServer) -> None:
    _, raw = read_stream(server.url, "never-joined")
    assert messages(raw) == [
        {
            "msg": "unexpected_error",
            "event_id": None,
            "message": "404: Not Found",
            "session_not_found": True,
            "success": False,
        }
    ]


def test_heartbeats_while_waiting(server: RunningServer) -> None:
    for _ in range(3):  # 1.2 s of work queued: the stream is open while they wait, even on a busy box
        join(server.url, 2, ["z"], "s-beat")
    _, raw = read_stream(server.url, "s-beat")
    kinds = [m["msg"] for m in messages(raw)]
    assert "heartbeat" in kinds and kinds[-1] == "close_stream"


def test_cancel_waiting_event_over_http(server: RunningServer) -> None:
    join(server.url, 2, ["first"], "s-cancel-a")
    waiting = join(server.url, 2, ["second"], "s-cancel-b")
    r = httpx.post(
        f"{server.url}/gradio_api/cancel",
        json={"session_hash": "s-cancel-b", "fn_index": 2, "event_id": waiting},
    )
    assert r.json() == {"success": True}
    _, raw = read_stream(server.url, "s-cancel-b")
    msgs = messages(raw)
    assert msgs[-2]["output"] == {} and msgs[-2]["success"] is True and msgs[-1]["msg"] == "close_stream"
    read_stream(server.url, "s-cancel-a")


def test_simple_call_api(server: RunningServer) -> None:
    r = httpx.post(f"{server.url}/gradio_api/call/gen", json={"data": ["x"]})
    eid = r.json()["event_id"]
    with httpx.stream("GET", f"{server.url}/gradio_api/call/gen/{eid}", timeout=10) as resp:
        body = resp.read().decode()
    assert body.startswith('event: generating\ndata: ["x"]\n\n')
    assert body.endswith('event: complete\ndata: ["x 1 2"]\n\n')
    assert 'data: ["x 1"]' in body  # full values, no diffs


def call(url: str, api: str, body: dict[str, Any]) -> str:
    r = httpx.post(f"{url}/gradio_api/call/{api}", json=body)
    assert r.status_code == 200, r.text
    with httpx.stream("GET", f"{url}/gradio_api/call/{api}/{r.json()['event_id']}", timeout=10) as resp:
        return resp.read().decode()


def test_call_with_a_custom_session_hash_leaves_no_session(server: RunningServer) -> None:
    sessions = server.state.queue.sessions
    before = len(sessions)
    r = httpx.post(f"{server.url}/gradio_api/call/echo", json={"data": ["a"], "session_hash": "mine"})
    eid = r.json()["event_id"]
    time.sleep(0.05)  # the event finishes before its GET (the case that used to leave "mine" behind)
    with httpx.stream("GET", f"{server.url}/gradio_api/call/echo/{eid}", timeout=10) as resp:
        assert resp.read().decode() == 'event: complete\ndata: ["a"]\n\n'
    # two calls sharing one hash each get their own result
    bodies = [call(server.url, "echo", {"data": [w], "session_hash": "shared"}) for w in ("x", "y")]
    assert bodies == ['event: complete\ndata: ["x"]\n\n', 'event: complete\ndata: ["y"]\n\n']
    assert len(sessions) == before and "mine" not in sessions and "shared" not in sessions


def test_cancel_a_call_by_its_custom_session_hash(server: RunningServer) -> None:
    slow = httpx.post(f"{server.url}/gradio_api/call/slow", json={"data": ["a"], "session_hash": "c1"})
    eid = slow.json()["event_id"]
    wrong = {"session_hash": "other", "fn_index": 2, "event_id": eid}
    httpx.post(f"{server.url}/gradio_api/cancel", json=wrong)
    assert eid in server.state.queue.events  # a cancel naming another session does not touch it
    httpx.post(f"{server.url}/gradio_api/cancel", json={**wrong, "session_hash": "c1"})
    with httpx.stream("GET", f"{server.url}/gradio_api/call/slow/{eid}", timeout=10) as resp:
        assert resp.read().decode().startswith("event: complete")  # Gradio's synthetic completion
    assert eid not in server.state.queue.sessions


def test_queue_status_and_reset(server: RunningServer) -> None:
    status = httpx.get(f"{server.url}/gradio_api/queue/status").json()
    assert status["msg"] == "estimation" and isinstance(status["queue_size"], int)
    assert httpx.post(f"{server.url}/gradio_api/reset", json={"event_id": "x"}).json() == {"success": True}


def test_upload_image_and_download_output(server: RunningServer) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (255, 0, 0)).save(buf, format="PNG")
    r = httpx.post(f"{server.url}/gradio_api/upload", files={"files": ("a.png", buf.getvalue(), "image/png")})
    (path,) = r.json()
    file_data = {"path": path, "meta": {"_type": "gradio.FileData"}}
    join(server.url, 3, [file_data], "s-img")
    _, raw = read_stream(server.url, "s-img")
    out_file, size = messages(raw)[-2]["output"]["data"]
    assert size == {"width": 20, "height": 10}
    img = Image.open(io.BytesIO(httpx.get(f"{server.url}/gradio_api/file={out_file['path']}").content))
    assert img.size == (8, 8)


def test_official_gradio_client_smoke(server: RunningServer) -> None:
    from gradio_client import Client

    client = Client(server.url, verbose=False)
    try:
        assert client.predict("hello", api_name="/echo") == "hello"
        assert client.predict("s", api_name="/gen") == "s 1 2"
        job = client.submit("w", api_name="/slow")
        started = time.monotonic()
        while not job.done() and time.monotonic() - started < 10:
            time.sleep(0.05)
        assert job.result() == "w"
    finally:
        client.close()


def test_metrics_status_healthz(server: RunningServer) -> None:
    join(server.url, 0, ["m"], "s-metrics")
    read_stream(server.url, "s-metrics")
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'qbench_events_joined_total{fn="echo"}' in metrics
    assert "qbench_queue_wait_seconds_bucket" in metrics
    status = httpx.get(f"{server.url}/status").json()
    assert status["jobs_completed"] >= 1 and status["rss_bytes"] > 0 and status["peak_rss_bytes"] > 0
    assert status["workloads"]["slow"]["base_ms"] == 400
    assert httpx.get(f"{server.url}/healthz").json() == {"ready": True}
    assert httpx.post(f"{server.url}/admin/config", json={}).status_code == 404  # no admin token


def test_admin_reconfiguration() -> None:
    settings = synthetic_settings(admin_token="tok")
    with serve_in_thread(settings) as srv:
        url = f"{srv.url}/admin/config"
        assert httpx.post(url, json={}).status_code == 401
        assert httpx.post(url, json={}, headers={"Authorization": "Bearer nope"}).status_code == 403
        auth = {"Authorization": "Bearer tok"}
        bad = httpx.post(url, json={"functions": {"echo": {"workload": "sleep"}}}, headers=auth)
        assert bad.status_code == 422 and "cannot be changed" in bad.json()["detail"]
        bad = httpx.post(url, json={"queue": {"max_size": -3}}, headers=auth)
        assert bad.status_code == 422 and "queue.max_size = -3" in bad.json()["detail"]
        before = httpx.get(f"{srv.url}/status").json()["config_hash"]
        ok = httpx.post(
            url,
            json={
                "queue": {"max_size": 7},
                "launch": {"max_threads": 3},
                "functions": {"echo": {"concurrency_limit": 2}},
            },
            headers=auth,
        ).json()
        assert ok["settings"]["queue"]["max_size"] == 7 and ok["config_hash"] != before
        assert srv.state.queue.settings.launch.max_threads == 3
        assert srv.state.queue.limiter.total_tokens == 3
        assert httpx.get(f"{srv.url}/status").json()["config_hash"] == ok["config_hash"]
        for rate in (b"1e-9", b"0.001", b"0", b"-1"):  # a tiny rate would spin the estimation loop
            bad = httpx.post(url, content=b'{"queue": {"status_update_rate": %s}}' % rate, headers=auth)
            assert bad.status_code == 422 and "status_update_rate" in bad.json()["detail"], bad.text
            assert ">= 0.01" in bad.json()["detail"]
        for rate in (0.05, "auto", 0.05):  # numeric -> auto -> numeric within one period: one loop, not two
            ok = httpx.post(url, json={"queue": {"status_update_rate": rate}}, headers=auth).json()
            assert ok["settings"]["queue"]["status_update_rate"] == rate
        loops = [t for t in srv.state.queue._tasks if t.get_name() == "qbench-estimations" and not t.done()]
        assert len(loops) == 1


def test_client_disconnect_drops_waiting_events() -> None:
    settings = synthetic_settings(
        functions=[{"api_name": "slow", "workload": "sleep", "params": {"base_ms": 300}}]
    )
    with serve_in_thread(settings) as srv:
        join(srv.url, 0, ["a"], "s-gone")
        join(srv.url, 0, ["b"], "s-gone")
        with httpx.stream("GET", f"{srv.url}/gradio_api/queue/data", params={"session_hash": "s-gone"}) as r:
            next(r.iter_lines())  # first message, then hang up
        deadline = time.monotonic() + 5
        while "s-gone" in srv.state.queue.sessions and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "s-gone" not in srv.state.queue.sessions
        assert srv.state.queue.waiting_count == 0


def test_direct_run_bypasses_the_queue(server: RunningServer) -> None:
    r = httpx.post(f"{server.url}/gradio_api/run/echo", json={"data": ["direct"]})
    assert r.status_code == 200 and r.json()["data"] == ["direct"] and r.json()["is_generating"] is False
    assert httpx.post(f"{server.url}/gradio_api/run/gen", json={"data": ["g"]}).json()["data"] == ["g 1 2"]
    r = httpx.post(f"{server.url}/gradio_api/run/fail", json={"data": ["x"]})
    assert r.status_code == 500 and r.json() == {"error": None}
    assert httpx.post(f"{server.url}/gradio_api/run/nope", json={"data": []}).status_code == 404


def test_status_peak_rss_is_the_servers_own_not_its_launchers() -> None:
    """ru_maxrss survives fork+exec; /status must not report a big launcher's peak as the server's."""
    import subprocess
    import sys

    ballast = bytearray(400 * 1024 * 1024)  # the "launcher" peaks at 400+ MB before starting a child
    ballast[::4096] = b"x" * len(ballast[::4096])
    code = "from reference_server.http.admin import peak_rss_bytes; print(peak_rss_bytes())"
    child_peak = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    del ballast
    assert 0 < child_peak < 300 * 1024 * 1024


@pytest.mark.parametrize("query", [b"session_hash=abc", b"a=1&session_hash=x&session_hash=y",
                                   b"session_hash=", b"session_hash", b"other=1", b"", b"&&session_hash=a=b&",
                                   b"session_hash=a%20b", b"session_hash=a+b", b"session_hash=\xe9t\xe9",
                                   b"session%5Fhash=q"])
def test_query_value_is_starlettes_query_params_get(query: bytes) -> None:
    assert gradio_routes.query_value(query, "session_hash") == QueryParams(query).get("session_hash")
