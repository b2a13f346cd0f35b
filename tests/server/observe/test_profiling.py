"""Per-event phase traces in Gradio's shape (observe.profiling), on a real server in a thread."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from gradio_client import Client, handle_file
from PIL import Image

from reference_server.observe.profiling import BATCH_PHASES, GRADIO_PHASES, Trace, TraceCollector, batch_phase
from reference_server.settings import synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread

FUNCTIONS = [
    {"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 20.0}, "batch": True,
     "max_batch_size": 8, "concurrency_limit": 1},
    {"api_name": "gen", "workload": "stream", "params": {"chunks": 3, "interval_ms": 5}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with serve_in_thread(synthetic_settings(functions=FUNCTIONS)) as running:
        yield running


def png_file(tmp_path: Any) -> str:
    path = tmp_path / "in.png"
    Image.new("RGB", (64, 48), (200, 10, 10)).save(path)
    return str(path)


def traces(url: str, **params: Any) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/gradio_api/profiling/traces", params=params)
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()
    return result


def test_a_trace_has_gradios_keys_and_the_servers_own() -> None:
    trace = Trace("e1", "classify", "s1")
    trace.add("fn_call", 0.004)
    trace.add("fn_call", 0.001)
    out = trace.to_dict()
    assert {f"{p}_ms" for p in GRADIO_PHASES} <= set(out)
    assert out["fn_call_ms"] == pytest.approx(5.0)
    assert out["forward_ms"] is None and out["batch_size"] is None  # not a phase of this workload
    assert (out["event_id"], out["fn_name"], out["session_hash"]) == ("e1", "classify", "s1")


def test_the_collector_keeps_the_last_and_counts_what_fell_out() -> None:
    collector = TraceCollector(maxlen=2)
    for i in range(3):
        collector.add(Trace(str(i), "f", None))
    collector.upload("s", 0.002)
    assert [t["event_id"] for t in collector.get_all()] == ["2", ""]
    assert collector.added == 4
    assert collector.get_all(last_n=0) == []
    assert orjson.loads(collector.get_all_json()) == collector.get_all()
    last = collector.get_all(last_n=1)
    assert orjson.loads(collector.get_all_json(last_n=1)) == last == collector.get_all()[1:]
    assert orjson.loads(collector.get_all_json(last_n=9)) == collector.get_all()
    assert collector.get_all_json(last_n=0) == b"[]" and TraceCollector().get_all_json() == b"[]"
    summary = collector.summary()
    assert summary["count"] == 1 and summary["upload"]["count"] == 1


def test_batch_phases_only_count_inside_a_traced_call() -> None:
    batch_phase("forward", 1.0)  # no traced call: nothing to add to, no error
    seconds: dict[str, float] = {}
    token = BATCH_PHASES.set(seconds)
    try:
        batch_phase("forward", 0.5)
        batch_phase("forward", 0.25)
    finally:
        BATCH_PHASES.reset(token)
    assert seconds == {"forward": 0.75}


def test_every_event_of_a_batch_has_its_phases(server: RunningServer, tmp_path: Any) -> None:
    httpx.post(f"{server.url}/gradio_api/profiling/clear").raise_for_status()
    image = handle_file(png_file(tmp_path))
    # a client each: one client's submits racing a fast server can meet its session's close_stream
    jobs = [Client(server.url, verbose=False).submit(image, api_name="/classify") for _ in range(6)]
    assert all(job.result()["label"] == "LABEL_0" for job in jobs)
    events = [t for t in traces(server.url) if t["fn_name"] == "classify"]
    assert len(events) == 6 and len({t["event_id"] for t in events}) == 6
    for t in events:
        assert t["forward_ms"] >= 19.0  # the known wait, released from the GIL
        assert t["fn_call_ms"] >= t["forward_ms"]
        assert t["preprocess_ms"] > 0 and t["prepare_ms"] > 0
        assert t["total_ms"] >= t["fn_call_ms"]
        assert 1 <= t["batch_size"] <= 8
    assert sum(1 for t in traces(server.url) if t["fn_name"] == "gradio_file_upload") >= 1


def test_a_generator_counts_its_steps_and_diffs(server: RunningServer) -> None:
    httpx.post(f"{server.url}/gradio_api/profiling/clear").raise_for_status()
    Client(server.url, verbose=False).predict("abc", api_name="/gen")
    (trace,) = traces(server.url, last_n=1)
    assert trace["fn_name"] == "gen" and trace["n_iterations"] == 3
    assert trace["fn_call_ms"] > 0 and trace["streaming_diff_ms"] > 0


def test_summary_and_a_bad_last_n(server: RunningServer) -> None:
    summary = httpx.get(f"{server.url}/gradio_api/profiling/summary").json()
    assert {"queue_wait", "fn_call", "total"} <= set(summary["phases"])  # forward: only with such traces
    bad = httpx.get(f"{server.url}/gradio_api/profiling/traces", params={"last_n": "x"})
    assert bad.status_code == 422 and "last_n" in bad.json()["detail"]


def test_an_upload_is_a_trace_of_its_own(server: RunningServer) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG")
    files = {"files": ("a.png", buf.getvalue(), "image/png")}
    httpx.post(f"{server.url}/gradio_api/upload", files=files, headers={"session_hash": "abc"})
    (trace,) = traces(server.url, last_n=1)
    assert trace["fn_name"] == "gradio_file_upload" and trace["session_hash"] == "abc"
    assert trace["upload_ms"] > 0


def test_the_image_model_times_its_batch_phases() -> None:
    pytest.importorskip("transformers")
    from reference_server.workloads.registry import build_workload

    workload = build_workload("image-classification", {"size": "tiny", "num_labels": 4})
    workload.load("cpu")
    seconds: dict[str, float] = {}
    token = BATCH_PHASES.set(seconds)
    try:
        rows = workload.prepare_row([Image.new("RGB", (40, 30), (1, 2, 3))])
        workload.run_batch([[rows[0], rows[0]]])
    finally:
        BATCH_PHASES.reset(token)
    assert set(seconds) == {"batch_prepare", "forward"}  # no copy to a device on the CPU (h2d: CUDA)
    assert all(value >= 0 for value in seconds.values()) and seconds["forward"] > 0
