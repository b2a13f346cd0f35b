"""The server's phases: traces joined onto records (hand-made traces), read from a stand-in server
(the trace endpoint, /monitoring/summary, neither), and kept through run.json and summary.json."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from qbench.run.load.generator import LiveStats
from qbench.run.records.schema import RequestRecord, read_parquet, records_table, write_parquet
from qbench.run.results.run_info import RunInfo
from qbench.run.results.server_phases import (
    BUFFER,
    TraceCollector,
    TraceReport,
    TraceStore,
    attach,
    expected,
)
from qbench.run.results.summary import Summary, summarize
from tests.run.conftest import serve_aiohttp


def rec(i: int, event: str | None = "e", *, sent: float = 0.0, started: float | None = 0.1,
        done: float = 0.3, ok: bool = True) -> RequestRecord:
    return RequestRecord(i, i, f"s{i}", "/predict", False, sent, sent_at_s=sent, started_at_s=started,
                         completed_at_s=done, outcome="ok" if ok else "error",
                         error_kind=None if ok else "timeout",
                         event_id=None if event is None else f"{event}{i}")


def trace(event: str, *, stamp: float = 1000.1, **ms: float) -> dict[str, Any]:
    """A prediction trace as Gradio 6.31 writes it (durations in ms, wall-clock stamp at process start)."""
    base = {"event_id": event, "fn_name": "predict", "session_hash": "s", "timestamp": stamp,
            "queue_wait_ms": 40.0, "preprocess_ms": 10.0, "fn_call_ms": 100.0, "postprocess_ms": 20.0,
            "streaming_diff_ms": 0.0, "total_ms": 140.0, "n_iterations": 1}
    return {**base, **ms}


def upload(tag: str, stamp: float, upload_ms: float | None = 5.0) -> dict[str, Any]:
    entry: dict[str, Any] = {"event_id": f"u-{tag}-{stamp}", "fn_name": "gradio_file_upload",
                             "session_hash": tag, "timestamp": stamp}
    if upload_ms is not None:
        entry["upload_ms"] = upload_ms
    return entry


# ---------------------------------------------------------------- the join


@pytest.mark.parametrize(("records", "traces", "matched", "want"), [
    pytest.param([rec(0), rec(1)], [trace("e0"), trace("e1")], 2, 2, id="all-matched"),
    pytest.param([rec(0), rec(1)], [trace("e1"), trace("other-run")], 1, 2, id="one-lost"),
    pytest.param([rec(0, started=None, ok=False)], [], 0, 0, id="never-started-is-not-expected"),
    pytest.param([rec(0, event=None)], [trace("None")], 0, 0, id="no-event-id"),
    pytest.param([rec(0, ok=False)], [trace("e0")], 1, 1, id="a-timeout-still-gets-its-phases"),
])
def test_traces_join_records_by_event_id(records: list[RequestRecord], traces: list[dict[str, Any]],
                                         matched: int, want: int) -> None:
    assert attach(records, traces) == matched
    assert expected(records) == want


def test_durations_become_seconds_and_client_only_is_the_rest() -> None:
    r = rec(0)  # sent 0.0 -> result 0.3: 300 ms, of which the server accounts for 40 + 140
    attach([r], [trace("e0")])
    assert (r.server_queue_wait_s, r.server_preprocess_s, r.server_fn_s, r.server_postprocess_s) == \
        pytest.approx((0.04, 0.01, 0.1, 0.02))
    assert r.server_total_s == pytest.approx(0.14) and r.server_streaming_diff_s == 0.0
    assert r.server_prepare_s is None and r.server_batch_size is None  # Gradio has no batch phases
    assert r.server_upload_s is None  # no upload entry
    assert r.client_only_s == pytest.approx(0.3 - 0.04 - 0.14)


def test_reference_server_extras_are_read_by_the_same_reader() -> None:
    r = rec(0)
    extras = {"prepare_ms": 3.0, "batch_prepare_ms": 7.5, "h2d_ms": 1.0, "forward_ms": 4.6, "batch_size": 32}
    attach([r], [trace("e0", **extras)])
    assert (r.server_prepare_s, r.server_batch_prepare_s, r.server_h2d_s, r.server_forward_s) == \
        pytest.approx((0.003, 0.0075, 0.001, 0.0046))
    assert r.server_batch_size == 32
    synthetic = rec(1)  # a workload without a model: the reference server writes 0 for its phases
    attach([synthetic], [trace("e1", prepare_ms=0.0, batch_prepare_ms=0.0, h2d_ms=0.0, forward_ms=0.0)])
    assert synthetic.server_forward_s is None and synthetic.server_h2d_s is None
    assert synthetic.server_fn_s == pytest.approx(0.1)


@pytest.mark.parametrize(("entries", "upload_s"), [
    pytest.param([upload("qbench-0", 1000.05)], 0.005, id="its-own-upload"),
    pytest.param([upload("qbench-0", 1000.05), upload("qbench-0", 1000.06, 2.0)], 0.007, id="two-files"),
    pytest.param([upload("qbench-0", 900.0)], None, id="same-tag-an-older-run"),
    pytest.param([upload("qbench-1", 1000.05)], None, id="another-request's"),
    pytest.param([upload("qbench-0", 1000.05, upload_ms=None)], None, id="gradio-6.31-leaves-upload_ms-out"),
])
def test_uploads_join_by_tag_and_time(entries: list[dict[str, Any]], upload_s: float | None) -> None:
    r = rec(0)
    attach([r], [trace("e0"), *entries])
    assert r.server_upload_s == (None if upload_s is None else pytest.approx(upload_s))


def test_records_with_phases_round_trip_and_an_old_file_reads_them_as_none(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    r = rec(0)
    attach([r], [trace("e0", forward_ms=4.0, batch_size=8), upload("qbench-0", 1000.05)])
    write_parquet([r], tmp_path / "records.parquet")
    assert read_parquet(tmp_path / "records.parquet") == [r]
    phases = [name for name in records_table([r]).schema.names
              if name.startswith("server_") or name == "client_only_s"]
    v3 = records_table([r]).drop_columns(phases).replace_schema_metadata({b"qbench_schema_version": b"3"})
    pq.write_table(v3, tmp_path / "v3.parquet")
    old = read_parquet(tmp_path / "v3.parquet")[0]
    assert old.server_fn_s is None and old.server_batch_size is None and old.client_only_s is None
    assert old.event_id == "e0"


def test_the_store_keeps_reads_on_disk_writes_each_entry_once_and_joins_from_there() -> None:
    store = TraceStore()
    store.add([trace("e0"), trace("e1")])
    store.add([trace("e1", fn_call_ms=200.0), trace("e2"), upload("qbench-0", 1000.05)])  # reads overlap
    store.add([trace("e0", fn_call_ms=300.0)])  # also in an older read than the last one
    assert store.written == 4 and store.predictions == 3
    assert [t["event_id"] for t in store] == ["e0", "e1", "e2", "u-qbench-0-1000.05"]
    records = [rec(0), rec(1), rec(2), rec(3)]
    assert attach(records, store) == 3 and records[0].server_fn_s == pytest.approx(0.1)
    assert records[0].server_upload_s == pytest.approx(0.005)
    store.close()
    assert not store and list(store) == []


# ---------------------------------------------------------------- the summary


def test_where_the_time_went_per_endpoint_and_absent_phases_are_left_out() -> None:
    a, b, c = rec(0), rec(1), rec(2)
    c.endpoint = "/other"
    attach([a, b], [trace("e0", fn_call_ms=100.0), trace("e1", fn_call_ms=300.0)])
    report = TraceReport("traces", traces=2, expected=3, matched=2, note="1 had no trace")
    summary = summarize([a, b, c], server_traces=report)
    assert summary.server_phases["server_fn_s"].p50 == pytest.approx(0.2)
    assert "server_forward_s" not in summary.server_phases and "server_upload_s" not in summary.server_phases
    assert summary.endpoints["/predict"].server_phases["server_fn_s"].count == 2
    assert summary.endpoints["/other"].server_phases == {}  # no phases: the section is omitted
    back = Summary.from_dict(summary.to_dict())
    assert back.server_traces == report and back.server_phases == summary.server_phases
    assert Summary.from_dict({}).server_traces is None  # a summary.json of an older qbench


def test_run_info_keeps_the_trace_report() -> None:
    report = TraceReport("monitoring", note="hint")
    info = RunInfo.from_dict({"target": "http://x", "server_traces": report.to_dict()})
    assert info.server_traces == report and info.to_dict()["server_traces"] == report.to_dict()
    assert RunInfo.from_dict({"server_traces": "junk"}).server_traces is None


# ---------------------------------------------------------------- reading a server


@pytest.fixture
def stand_in() -> Iterator[tuple[str, dict[str, Any]]]:
    """A server with the trace endpoint and /monitoring/summary, each switchable: state["traces"] (None:
    404), state["monitoring"] (None: 404); state["asked"] keeps every last_n asked for."""
    state: dict[str, Any] = {"traces": [], "monitoring": None, "asked": []}

    async def traces(request: web.Request) -> web.Response:
        if state["traces"] is None:
            raise web.HTTPNotFound()
        if isinstance(state["traces"], int):  # a status: refused
            return web.json_response({"detail": "Not authenticated"}, status=state["traces"])
        last_n = int(request.query.get("last_n", BUFFER))
        state["asked"].append(last_n)
        return web.json_response(state["traces"][-last_n:])

    async def monitoring(request: web.Request) -> web.Response:
        if state["monitoring"] is None:
            raise web.HTTPNotFound()
        return web.json_response(state["monitoring"])

    app = web.Application()
    app.add_routes([web.get("/gradio_api/profiling/traces", traces),
                    web.get("/monitoring/summary", monitoring)])
    with serve_aiohttp(app) as url:
        yield url, state


GRADIO = {"gradio": {"api_prefix": "/gradio_api", "version": "6.31.0"}}


Server = tuple[str, dict[str, Any]]


def test_collector_reads_after_the_run_and_says_what_was_missing(stand_in: Server) -> None:
    url, state = stand_in
    state["traces"] = [trace("e0"), trace("e1")]
    records = [rec(0), rec(1), rec(2)]
    collector = TraceCollector(url)
    collector.point_at(GRADIO)
    collector.finish([])  # nothing to join: nothing asked
    assert state["asked"] == []
    report = TraceCollector(url).finish(records)
    assert (report.source, report.matched, report.expected) == ("traces", 2, 3)
    assert "1 had no trace" in report.line() and records[0].server_fn_s == pytest.approx(0.1)
    batched = TraceCollector(url)
    batched.point_at({**GRADIO, "config": {"dependencies": [{"api_name": "predict", "batch": True}]}})
    assert "a batch of a batched function once" in batched.finish([rec(0), rec(1), rec(2)]).line()


def test_collector_reads_during_a_long_run(stand_in: Server) -> None:
    url, state = stand_in
    state["traces"] = [trace("e0")]
    collector = TraceCollector(url, every=10)
    stop = collector.watching(lambda stats: "stop" if stats.sent > 100 else None)
    assert stop(LiveStats(sent=5)) is None and collector.fetches_during_run == 0
    assert stop(LiveStats(sent=12)) is None and collector.fetches_during_run == 1
    assert collector._thread is not None
    collector._thread.join()
    state["traces"] = [trace("e1")]  # e0 has left the server's buffer since
    report = collector.finish([rec(0), rec(1)])
    assert report.matched == 2 and report.fetches_during_run == 1 and stop(LiveStats(sent=500)) == "stop"
    # a tick after finish() reads nothing: it once started a read on a new client nobody closed, whose
    # connection held the server's shutdown past its 10 s (a fresh-clone run's teardown error)
    assert collector.fetches_during_run == 1 and collector._http is None


def test_uploads_without_an_event_id_are_kept_apart(stand_in: Server) -> None:
    """The reference server's upload entries all have event_id "": each still counts."""
    url, state = stand_in
    state["traces"] = [{**upload("qbench-0", 1000.05), "event_id": ""},
                       {**upload("qbench-0", 1000.06, 2.0), "event_id": ""}, trace("e0")]
    records = [rec(0)]
    assert TraceCollector(url).finish(records).matched == 1
    assert records[0].server_upload_s == pytest.approx(0.007)


def test_without_traces_monitoring_per_function_and_a_hint(stand_in: Server) -> None:
    url, state = stand_in
    state["traces"] = None
    state["monitoring"] = {"functions": {"predict": {"success_rate": 1.0, "total_requests": 40,
                                                     "process_time_percentiles": {"50th": 0.1, "90th": 0.2,
                                                                                  "99th": 0.3}}}}
    collector = TraceCollector(url)
    collector.point_at({"gradio": {"api_prefix": "/gradio_api", "version": "5.49.1"}})
    report = collector.finish([rec(0)])
    assert report.source == "monitoring" and report.functions["predict"].p90_s == 0.2
    assert "GRADIO_PROFILING=1" in report.line() and "5.49.1" in report.line()
    state["monitoring"] = None
    assert TraceCollector(url).finish([rec(0)]).source == "none"
    state["traces"] = 401  # behind a login the collector could not pass on: no misleading hint
    refused = TraceCollector(url).finish([rec(0)])
    assert refused.source == "none" and "HTTP 401" in refused.line()
    assert "GRADIO_PROFILING" not in refused.line()


def test_a_target_that_does_not_answer_never_fails_the_run() -> None:
    report = TraceCollector("http://127.0.0.1:9").finish([rec(0)])  # nothing listens on port 9
    assert report.source == "none" and report.note


def test_an_http_target_is_not_asked() -> None:
    collector = TraceCollector("http://127.0.0.1:9")
    collector.point_at({"endpoint": "POST /predict"})
    assert collector.finish([rec(0)]) == TraceReport()


# ---------------------------------------------------------------- the reference server, end to end


def test_reference_server_records_carry_its_batch_phases_and_uploads(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """...joined at the end of the run column by column: the run reads no record back as an object
    (a Gradio run of hours did, ~1.3 KB a request, to join its traces)."""
    from qbench.run import pipeline
    from qbench.run.pipeline import run_scenario
    from reference_server.settings import synthetic_settings
    from reference_server.testing import serve_in_thread
    from tests.run.conftest import scenario

    functions = [{"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 5.0},
                  "batch": True, "max_batch_size": 8, "concurrency_limit": 1}]
    with serve_in_thread(synthetic_settings(functions=functions)) as server:
        run = scenario(target=server.url, endpoint={"api_name": "classify"},
                       payload={"inputs": [{"image": {"width": 64, "height": 48}}]},
                       load={"users": 4, "duration": 1.5, "warmup": 0})
        with monkeypatch.context() as during:
            during.setattr(pipeline, "read_records", lambda *_: pytest.fail("the end of run read records"))
            result = run_scenario(run, out_dir=tmp_path / "run", live=False)
    ok = [r for r in result.records if r.ok]
    assert ok and result.summary.server_traces is not None
    assert result.summary.server_traces.matched == result.summary.server_traces.expected
    for r in ok:
        assert r.server_forward_s is not None and r.server_forward_s >= 0.004
        assert r.server_batch_size is not None and 1 <= r.server_batch_size <= 8
        assert r.server_prepare_s is not None and r.server_upload_s is not None and r.server_upload_s > 0
    assert "server_forward_s" in result.summary.server_phases


# ---------------------------------------------------------------- the join, column by column


def joined_run(seed: int, n: int) -> tuple[list[RequestRecord], list[dict[str, Any]]]:
    """Records and the traces a server gave for them, with the join's corners: a trace read twice with
    other figures (the last wins), two records of one event id, a trace of another run, records
    without an event id or never started, the reference server's extras (0 ms as none, batch sizes),
    records whose protocol set a batch size already, uploads in and out of their window."""
    import random

    rng = random.Random(seed)
    records = [rec(i, sent=i * 0.01, started=i * 0.01 + 0.005, done=i * 0.01 + 0.05) for i in range(n)]
    records[3].event_id = records[2].event_id  # two records of one event
    records[5].event_id = None
    records[7].started_at_s = None
    for r in records[::4]:
        r.server_batch_size = 8  # the protocol's own figure, overwritten where a trace matches
    traces: list[dict[str, Any]] = []
    for r in records:
        if r.event_id is None or rng.random() < 0.1:
            continue  # no trace read for it
        stamp = 1000.0 + (r.sent_at_s or 0.0) + 0.005
        extra = {"prepare_ms": 0.0, "forward_ms": rng.choice([0.0, 3.5]),
                 "batch_size": rng.choice([1, 4, 4.0])}
        if rng.random() < 0.5:
            extra["upload_ms"] = 1.5
        traces.append(trace(r.event_id, stamp=stamp, total_ms=rng.uniform(50, 150), **extra))
        if rng.random() < 0.3:
            traces.append(upload(f"qbench-{r.request_id}", stamp - rng.choice([0.002, 5.0])))
    traces += [trace(records[10].event_id or "", total_ms=999.0, queue_wait_ms=1.0),  # read again: it wins
               trace("another-run-7")]
    return records, traces


@pytest.mark.parametrize(("seed", "n"), [(1, 200), (2, 1500)])
def test_the_column_join_writes_what_the_record_join_writes(seed: int, n: int, tmp_path: Path) -> None:
    """PhaseJoin over a sealed records.parquet: the same rows matched and, once written, the same file
    (every stored field and derived phase) as attach onto the records and write_parquet."""
    from qbench.run.records.columns import Columns
    from qbench.run.results.server_phases import PhaseJoin, matched

    records, traces = joined_run(seed, n)
    write_parquet(records, tmp_path / "records.parquet")
    join = PhaseJoin(tmp_path / "records.parquet")
    hit = join.attach(traces)
    assert hit == attach(records, traces)  # the records now carry the phases
    assert (join.expected(), join.matched()) == (expected(records), matched(records))
    join.write()
    write_parquet(records, tmp_path / "want.parquet")
    import pyarrow.parquet as pq

    got, want = pq.read_table(tmp_path / "records.parquet"), pq.read_table(tmp_path / "want.parquet")
    differ = [name for name in want.column_names if not got.column(name).equals(want.column(name))]
    assert got.schema == want.schema and not differ, differ
    assert read_parquet(tmp_path / "records.parquet") == records
    assert Columns.read(tmp_path / "records.parquet").floats("client_only_s").tolist() == pytest.approx(
        Columns.of(records).floats("client_only_s").tolist(), nan_ok=True, rel=0, abs=0)
