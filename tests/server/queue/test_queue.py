"""Queue semantics, in process: limits, groups, max_threads, batching, max_size, ETA, errors, cancel."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest

from reference_server.http.server_state import build_functions
from reference_server.io.components import FileStore
from reference_server.queue.queue import EventQueue, QueueFullError
from tests.server.queue_harness import drain, of, read_until_done, run_queue, settings


def sleep_fn(name: str, ms: float = 100, **kw: object) -> dict[str, object]:
    return {"api_name": name, "workload": "sleep", "params": {"base_ms": ms}, **kw}


def test_limit_one_serialises() -> None:
    async def body(q: EventQueue) -> None:
        ids = {q.push("s", q.functions[0], [str(i)]).id for i in range(3)}
        await asyncio.sleep(0.02)
        group = q.groups["fn:a"]
        assert (len(group.running), len(group.waiting)) == (1, 2)
        msgs = await read_until_done(q, "s", ids)
        done = [m for m in msgs if m["msg"] == "process_completed"]
        starts = [m for m in msgs if m["msg"] == "process_starts"]
        # each later start comes after the previous completion
        for prev_done, nxt_start in zip(done, starts[1:], strict=False):
            assert nxt_start["_t"] >= prev_done["_t"]

    run_queue(settings([sleep_fn("a", 50)]), body)


def test_limit_n_runs_n_and_none_is_unlimited() -> None:
    async def body(q: EventQueue) -> None:
        for _ in range(5):
            q.push("s", q.functions[0], ["x"])
            q.push("s", q.functions[1], ["x"])
        await asyncio.sleep(0.02)
        assert len(q.groups["fn:three"].running) == 3
        assert len(q.groups["fn:three"].waiting) == 2
        assert len(q.groups["fn:free"].running) == 5

    run_queue(
        settings(
            [sleep_fn("three", 200, concurrency_limit=3), sleep_fn("free", 200, concurrency_limit=None)]
        ),
        body,
    )


def test_default_concurrency_limit_applies() -> None:
    async def body(q: EventQueue) -> None:
        for _ in range(4):
            q.push("s", q.functions[0], ["x"])
        await asyncio.sleep(0.02)
        assert len(q.groups["fn:a"].running) == 2

    run_queue(settings([sleep_fn("a", 200)], queue={"default_concurrency_limit": 2}), body)


def test_concurrency_id_shares_the_lowest_pushed_limit() -> None:
    fns = [
        sleep_fn("wide", 200, concurrency_id="g", concurrency_limit=3),
        sleep_fn("narrow", 200, concurrency_id="g", concurrency_limit=1),
    ]

    async def only_wide(q: EventQueue) -> None:
        for _ in range(4):
            q.push("s", q.functions[0], ["x"])
        await asyncio.sleep(0.02)
        assert q.groups["g"].limit == 3  # lazy: "narrow" was never pushed
        assert len(q.groups["g"].running) == 3

    async def both(q: EventQueue) -> None:
        q.push("s", q.functions[0], ["x"])
        q.push("s", q.functions[1], ["x"])
        q.push("s", q.functions[0], ["x"])
        await asyncio.sleep(0.02)
        assert q.groups["g"].limit == 1
        assert len(q.groups["g"].running) == 1

    run_queue(settings(fns), only_wide)
    run_queue(settings(fns), both)


def test_max_threads_caps_running_jobs_across_groups() -> None:
    fns = [sleep_fn(f"f{i}", 200, concurrency_limit=None) for i in range(3)]

    async def body(q: EventQueue) -> None:
        for fn in q.functions:
            q.push("s", fn, ["x"])
            q.push("s", fn, ["x"])
        await asyncio.sleep(0.02)
        assert q.running_jobs == 2
        assert q.waiting_count == 4

    run_queue(settings(fns, launch={"max_threads": 2}), body)


def test_burst_forms_greedy_batches_of_one_function() -> None:
    async def body(q: EventQueue) -> None:
        events = [q.push("s", q.functions[0], [f"x{i}"]) for i in range(10)]
        await asyncio.sleep(0.02)
        assert [len(j.events) for j in q.groups["fn:b"].running] == [4]
        msgs = await read_until_done(q, "s", {e.id for e in events})
        for i, e in enumerate(events):
            (done,) = of(msgs, e.id, "process_completed")
            assert done["output"]["data"] == [f"x{i}"]
            assert done["output"]["is_generating"] is None  # Gradio: null for batch functions
        starts = [m for m in msgs if m["msg"] == "process_starts"]
        assert len(starts) == 10

    run_queue(settings([sleep_fn("b", 30, batch=True, max_batch_size=4)]), body)


def test_batch_wait_extension_fills_the_batch() -> None:
    async def body(q: EventQueue) -> None:
        first = q.push("s", q.functions[0], ["a"])
        await asyncio.sleep(0.03)
        assert first.job is None  # still waiting for company
        rest = [q.push("s", q.functions[0], [c]) for c in "bc"]
        await asyncio.sleep(0.15)
        assert first.job is not None and len(first.job.events) == 3
        await read_until_done(q, "s", {first.id, *(e.id for e in rest)})

    run_queue(settings([sleep_fn("b", 20, batch=True, max_batch_size=4, batch_wait_ms=120)]), body)


def test_max_size_counts_waiting_events_only() -> None:
    async def body(q: EventQueue) -> None:
        q.push("s", q.functions[0], ["x"])
        await asyncio.sleep(0.02)  # running: not counted
        q.push("s", q.functions[0], ["x"])
        q.push("s", q.functions[0], ["x"])
        with pytest.raises(QueueFullError, match=r"^Queue is full. Max size is 2 and size is 2.$"):
            q.push("s", q.functions[0], ["x"])

    run_queue(settings([sleep_fn("a", 200)], queue={"max_size": 2}), body)


def test_eta_follows_gradio_formula() -> None:
    async def body(q: EventQueue) -> None:
        fn = q.functions[0]
        fn.job_time.add(1.0)  # known average: 1 s
        e1 = q.push("s", fn, ["1"])
        await asyncio.sleep(0.01)
        e2, e3 = q.push("s", fn, ["2"]), q.push("s", fn, ["3"])
        msgs = await read_until_done(q, "s", {e1.id})
        avg_after_e1 = fn.job_time.mean
        (est1,) = of(msgs, e1.id, "estimation")
        assert (est1["rank"], est1["queue_size"], est1["rank_eta"]) == (0, 1, 1.0)
        assert of(msgs, e1.id, "process_starts")[0]["eta"] == 1.0
        est2, est3 = of(msgs, e2.id, "estimation")[0], of(msgs, e3.id, "estimation")[0]
        # avg + wait_so_far + time until the running job ends (~1 s minus the 10 ms it has run)
        assert (est2["rank"], est2["queue_size"]) == (0, 1)
        assert est2["rank_eta"] == pytest.approx(1.99, abs=0.05)
        assert (est3["rank"], est3["queue_size"]) == (1, 2)
        assert est3["rank_eta"] == pytest.approx(2.99, abs=0.05)
        # after e1 completes, e2 is dispatched and e3 gets a broadcast: rank 0 of 1
        more = await read_until_done(q, "s", {e2.id})
        broadcast = of(msgs + more, e3.id, "estimation")[-1]
        assert (broadcast["rank"], broadcast["queue_size"]) == (0, 1)
        assert of(more, e2.id, "process_starts")[0]["eta"] == avg_after_e1

    run_queue(settings([sleep_fn("a", 100)]), body)


def test_eta_is_null_without_an_average() -> None:
    async def body(q: EventQueue) -> None:
        e1 = q.push("s", q.functions[0], ["1"])
        msgs = await read_until_done(q, "s", {e1.id})
        assert of(msgs, e1.id, "estimation")[0]["rank_eta"] is None
        assert of(msgs, e1.id, "process_starts")[0]["eta"] is None

    run_queue(settings([sleep_fn("a", 10)]), body)


@pytest.mark.parametrize(
    ("params", "show_error", "output", "title"),
    [
        ({"message": "boom"}, False, {"error": None}, "Error"),
        ({"message": "boom"}, True, {"error": "boom", "visible": True}, "Error"),
        (
            {"message": "bad", "user_visible": True, "title": "Oops", "duration": 5},
            False,
            {"error": "bad", "duration": 5, "visible": True, "title": "Oops"},
            "Oops",
        ),
    ],
)
def test_error_payloads(
    params: dict[str, object], show_error: bool, output: dict[str, object], title: str
) -> None:
    async def body(q: EventQueue) -> None:
        e = q.push("s", q.functions[0], ["x"])
        msgs = await read_until_done(q, "s", {e.id})
        (done,) = of(msgs, e.id, "process_completed")
        assert (done["success"], done["output"], done["title"]) == (False, output, title)

    run_queue(
        settings([{"api_name": "f", "workload": "fail", "params": params}], show_error=show_error), body
    )


def test_one_exception_fails_the_whole_batch() -> None:
    async def body(q: EventQueue) -> None:
        events = [q.push("s", q.functions[0], [str(i)]) for i in range(3)]
        msgs = await read_until_done(q, "s", {e.id for e in events})
        outputs = [of(msgs, e.id, "process_completed")[0] for e in events]
        assert all(
            o["success"] is False and o["output"] == {"error": "boom", "visible": True} for o in outputs
        )

    fn = {"api_name": "f", "workload": "fail", "params": {"message": "boom"}, "batch": True}
    run_queue(settings([fn], show_error=True), body)


def test_generator_message_order_and_diffs() -> None:
    async def body(q: EventQueue) -> None:
        e = q.push("s", q.functions[0], ["go"])
        msgs = await read_until_done(q, "s", {e.id})
        kinds = [m["msg"] for m in msgs]
        assert kinds == ["estimation", "process_starts"] + ["process_generating"] * 3 + ["process_completed"]
        gens = [m["output"]["data"] for m in msgs if m["msg"] == "process_generating"]
        assert gens == [["go"], [[["append", [], " 1"]]], [[["append", [], " 2"]]]]
        assert msgs[-1]["output"]["data"] == ["go 1 2"]
        assert msgs[-1]["output"]["is_generating"] is False

    run_queue(
        settings([{"api_name": "g", "workload": "stream", "params": {"chunks": 3, "interval_ms": 5}}]), body
    )


def test_cancel_waiting_event() -> None:
    async def body(q: EventQueue) -> None:
        e1 = q.push("s", q.functions[0], ["1"])
        e2 = q.push("s", q.functions[0], ["2"])
        await asyncio.sleep(0.01)
        assert q.cancel("s", e2.id)
        msgs = await read_until_done(q, "s", {e1.id, e2.id})
        assert of(msgs, e2.id, "process_completed")[0]["output"] == {}
        assert of(msgs, e2.id, "process_starts") == []
        assert of(msgs, e1.id, "process_completed")[0]["output"]["data"] == ["1"]
        assert q.waiting_count == 0

    run_queue(settings([sleep_fn("a", 100)]), body)


def test_cancel_running_event_frees_its_slot() -> None:
    async def body(q: EventQueue) -> None:
        e1 = q.push("s", q.functions[0], ["1"])
        e2 = q.push("s", q.functions[0], ["2"])
        await asyncio.sleep(0.02)
        assert q.cancel("s", e1.id)
        cancelled_at = time.perf_counter()
        msgs = await read_until_done(q, "s", {e1.id, e2.id}, timeout_s=5)
        (done1,) = of(msgs, e1.id, "process_completed")
        assert (done1["output"], done1["success"]) == ({}, True)
        (started2,) = of(msgs, e2.id, "process_starts")
        assert started2["_t"] - cancelled_at < 0.5  # freed at once, not when e1's 1 s sleep would have ended
        assert of(msgs, e2.id, "process_completed")[0]["output"]["data"] == ["2"]
        assert not q.cancel("s", e1.id)  # already gone

    run_queue(settings([sleep_fn("a", 1000)]), body)


def test_disconnect_drops_waiting_and_silences_running() -> None:
    async def body(q: EventQueue) -> None:
        e1 = q.push("s", q.functions[0], ["1"])
        e2 = q.push("s", q.functions[0], ["2"])
        other = q.push("t", q.functions[0], ["3"])
        await asyncio.sleep(0.01)
        q.disconnect("s")
        assert "s" not in q.sessions
        assert not e1.alive and not e2.alive
        assert q.groups["fn:a"].waiting == [other]
        msgs = await read_until_done(q, "t", {other.id})
        assert of(msgs, other.id, "process_completed")[0]["success"] is True

    run_queue(settings([sleep_fn("a", 50)]), body)


def test_reconfigure_applies_new_limits() -> None:
    async def body(q: EventQueue) -> None:
        for _ in range(4):
            q.push("s", q.functions[0], ["x"])
        await asyncio.sleep(0.02)
        assert len(q.groups["fn:a"].running) == 1
        new = q.settings.model_copy(deep=True)
        new.functions[0].concurrency_limit = 3
        q.reconfigure(new)
        await asyncio.sleep(0.02)
        assert len(q.groups["fn:a"].running) == 3

    run_queue(settings([sleep_fn("a", 300)]), body)


def test_sessions_lru_keeps_readers_and_evicts_idle_first() -> None:
    from reference_server.queue.sessions import Sessions

    sessions = Sessions(capacity=3)
    sessions.open("read").readers = 1
    sessions.add_pending("busy", "e1")
    sessions.open("idle")
    sessions.add_pending("new", "e2")  # over capacity: the idle session goes, though "busy" is older
    assert list(sessions._by_hash) == ["read", "busy", "new"]
    sessions.add_pending("new2", "e3")  # nothing idle: the LRU session whose events all finished goes
    assert list(sessions._by_hash) == ["read", "new", "new2"]
    sessions.is_live = {"e2", "e3", "e4"}.__contains__
    sessions.add_pending("new3", "e4")  # every other session has a reader or a live event: kept
    assert list(sessions._by_hash) == ["read", "new", "new2", "new3"]


def test_numeric_status_update_rate_broadcasts_periodically_not_on_dispatch() -> None:
    async def body(q: EventQueue) -> None:
        events = [q.push("s", q.functions[0], [str(i)]) for i in range(3)]
        await asyncio.sleep(0.25)
        msgs = await read_until_done(q, "s", {events[0].id})
        third = of(msgs, events[2].id, "estimation")
        assert len(third) >= 3  # the push estimation plus periodic ones every 50 ms

    async def no_tick_yet(q: EventQueue) -> None:
        events = [q.push("s", q.functions[0], [str(i)]) for i in range(3)]
        msgs = await read_until_done(q, "s", {events[0].id})
        msgs += [await asyncio.wait_for(q.sessions.get("s").queue.get(), 2)]  # type: ignore[union-attr]
        assert msgs[-1]["msg"] == "process_starts" and msgs[-1]["event_id"] == events[1].id
        await asyncio.sleep(0.05)
        # e2 was dispatched, yet e3 has only its push estimation: no broadcast on dispatch in this mode
        assert len(of(msgs + drain(q, "s"), events[2].id, "estimation")) == 1

    run_queue(settings([sleep_fn("a", 200)], queue={"status_update_rate": 0.05}), body)
    run_queue(settings([sleep_fn("a", 200)], queue={"status_update_rate": 30}), no_tick_yet)


@pytest.mark.parametrize(
    "fn",
    [
        sleep_fn("a", 10, params={"base_ms": 10, "sync": True}),
        {"api_name": "a", "workload": "cpu", "params": {"n": 16}},
        {"api_name": "a", "workload": "stream", "params": {"chunks": 2, "interval_ms": 1, "sync": True}},
        sleep_fn("a", 10, params={"base_ms": 10, "sync": True}, batch=True),
    ],
)
def test_sync_workloads_run_in_threads(fn: dict[str, object]) -> None:
    async def body(q: EventQueue) -> None:
        events = [q.push("s", q.functions[0], [f"in{i}"]) for i in range(3)]
        msgs = await read_until_done(q, "s", {e.id for e in events})
        for i, e in enumerate(events):
            (done,) = of(msgs, e.id, "process_completed")
            assert done["success"] is True
            assert str(done["output"]["data"][0]).startswith(f"in{i}")

    run_queue(settings([fn], queue={"default_concurrency_limit": 2}), body)


def test_cancel_one_member_of_a_running_batch() -> None:
    async def body(q: EventQueue) -> None:
        e1, e2 = q.push("s", q.functions[0], ["1"]), q.push("s", q.functions[0], ["2"])
        await asyncio.sleep(0.02)
        assert e1.job is e2.job and e1.job is not None
        assert q.cancel("s", e1.id)
        msgs = await read_until_done(q, "s", {e1.id, e2.id})
        assert of(msgs, e1.id, "process_completed")[0]["output"] == {}
        assert of(msgs, e2.id, "process_completed")[0]["output"]["data"] == ["2"]

    run_queue(settings([sleep_fn("b", 100, batch=True)]), body)


def test_completed_metric_counts_outcomes() -> None:
    async def body(q: EventQueue) -> None:
        ok = q.push("s", q.functions[0], ["x"])
        bad = q.push("s", q.functions[1], ["x"])
        gone = q.push("s", q.functions[0], ["y"])
        q.cancel("s", gone.id)
        await read_until_done(q, "s", {ok.id, bad.id, gone.id})
        await asyncio.sleep(0.01)
        counts = {
            (s.labels["fn"], s.labels["outcome"]): s.value
            for metric in q.metrics.completed.collect()
            for s in metric.samples
            if s.name.endswith("_total")
        }
        assert counts == {("a", "ok"): 1.0, ("f", "error"): 1.0}

    run_queue(settings([sleep_fn("a", 20), {"api_name": "f", "workload": "fail"}]), body)


def test_push_eta_shortcut_matches_the_full_formula() -> None:
    from reference_server.queue.runtime import Event, Group, Job

    s = settings([sleep_fn("x", 1, concurrency_id="g"), sleep_fn("y", 1, concurrency_id="g")])
    fx, fy = build_functions(s)
    fx.job_time.add(0.3)
    fy.job_time.add(0.7)
    group = Group("g")
    for fn in (fx, fy):
        group.admit_function(fn, 2)
    group.running = [Job([], fx, started_at=100.0), Job([], fy, started_at=100.2)]
    for i, fn in enumerate([fx, fy, fy, fx, fy]):
        group.enqueue(Event(f"e{i}", "s", fn, ["d"]))
        full = list(group.estimations(now=100.1))[-1][2]
        assert group.eta_of_last(now=100.1) == pytest.approx(full)
    group.remove([group.waiting[1], group.waiting[3]])
    assert group.waiting_per_fn == {fx.index: 1, fy.index: 2}
    assert group.eta_of_last(now=100.1) == pytest.approx(list(group.estimations(now=100.1))[-1][2])
    fresh = build_functions(s)[0]  # a function without an average makes every later ETA null
    group.admit_function(fresh, 2)
    group.enqueue(Event("e9", "s", fresh, ["d"]))
    assert group.eta_of_last(now=100.1) is None


def test_reconfigure_refuses_to_change_the_functions() -> None:
    async def body(q: EventQueue) -> None:
        new = q.settings.model_copy(deep=True)
        new.functions[0].concurrency_id = "other"
        with pytest.raises(ValueError, match="cannot change the functions"):
            q.reconfigure(new)

    run_queue(settings([sleep_fn("a", 10)]), body)


def test_cancel_in_the_dispatch_turn_still_frees_the_slot() -> None:
    """A job task cancelled before its first step never runs its body; its slot must be freed anyway."""

    async def body(q: EventQueue) -> None:
        fn = q.functions[0]
        start = q._start

        def start_then_cancel(group: object, events: list[object]) -> None:
            start(group, events)  # type: ignore[arg-type]
            q.cancel("s", events[0].id)  # type: ignore[attr-defined]

        q._start = start_then_cancel  # type: ignore[method-assign]
        q.push("s", fn, ["x"])
        await asyncio.sleep(0.2)
        group = q.groups["fn:a"]
        assert (q.running_jobs, len(group.running), len(q.events)) == (0, 0, 0)
        q._start = start  # type: ignore[method-assign]
        second = q.push("s", fn, ["y"])
        await asyncio.sleep(0.3)
        assert second.job is not None and not group.waiting  # the group still dispatches

    run_queue(settings([{"api_name": "a", "workload": "sleep", "params": {"base_ms": 10}}]), body)


def test_any_preprocessing_failure_is_that_events_input_error() -> None:
    """A PNG whose header claims 20000x20000 trips PIL's decompression-bomb guard (not a WorkloadInputError):
    the event still gets a failed process_completed, and the session its close."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
    url = "data:image/png;base64," + base64.b64encode(png).decode()

    async def body(q: EventQueue) -> None:
        fn = q.functions[0]
        event = q.push("s", fn, [url] + [None] * (len(fn.workload.inputs) - 1))
        messages = await read_until_done(q, "s", {event.id}, timeout_s=10)
        final = [msg for msg in messages if msg.get("event_id") == event.id][-1]
        assert final["msg"] == "process_completed" and final["success"] is False
        assert "invalid input" in final["output"]["error"]

    run_queue(settings([{"api_name": "a", "workload": "imageop"}]), body)


def test_the_queue_depth_gauge_is_the_groups_waiting_count_when_read() -> None:
    def depth(q: EventQueue) -> float:
        [family] = [f for f in q.metrics.queue_depth.collect() if f.name == "qbench_queue_depth"]
        return sum(s.value for s in family.samples)

    async def body(q: EventQueue) -> None:
        fn = q.functions[0]
        running = q.push("a", fn, ["x"])
        await asyncio.sleep(0.05)  # dispatched: it runs (limit 1), the next ones wait
        assert running.job is not None
        second, third = q.push("b", fn, ["x"]), q.push("c", fn, ["x"])
        assert depth(q) == 2
        assert q.cancel("b", second.id)
        assert depth(q) == 1
        await read_until_done(q, "c", {third.id})
        assert depth(q) == 0

    run_queue(settings([sleep_fn("f", 100, concurrency_limit=1)]), body)


def test_a_batch_counts_each_of_its_events_in_the_completed_metric() -> None:
    async def body(q: EventQueue) -> None:
        fn = q.functions[0]
        events = [q.push(f"s{i}", fn, ["x"]) for i in range(3)]  # before the dispatcher runs: one batch
        for i, event in enumerate(events):
            await read_until_done(q, f"s{i}", {event.id})
        await asyncio.sleep(0.01)
        assert {e.trace.batch_size for e in events if e.trace is not None} == {3}
        counts = {s.labels["outcome"]: s.value for metric in q.metrics.completed.collect()
                  for s in metric.samples if s.name.endswith("_total")}
        assert counts == {"ok": 3.0}

    run_queue(settings([sleep_fn("b", 20, batch=True, max_batch_size=4)]), body)


def test_a_batch_deadline_within_a_millisecond_on_uvloop_still_lets_the_next_one_wait() -> None:
    """uvloop (the server's loop) answers call_at for a time under 0.5 ms away with a plain Handle, no
    when(): the next batch deadline asked for (a later event of a batch function) must not fail on it."""
    import uvloop

    async def main() -> tuple[str, bool]:
        with tempfile.TemporaryDirectory() as tmp:
            s = settings([sleep_fn("b", 20, batch=True, max_batch_size=4, batch_wait_ms=120)])
            queue = EventQueue(s, build_functions(s), FileStore(Path(tmp)))
            queue._wake_at(time.perf_counter() + 0.0002)  # rounds to 0 ms: uvloop calls it soon
            armed = type(queue._batch_timer).__name__
            queue._wake_at(time.perf_counter() + 0.05)
            await asyncio.sleep(0.01)
            return armed, queue._wake.is_set()

    armed, woke = uvloop.run(main())
    assert armed == "Handle" and woke
