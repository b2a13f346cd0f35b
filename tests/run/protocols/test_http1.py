"""The lean HTTP/1.1 pool (qbench.run.protocols.http1) against a scripted raw server on loopback:
keep-alive reuse, the connection limit, refusals, streamed bodies, a server that closes or answers
garbage, and a cancelled request dropping its connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from qbench.run.protocols.http1 import Http1Error, Http1Pool
from qbench.run.records.schema import RequestRecord

Reply = Callable[[bytes], Awaitable[bytes | None]]  # request bytes -> response bytes (None: close)


def record() -> RequestRecord:
    return RequestRecord(request_id=0, user_id=0, session_id="", endpoint="e", warmup=False,
                         intended_at_s=0.0)


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def serve(reply: Reply, scenario: Callable[[str, dict[str, Any]], Awaitable[None]]) -> dict[str, Any]:
    """Run `scenario(url, stats)` against a raw server answering each request with `reply`."""
    stats: dict[str, Any] = {"connections": 0, "requests": []}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                request = head + await reader.readexactly(length)
                stats["requests"].append(request)
                answer = await reply(request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await scenario(f"http://127.0.0.1:{port}", stats)
    finally:
        server.close()
    return stats


def clock() -> Callable[[], float]:
    return asyncio.get_running_loop().time


def test_keep_alive_reuses_one_connection_and_sends_the_head_once_built() -> None:
    async def reply(request: bytes) -> bytes:
        return ok(b'{"ok": true}', b"Content-Type: application/json\r\n")

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url + "/echo?x=1", limit=4, connect_timeout_s=5)
        head = pool.head("POST", "/echo?x=1", {"Content-Type": "application/json", "X-Key": "v"})
        records = [record() for _ in range(5)]
        for r in records:
            exchange = await pool.send(head, b'{"a": 1}', r, clock())
            assert exchange.status == 200
        pool.close()
        assert all(r.bytes_received == 12 and r.http_status == 200 and r.joined_at_s for r in records)
        assert all(r.sent_at_s is not None and r.sent_at_s <= r.joined_at_s for r in records)  # type: ignore[operator]

    stats = asyncio.run(serve(reply, scenario))
    assert stats["connections"] == 1 and len(stats["requests"]) == 5
    first = stats["requests"][0]
    assert first.startswith(b"POST /echo?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"X-Key: v\r\n" in first and b"Content-Length: 8\r\n\r\n{\"a\": 1}" in first


def test_the_limit_caps_open_connections_and_waiters_get_the_next_free_one() -> None:
    async def reply(request: bytes) -> bytes:
        await asyncio.sleep(0.05)
        return ok(b"x")

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=2, connect_timeout_s=5)
        head = pool.head("GET", "/", {})
        results = await asyncio.gather(*(pool.send(head, None, record(), clock()) for _ in range(6)))
        assert [e.status for e in results] == [200] * 6
        pool.close()

    stats = asyncio.run(serve(reply, scenario))
    assert stats["connections"] == 2 and len(stats["requests"]) == 6
    assert b"Content-Length" not in stats["requests"][0]  # a GET without a body


def test_a_refusal_keeps_its_body_and_a_closing_server_is_not_reused() -> None:
    async def reply(request: bytes) -> bytes:
        body = b'{"detail": "Queue is full."}'
        return b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=1, connect_timeout_s=5)
        head = pool.head("POST", "/", {})
        for _ in range(2):
            r = record()
            exchange = await pool.send(head, b"{}", r, clock())
            assert exchange.status == 503 and bytes(exchange.error_body) == b'{"detail": "Queue is full."}'
            assert r.bytes_received == len(exchange.error_body)
        pool.close()

    stats = asyncio.run(serve(reply, scenario))
    assert stats["connections"] == 2  # Connection: close -> a new connection for the next request


def test_streamed_bodies_count_sse_events_and_chunks() -> None:
    sse = b"data: 1\n\ndata: 2\r\n\r\ndata: 3"
    chunks = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"

    async def reply(request: bytes) -> bytes:
        if request.startswith(b"GET /sse"):
            return ok(sse, b"Content-Type: text/event-stream; charset=utf-8\r\n")
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=1, connect_timeout_s=5)
        events, chunked = record(), record()
        await pool.send(pool.head("GET", "/sse", {}), None, events, clock())
        await pool.send(pool.head("GET", "/chunks", {}), None, chunked, clock())
        pool.close()
        assert (events.outputs, events.bytes_received) == (3, len(sse)) and events.first_output_at_s
        assert (chunked.outputs, chunked.bytes_received) == (2, 5)

    asyncio.run(serve(reply, scenario))


@pytest.mark.parametrize(("answer", "kind"), [
    (b"", "connect"),  # closed without a byte
    (b"NOT HTTP\r\n\r\n", "connect"),  # garbage before any status line
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "stream_broken"),  # half a body, then gone
], ids=["closed", "garbage", "truncated"])
def test_a_broken_answer_is_an_error_kind_not_a_crash(answer: bytes, kind: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Http1Pool(f"http://127.0.0.1:{port}", limit=1, connect_timeout_s=5)
        try:
            with pytest.raises(Http1Error) as info:
                await pool.send(pool.head("GET", "/", {}), None, record(), clock())
            assert info.value.kind == kind
        finally:
            pool.close()
            server.close()

    asyncio.run(scenario())


def test_a_body_that_runs_until_the_server_closes_completes() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello")
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        pool = Http1Pool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", 1, connect_timeout_s=5)
        r = record()
        try:
            assert (await pool.send(pool.head("GET", "/", {}), None, r, clock())).status == 200
        finally:
            pool.close()
            server.close()
        assert r.bytes_received == 5

    asyncio.run(scenario())


def test_a_cancelled_request_drops_its_connection_and_frees_the_slot() -> None:
    async def reply(request: bytes) -> bytes:
        if request.startswith(b"GET /slow"):
            await asyncio.sleep(1)
        return ok(b"x")

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=1, connect_timeout_s=5)
        slow = asyncio.ensure_future(pool.send(pool.head("GET", "/slow", {}), None, record(), clock()))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        exchange = await pool.send(pool.head("GET", "/fast", {}), None, record(), clock())
        assert exchange.status == 200
        pool.close()

    stats = asyncio.run(serve(reply, scenario))
    assert stats["connections"] == 2  # the cancelled exchange's connection was not reused


def test_nothing_listening_is_a_connect_error() -> None:
    async def scenario() -> None:
        pool = Http1Pool("http://127.0.0.1:9", limit=1, connect_timeout_s=2)
        with pytest.raises(Http1Error) as info:
            await pool.send(pool.head("GET", "/", {}), None, record(), clock())
        assert info.value.kind == "connect" and "127.0.0.1:9" in str(info.value)

    asyncio.run(scenario())


def test_only_plain_http_urls() -> None:
    with pytest.raises(ValueError, match="plain http://"):
        Http1Pool("https://example.com/", limit=1, connect_timeout_s=1)


def test_the_pool_runs_on_uvloop_too() -> None:
    """QBENCH_LOOP=uvloop: uvloop's transports are not asyncio.Transport subclasses."""
    uvloop = pytest.importorskip("uvloop")

    async def reply(request: bytes) -> bytes:
        return ok(b"hi")

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=1, connect_timeout_s=5)
        r = record()
        assert (await pool.send(pool.head("GET", "/", {}), None, r, clock())).status == 200
        pool.close()
        assert r.bytes_received == 2

    uvloop.run(serve(reply, scenario))


def test_a_waiter_cancelled_after_its_wake_up_passes_the_slot_on() -> None:
    async def reply(request: bytes) -> bytes:
        return ok(b"x")

    async def scenario(url: str, stats: dict[str, Any]) -> None:
        pool = Http1Pool(url, limit=1, connect_timeout_s=5)
        head = pool.head("GET", "/", {})
        held = await pool._acquire()  # the one connection, busy
        doomed = asyncio.ensure_future(pool.send(head, None, record(), clock()))
        last = asyncio.ensure_future(pool.send(head, None, record(), clock()))
        await asyncio.sleep(0.01)  # both wait for it
        pool._release(held)  # wakes `doomed` ...
        doomed.cancel()  # ... which is cancelled before it runs (a timeout in the same loop turn)
        assert (await asyncio.wait_for(last, 5)).status == 200
        pool.close()

    asyncio.run(serve(reply, scenario))
