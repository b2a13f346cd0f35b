"""Streamed inputs (qbench.run.protocols.gradio_stream): which output answered which chunk, the scenario
keys, and a real Gradio 6 microphone app with `.stream(stream_every=..., time_limit=...)`."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pandas as pd
import pytest
import yaml
from aiohttp import web
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.protocols import gradio_stream
from qbench.run.protocols.base import Clock
from qbench.run.protocols.gradio_stream import ChunkLog, ChunkStreamWire
from qbench.run.protocols.gradio_wire import GradioApp
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import parse_scenario
from tests.run.conftest import serve_aiohttp
from tests.run.gradio_app_process import gradio_app


def record() -> RequestRecord:
    return RequestRecord(0, 0, "s", "level", False, intended_at_s=0.0, sent_at_s=0.0)


# ---------------------------------------------------------------- which output answered which chunk
def test_a_function_that_keeps_up_answers_every_chunk() -> None:
    log = ChunkLog(0.0)  # the join's chunk at 0
    log.started()
    log.output(0.1)  # answers the join's chunk: its latency is the time to first output, not counted
    for sent in (0.5, 1.0, 1.5):
        log.chunk_sent(sent)
        log.output(sent + 0.05)
    log.completed(1.9)  # closed while it waited: no chunk running, nothing more answered
    r = record()
    log.fill(r)
    assert (r.chunks_sent, r.chunks_answered, r.chunk_latency_count) == (4, 4, 3)
    assert r.chunk_latency_p50_s == pytest.approx(0.05) and r.chunk_latency_max_s == pytest.approx(0.05)
    assert r.output_gap_p95_s == pytest.approx(0.5)  # outputs at 0.1, 0.55, 1.05, 1.55
    assert log.idle.is_set()


def test_chunks_sent_while_the_function_runs_are_replaced_by_the_newest() -> None:
    log = ChunkLog(0.0)
    log.chunk_sent(0.2)  # while the event queued: it replaces the join's chunk
    log.started()
    log.output(0.5)  # answers 0.2
    log.chunk_sent(0.6)
    log.chunk_sent(0.8)  # the function still runs on 0.6: 0.8 waits
    log.chunk_sent(1.0)  # ... and replaces 0.8
    assert not log.idle.is_set()
    log.output(1.2)  # answers 0.6
    log.output(1.5)  # answers 1.0 (0.8 is never answered)
    r = record()
    log.fill(r)
    assert (r.chunks_sent, r.chunks_answered) == (5, 3)
    assert sorted(log.latencies) == pytest.approx([0.3, 0.5, 0.6])
    assert log.idle.is_set()


def test_the_time_limit_ends_the_event_with_the_last_chunk_answered_in_process_completed() -> None:
    log = ChunkLog(0.0)
    log.started()
    log.output(0.1)
    log.chunk_sent(0.5)
    log.completed(0.6)  # the time limit passed during the call: its output comes with process_completed
    log.chunk_sent(1.0)
    log.chunk_refused(1.0)  # 404: the event is over
    log.completed(1.1)  # (its news came after the refusal: nothing more answered)
    r = record()
    log.fill(r)
    assert (r.chunks_sent, r.chunks_answered, r.chunk_latency_count) == (2, 2, 1)
    assert r.chunk_latency_p95_s == pytest.approx(0.1)


# ---------------------------------------------------------------- a chunk the server refuses
@pytest.mark.parametrize(("status", "kind", "closed"), [
    (200, None, False),  # taken
    (404, None, False),  # 6.x: the event is over (its time limit): the stream ends, no error
    (500, "http_5xx", True),  # and no end of the event followed: an error, and the event is closed
])
def test_a_refused_chunk_ends_the_stream_and_only_an_unexplained_one_is_an_error(
        status: int, kind: str | None, closed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gradio_stream, "ENDED_GRACE_S", 0.01)
    closes: list[str] = []

    async def chunk(request: web.Request) -> web.Response:
        return web.json_response({"msg": "success"}, status=status)

    async def close(request: web.Request) -> web.Response:
        closes.append(request.match_info["event"])
        return web.json_response({"msg": "success"})

    server = web.Application()
    server.add_routes([web.post("/gradio_api/stream/{event}", chunk),
                       web.post("/gradio_api/stream/{event}/close", close)])

    async def post(url: str) -> tuple[bool, RequestRecord, ChunkLog]:
        async with aiohttp.ClientSession() as http:
            app = GradioApp(url, url + "/gradio_api", "sse_v3", (6, 31), 0)
            wire = ChunkStreamWire(app, http, Clock(), 0, chunks=2, every_s=None)
            r, log = record(), ChunkLog(0.0)
            r.session_id, r.event_id = "s", "e1"
            taken = await wire._post_chunk(r, log, f"{app.api}/stream/e1", [None])
            return taken, r, log

    with serve_aiohttp(server) as url:
        taken, r, log = asyncio.run(post(url))
    assert taken == (status == 200) and r.error_kind == kind and bool(closes) == closed
    assert log.sent == (2 if status == 200 else 1)


def test_gradio_5_chunks_go_over_the_websocket_each_acknowledged_until_the_server_closes_it() -> None:
    """5.x: the chunks on the websocket at the chunk route (as its browser sends them), one `success`
    each; a socket the server closes (an event its time limit ended) ends the stream, no error; 6.x
    POSTs (the route has no websocket there)."""
    received: list[dict[str, object]] = []

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            received.append(json.loads(message.data))
            if len(received) == 2:
                break  # the event ended: 5.x's handler raises, the socket closes
            await ws.send_json({"msg": "success"})
        await ws.close()
        return ws

    async def close(request: web.Request) -> web.Response:
        return web.json_response({"msg": "success"})

    server = web.Application()
    server.add_routes([web.get("/gradio_api/stream/{event}", socket),
                       web.post("/gradio_api/stream/{event}/close", close)])

    async def send(url: str, version: tuple[int, ...]) -> tuple[RequestRecord, ChunkLog]:
        async with aiohttp.ClientSession() as http:
            app = GradioApp(url, url + "/gradio_api", "sse_v3", version, 0)
            wire = ChunkStreamWire(app, http, Clock(), 0, chunks=4, every_s=0.01)
            r, log = record(), ChunkLog(0.0)
            r.session_id, r.event_id = "s", "e1"

            async def chunk(k: int) -> list[object]:
                return [f"chunk {k}"]

            await asyncio.wait_for(wire._send_chunks(r, log, chunk), 10)
            return r, log

    with serve_aiohttp(server) as url:
        r, log = asyncio.run(send(url, (5, 50, 0)))
    assert [m["data"] for m in received] == [["chunk 1"], ["chunk 2"]] and received[0]["session_hash"] == "s"
    assert r.error_kind is None and log.sent == 2 and r.bytes_received > 0  # the join's, 1 (2 was refused)


# ---------------------------------------------------------------- the scenario's keys
def scenario(protocol: str = "gradio", **endpoint: object) -> dict[str, object]:
    return {"protocol": protocol, "target": "http://127.0.0.1:1", "endpoint": endpoint,
            "payload": {"inputs": [{"audio": {"seconds": 0.5}}]}, "load": {"users": 1, "duration": 1}}


def test_chunks_and_stream_every_are_read_and_checked() -> None:
    ep = parse_scenario(scenario(api_name="level", chunks=20, stream_every=0.25)).endpoint
    assert (ep.chunks, ep.stream_every) == (20, 0.25)
    assert parse_scenario(scenario(api_name="level", chunks=3)).endpoint.stream_every is None  # the app's
    with pytest.raises(ScenarioError, match="set endpoint.chunks too"):
        parse_scenario(scenario(api_name="level", stream_every=0.5), source="s.yaml")
    with pytest.raises(ScenarioError, match="applies to protocol: gradio only"):
        parse_scenario(scenario("http", path="/p", chunks=3), source="s.yaml")
    with pytest.raises(ScenarioError, match="chunks"):
        parse_scenario(scenario(api_name="level", chunks=0), source="s.yaml")


# ---------------------------------------------------------------- a real Gradio 6 app
APP = textwrap.dedent('''
    import sys
    import time

    import gradio as gr
    import numpy as np


    def level(chunk, count):
        sample_rate, frames = chunk
        time.sleep(0.02)
        count = (count or 0) + 1
        return f"{np.abs(frames).mean():.1f} after {count} chunks", count


    def heard(chunk):
        return "heard"


    def flip(frame):
        return np.flipud(frame)


    def fragile(chunk, count):
        count = (count or 0) + 1
        if count == 3:
            raise gr.Error("the microphone was unplugged")
        return "heard", count


    with gr.Blocks() as demo:
        mic = gr.Audio(sources=["microphone"], streaming=True, type="numpy")
        loudness = gr.Textbox()
        count = gr.State()
        mic.stream(level, [mic, count], [loudness, count], stream_every=0.2, time_limit=30,
                   concurrency_limit=2, api_name="level")
        short = gr.Audio(sources=["microphone"], streaming=True)
        said = gr.Textbox()
        short.stream(heard, short, said, stream_every=0.2, time_limit=1, api_name="short")
        loose = gr.Audio(sources=["microphone"], streaming=True)
        loose.stream(fragile, [loose, count], [said, count], stream_every=0.2, api_name="fragile")
        webcam = gr.Image(sources=["webcam"], streaming=True)
        webcam.stream(flip, webcam, gr.Image(), stream_every=0.1, time_limit=10, api_name="flip")
        gr.Button().click(lambda: "hi", None, said, api_name="plain")

    demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]))
''')


@pytest.fixture(scope="module")
def mic_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("mic-app")
    with gradio_app(folder, APP) as url:
        yield url


def qbench(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return out.output


def edit(path: Path, endpoint: dict[str, object] | None = None, **load: object) -> Path:
    raw = yaml.safe_load(path.read_text())
    raw["endpoint"].update(endpoint or {})
    raw["load"] = {"users": 2, "duration": 3, "warmup": 0, "timeout": 30, **load}
    raw["slo"] = {"error_rate": 0.01}  # the tests check what happened, not a busy host's latency
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_init_writes_the_stream_and_two_concurrent_streams_run_with_no_error(mic_app: str,
                                                                              tmp_path: Path) -> None:
    """docs/streamed-inputs.md's `qbench init URL --api level -o mic.yaml` writes chunks and the app's
    stream_every; `qbench run mic.yaml` at 2 users holds 2 streams of 8 chunks at a time (the event
    runs 2 at a time), their chunks answered with their latency on the record."""
    path = tmp_path / "mic.yaml"
    qbench("init", mic_app, "--api", "level", "-o", str(path))
    text = path.read_text()
    assert "endpoint: {api_name: level, chunks: 50, stream_every: 0.2}" in text
    assert "audio: {seconds: 0.2" in text and "p95_chunk_latency_s: 0.4" in text
    out = qbench("run", str(edit(path, {"chunks": 8})), "--out", str(tmp_path / "run"), "--no-live")
    assert "Streamed inputs" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["errors"] == 0 and summary["completed_ok"] >= 2
    assert summary["chunks_sent"] == 8 * summary["completed_ok"]
    assert summary["latency"]["chunk_latency_s"]["count"] > 0
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert (records["chunks_sent"] == 8).all() and (records["chunks_answered"] >= 2).all()
    assert records["chunk_latency_p95_s"].notna().all() and (records["outputs"] >= 2).all()
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["server"]["stream"] == {"chunks": 8, "stream_every_s": 0.2, "time_limit_s": 30}
    qbench("report", str(tmp_path / "run"))  # the report says it too
    assert "**input chunks**: " in (tmp_path / "run" / "summary.md").read_text()


def test_the_apps_time_limit_ends_a_stream_without_an_error(mic_app: str, tmp_path: Path) -> None:
    path = tmp_path / "short.yaml"
    qbench("init", mic_app, "--api", "short", "-o", str(path))
    qbench("run", str(edit(path, {"chunks": 20}, users=1, duration=1)), "--out", str(tmp_path / "run"),
           "--no-live")
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert (records["outcome"] == "ok").all()
    assert (records["chunks_sent"] < 20).all()  # 1 s of a 4 s stream


@pytest.mark.parametrize("fetch", [True, False])
def test_a_webcam_streams_frames_and_each_output_frame_is_fetched_as_it_comes(mic_app: str, tmp_path: Path,
                                                                               fetch: bool) -> None:
    """A webcam's frames in, a flipped image out: each output's image is fetched as the browser showing
    it does, once; the result's image too where it is not the last output's (a frame the app flipped
    after the stream closed: on a busy box its output came only with the result, 5 fetched of 4 outputs
    streamed); `fetch_outputs: false` fetches none."""
    path = tmp_path / "cam.yaml"
    qbench("init", mic_app, "--api", "flip", "-o", str(path))
    assert "image: {" in path.read_text()
    qbench("run", str(edit(path, {"chunks": 5}, users=1, duration=1)), "--set", f"fetch_outputs={fetch}",
           "--out", str(tmp_path / "run"), "--no-live")
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert (records["outcome"] == "ok").all() and (records["outputs"] >= 2).all()
    if fetch:
        extra = records["downloads"] - records["outputs"]  # the result's own image, where it was new
        assert extra.isin([0, 1]).all(), records[["downloads", "outputs"]]
        assert (records["download_bytes"] > 0).all()
    else:
        assert (records["downloads"] == 0).all()


def test_a_function_that_raises_mid_stream_is_a_server_error_with_its_answers_counted(
        mic_app: str, tmp_path: Path) -> None:
    path = tmp_path / "fragile.yaml"
    qbench("init", mic_app, "--api", "fragile", "-o", str(path))
    out = CliRunner().invoke(app, ["run", str(edit(path, {"chunks": 6}, users=1, duration=1)),
                                   "--out", str(tmp_path / "run"), "--no-live"])
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert set(records["error_kind"]) == {"server_error"}, out.output
    assert records["error_message"].str.contains("the microphone was unplugged").all()
    assert (records["chunks_answered"] == 2).all() and (records["chunks_sent"] >= 3).all()


def test_a_stream_longer_than_the_timeout_is_refused_before_any_load(mic_app: str, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**scenario(api_name="level", chunks=100), "target": mic_app}))
    out = CliRunner().invoke(app, ["run", str(path), "--set", "load.timeout=10", "--no-live",
                                   "--out", str(tmp_path / "run")])
    assert out.exit_code != 0 and "lasts 19.8 s, past load.timeout (10 s)" in " ".join(out.output.split())


def test_chunks_for_an_event_that_is_not_a_stream_are_refused(mic_app: str, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**scenario(api_name="plain", chunks=3), "target": mic_app,
                                    "payload": {"inputs": []}}))
    out = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run"), "--no-live"])
    assert out.exit_code != 0 and "is not a .stream() event" in " ".join(out.output.split())


def test_the_capacity_of_a_stream_is_said_in_concurrent_streams(mic_app: str, tmp_path: Path) -> None:
    """docs/streamed-inputs.md's `qbench capacity mic.yaml` on the event that runs 2 streams at a time:
    the SLO on the time to first output (a stream left waiting in the queue) and on the share of chunks
    answered is measured at each rate, and the answer says how many concurrent streams that rate is."""
    path = tmp_path / "mic.yaml"
    qbench("init", mic_app, "--api", "level", "-o", str(path))
    edit(path, {"chunks": 8})
    qbench("capacity", str(path), "--slo", "p95_ttfo_s=1", "--slo", "min_chunks_answered=0.9",
           "--duration", "4", "--max-probes", "2", "--start-rate", "0.4", "--no-confirm", "--no-overload",
           "--no-recheck", "--out", str(tmp_path / "cap"))
    (folder,) = (tmp_path / "cap").glob("capacity-*")
    found = json.loads((folder / "capacity.json").read_text())
    assert found["result"]["capacity_rps"] is not None  # 0.4 streams/s of 1.6 s: under 1 at a time
    assert not any("not measured" in v for p in found["result"]["probes"] for v in p["violations"])
    streams = dict(found["answer"])["streams"]
    assert streams.startswith("~") and "concurrent streams" in streams
    assert float(streams[1:].split()[0]) < 2.5


def test_init_mix_gives_streams_and_clicks_bounds_of_their_own(mic_app: str, tmp_path: Path) -> None:
    """A stream's end-to-end latency is its length: in a mix beside a click, each entry gets its own
    SLO and the scenario keeps only the error rate."""
    path = tmp_path / "mix.yaml"
    qbench("init", mic_app, "--mix", "-o", str(path))
    raw = yaml.safe_load(path.read_text())
    slos = {e["endpoint"]["api_name"]: e["slo"] for e in raw["mix"]}
    assert slos["level"] == {"p95_ttfo_s": 2.0, "p95_chunk_latency_s": 0.4, "min_chunks_answered": 0.9}
    assert slos["plain"] == {"p95_latency_s": 10.0} and raw["slo"] == {"error_rate": 0.01}
    assert parse_scenario(raw).mix is not None
