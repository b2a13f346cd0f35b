"""Multi-step protocol flows (joins, cancels, disconnects at chosen moments) shared by the tests.

Each flow runs against one base URL and returns what it observed, so the conformance tests can
assert Gradio's semantics and the differential tests can compare two servers on the same flow.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson

from .driver import LiveSession, cancel, fn_indices, new_http, queue_status, start_session
from .scenarios import normalise

FLOW_TIMEOUT_S = 30.0


async def eta_bursts(url: str) -> tuple[LiveSession, LiveSession]:
    """Two bursts on the never-used `eta` function (0.2 s, limit 1): 3 jobs, then 2 jobs.

    Each burst joins back to back from one session, so it lands within milliseconds.
    """
    async with new_http() as http:
        index = (await fn_indices(http, url))["eta"]
        phases = []
        for n in (3, 2):
            session = await start_session(http, url, index, [[f"e{i}"] for i in range(n)])
            await asyncio.wait_for(session.reader, FLOW_TIMEOUT_S)
            phases.append(session)
        return phases[0], phases[1]


async def repeat_until_landed(flow: Any, url: str, attempts: int = 3) -> dict[str, Any]:
    """Run `flow(url)` until its result says `landed` (its steps ran in the intended window)."""
    for _ in range(attempts):
        result: dict[str, Any] = await flow(url)
        if result["landed"]:
            return result
    raise AssertionError(f"{flow.__name__} never ran in its intended window: machine too busy")


async def disconnect_flow(url: str) -> dict[str, Any]:
    """A holder runs `hold` (0.5 s); a second session queues two jobs behind it, then closes its stream.

    `landed`: both queue/status probes happened while the holder was still running.
    """
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        holder = await start_session(http, url, hold, [["h"]])
        await asyncio.sleep(0.05)
        leaver = await start_session(http, url, hold, [["y0"], ["y1"]], stop_after_s=0.1)
        before = (await queue_status(http, url))["queue_size"]
        await leaver.reader  # the client closes its stream after 0.1 s
        await asyncio.sleep(0.1)
        after = (await queue_status(http, url))["queue_size"]
        probed_at = time.monotonic()
        await holder.reader
        # Had the leaver's two jobs stayed queued, a new job would wait 2 x 0.5 s behind them.
        late = await start_session(http, url, hold, [["z"]])
        await late.reader
        return {
            "landed": probed_at < holder.trace.completed_at,
            "before": before,
            "after": after,
            "late_waited": late.trace.started_at - late.trace.joined_at > 0.4,
            "holder": holder.trace.kinds,
        }


async def cancel_flow(url: str) -> dict[str, Any]:
    """A holder runs `hold`; another session's waiting job is cancelled; then an unknown id is.

    `landed`: the cancel was answered while the holder was still running (the job was waiting).
    """
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        holder = await start_session(http, url, hold, [["h"]])
        await asyncio.sleep(0.05)
        waiter = await start_session(http, url, hold, [["w"]])
        await asyncio.sleep(0.05)
        reply = await cancel(http, url, waiter.stream.session_hash, hold, str(waiter.trace.event_id))
        cancelled_at = time.monotonic()
        await asyncio.wait_for(waiter.reader, 5)
        unknown = await cancel(http, url, "no-such-session", hold, "0" * 32)
        await holder.reader
        return {
            "landed": cancelled_at < holder.trace.completed_at,
            "reply": reply,
            "unknown": unknown,
            "waiter": waiter,
            "holder": holder,
        }


async def cancel_running_flow(url: str, fn: str = "hold") -> dict[str, Any]:
    """Session A runs `fn` (hold: 0.5 s; stream_long: ~0.9 s of chunks), session B waits behind it;
    A's running job is cancelled 0.1 s in.

    `landed`: the cancel was answered before A's job would have finished by itself.
    """
    async with new_http() as http:
        index = (await fn_indices(http, url))[fn]
        runner = await start_session(http, url, index, [["a"]])
        await asyncio.sleep(0.05)
        waiter = await start_session(http, url, index, [["b"]])
        await asyncio.sleep(0.05)
        reply = await cancel(http, url, runner.stream.session_hash, index, str(runner.trace.event_id))
        cancelled_at = time.monotonic()
        await asyncio.wait_for(asyncio.gather(runner.reader, waiter.reader), FLOW_TIMEOUT_S)
        return {
            "landed": cancelled_at < runner.trace.started_at + 0.4,
            "reply": reply,
            # how many chunks came before the cancel depends on timing: only whether any did is kept
            "runner": [normalise(m.body) for m in runner.trace.messages if m.msg != "process_generating"],
            "runner_generated": bool(runner.trace.all("process_generating")),
            "waiter_started_early": waiter.trace.started_at < runner.trace.started_at + 0.4,
            "waiter": [k for k in waiter.trace.kinds if k != "process_generating"],
        }


async def cancel_running_generator_flow(url: str) -> dict[str, Any]:
    """`cancel_running_flow` on the generator `stream_long`."""
    return await cancel_running_flow(url, "stream_long")


async def disconnect_running_flow(url: str) -> dict[str, Any]:
    """Session A runs `hold` (0.5 s) and closes its stream after 0.1 s; session B then joins `hold`.

    Gradio lets a disconnected session's running job finish (its result is dropped), so its slot
    stays taken: B starts only when A's job would have ended. `landed`: B joined before that.
    """
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        leaver = await start_session(http, url, hold, [["a"]], stop_after_s=0.1)
        await leaver.reader
        await asyncio.sleep(0.05)
        late = await start_session(http, url, hold, [["b"]])
        await asyncio.wait_for(late.reader, FLOW_TIMEOUT_S)
        a_started = leaver.trace.started_at
        return {
            "landed": late.trace.acked_at < a_started + 0.4,
            "b_waited_for_a": late.trace.started_at > a_started + 0.4,
            "b": late.trace.kinds,
        }


async def disconnect_generator_flow(url: str) -> dict[str, Any]:
    """Session A runs `stream_long` (10 chunks, 0.1 s apart) and disconnects after 0.15 s.

    Gradio stops a generator whose session left after its current step, freeing the slot: a job
    joined right after starts within a step or two, not after the ~0.9 s the generator would take.
    `landed`: the late job joined before A's generator would have finished.
    """
    async with new_http() as http:
        stream_long = (await fn_indices(http, url))["stream_long"]
        leaver = await start_session(http, url, stream_long, [["a"]], stop_after_s=0.15)
        await leaver.reader
        await asyncio.sleep(0.05)
        late = await start_session(http, url, stream_long, [["b"]])
        await asyncio.wait_for(late.reader, FLOW_TIMEOUT_S)
        a_started = leaver.trace.started_at
        return {
            "landed": late.trace.acked_at < a_started + 0.6,
            "late_started_early": late.trace.started_at < a_started + 0.6,
            "leaver_saw": leaver.trace.kinds[:3],
            "late_chunks": len(late.trace.all("process_generating")),
        }


async def cancel_then_ranks_flow(url: str) -> dict[str, Any]:
    """Two sessions wait behind a `hold` job; the first is cancelled. Is the second re-estimated?

    Gradio sends estimations on join and on dispatch only, so the second keeps its old rank until
    it starts. `landed`: the cancel came while the holder was still running.
    """
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        holder = await start_session(http, url, hold, [["h"]])
        await asyncio.sleep(0.05)
        first = await start_session(http, url, hold, [["w1"]])
        second = await start_session(http, url, hold, [["w2"]])
        await asyncio.sleep(0.05)
        await cancel(http, url, first.stream.session_hash, hold, str(first.trace.event_id))
        cancelled_at = time.monotonic()
        await asyncio.wait_for(asyncio.gather(holder.reader, first.reader, second.reader), FLOW_TIMEOUT_S)
        return {
            "landed": cancelled_at < holder.trace.completed_at,
            "second": [(m.body["rank"], m.body["queue_size"]) for m in second.trace.all("estimation")],
            "second_kinds": second.trace.kinds,
        }


async def raw_post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST a JSON body under /gradio_api; (status, JSON body or raw text)."""
    async with new_http() as http, http.post(f"{url}/gradio_api{path}", json=body) as resp:
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, raw.decode(errors="replace")


async def unknown_session(url: str) -> tuple[int, str, list[Any]]:
    """Open /queue/data for a session that never joined: (status, content-type, messages)."""
    async with new_http() as http:
        params = {"session_hash": "never-joined"}
        async with http.get(f"{url}/gradio_api/queue/data", params=params) as resp:
            lines: list[Any] = []
            try:
                async for line in resp.content:
                    if line.startswith(b"data:"):
                        lines.append(orjson.loads(line[5:]))
            except aiohttp.ClientPayloadError:
                pass  # Gradio aborts the response after the message
            return resp.status, resp.headers["content-type"], lines


async def cancel_all(http: aiohttp.ClientSession, url: str, session: LiveSession, fn_index: int) -> None:
    """Cancel every job of a session and wait for its stream to close."""
    for trace in reversed(session.stream.traces):
        await cancel(http, url, session.stream.session_hash, fn_index, str(trace.event_id))
    await asyncio.wait_for(session.reader, 5)


async def same_session_cancel_flow(url: str) -> dict[str, Any]:
    """One session: job 1 runs `hold`, job 2 waits; job 2 is cancelled. Does job 1 still complete?

    Gradio cancels every running task named `{session}_{fn_index}`, so job 1 is cancelled too and
    gets no message at all (its stream then never closes: read for 1.5 s only).
    """
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        session = await start_session(http, url, hold, [["one"], ["two"]], stop_after_s=1.5)
        await asyncio.sleep(0.15)
        first, second = session.stream.traces
        await cancel(http, url, session.stream.session_hash, hold, str(second.event_id))
        await session.reader
        return {"first": first.kinds, "second_completed": second.first("process_completed") is not None}


async def simple_api_call(url: str, api_name: str, data: list[Any]) -> list[tuple[str, Any]]:
    """POST /call/<api_name>, then read GET /call/<api_name>/<event_id>: [(event, data), ...]."""
    async with new_http() as http:
        async with http.post(f"{url}/gradio_api/call/{api_name}", json={"data": data}) as resp:
            event_id = (await resp.json())["event_id"]
        events: list[tuple[str, Any]] = []
        async with http.get(f"{url}/gradio_api/call/{api_name}/{event_id}") as resp:
            event = ""
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event != "heartbeat":
                    events.append((event, orjson.loads(line.split(":", 1)[1])))
        return events


async def direct_run(url: str, api_name: str, data: list[Any]) -> tuple[int, Any]:
    """POST /run/<api_name>: the non-queued call (status, body with durations normalised)."""
    status, body = await raw_post(url, f"/run/{api_name}", {"data": data})
    return status, normalise(body)


async def periodic_estimation_flow(url: str) -> dict[str, Any]:
    """Two sessions wait behind a `hold` job (0.5 s); when do they receive estimations?"""
    async with new_http() as http:
        hold = (await fn_indices(http, url))["hold"]
        holder = await start_session(http, url, hold, [["h"]])
        await asyncio.sleep(0.05)
        waiters = [await start_session(http, url, hold, [[f"w{i}"]]) for i in range(2)]
        await asyncio.wait_for(asyncio.gather(holder.reader, *(w.reader for w in waiters)), FLOW_TIMEOUT_S)
        last = waiters[1].trace
        waiting = [m.at for m in last.all("estimation") if m.at < last.started_at]
        return {
            "gaps_s": [b - a for a, b in zip(waiting, waiting[1:], strict=False)],
            "ranks": [m.body["rank"] for m in last.all("estimation")],
            "kinds": [w.trace.kinds[-2:] for w in waiters],
        }
