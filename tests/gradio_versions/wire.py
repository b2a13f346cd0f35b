"""A raw client for the differential tests: one event over Gradio 3's websocket (`ws`) or 4.x's sse_v3
at the root, every server message kept with its arrival time (qbench's own records keep only phases).

A plan's steps start after a delay, or once an earlier step has seen a message kind (`After`): on a
loaded machine, real Gradio's 50 ms dispatcher poll makes fixed delays race, messages do not."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass(frozen=True)
class After:
    """Start a step once step `index` has seen a message of `kind` (e.g. process_starts)."""

    index: int
    kind: str


Step = tuple["float | After", int, str]  # (delay_s or After, fn_index, text)


@dataclass
class Seen:
    """One event as the client saw it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # perf_counter at each message
    join_status: int = 200
    kinds_seen: dict[str, asyncio.Event] = field(default_factory=dict)

    def add(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        self.at.append(time.perf_counter())
        self.reached(msg["msg"]).set()

    def reached(self, kind: str) -> asyncio.Event:
        return self.kinds_seen.setdefault(kind, asyncio.Event())

    @property
    def kinds(self) -> list[str]:
        return [m["msg"] for m in self.messages]

    def first(self, kind: str) -> dict[str, Any]:
        return next(m for m in self.messages if m["msg"] == kind)

    def time_of(self, kind: str) -> float:
        return next(t for m, t in zip(self.messages, self.at, strict=True) if m["msg"] == kind)


async def call(http: aiohttp.ClientSession, url: str, family: str, fn_index: int, text: str,
               session: str, seen: Seen) -> Seen:
    if family == "ws":
        return await _ws(http, url, fn_index, text, session, seen)
    return await _sse(http, url, fn_index, text, session, seen)


async def _ws(http: aiohttp.ClientSession, url: str, fn_index: int, text: str, session: str,
              seen: Seen) -> Seen:
    hash_ = {"fn_index": fn_index, "session_hash": session}
    async with http.ws_connect(url.replace("http", "ws", 1) + "/queue/join") as ws:
        async for frame in ws:
            msg = json.loads(frame.data)
            seen.add(msg)
            if msg["msg"] == "send_hash":
                await ws.send_json(hash_)
            elif msg["msg"] == "send_data":
                await ws.send_json({"data": [text], "event_data": None, **hash_})
        seen.add({"msg": "closed", "code": ws.close_code})
    return seen


async def _sse(http: aiohttp.ClientSession, url: str, fn_index: int, text: str, session: str,
               seen: Seen) -> Seen:
    body = {"data": [text], "event_data": None, "fn_index": fn_index, "session_hash": session}
    async with http.post(url + "/queue/join", json=body) as resp:
        seen.join_status = resp.status
        if resp.status != 200:
            seen.add({"msg": f"http_{resp.status}"})
            return seen
    async with http.get(url + "/queue/data", params={"session_hash": session}) as resp:
        async for line in resp.content:
            if line.startswith(b"data: "):
                msg = json.loads(line[6:])
                if msg["msg"] != "heartbeat":
                    seen.add(msg)
                if msg["msg"] == "close_stream":
                    break
    return seen


async def calls(url: str, family: str, plan: Sequence[Step]) -> list[Seen]:
    """Run every (delay_s or After, fn_index, text) step of `plan`, each in its own session."""
    seen = [Seen() for _ in plan]
    async with aiohttp.ClientSession() as http:
        async def one(i: int, when: float | After, fn_index: int, text: str) -> Seen:
            if isinstance(when, After):
                await seen[when.index].reached(when.kind).wait()
            else:
                await asyncio.sleep(when)
            return await call(http, url, family, fn_index, text, f"d{i}-{time.monotonic_ns()}", seen[i])

        jobs = (one(i, *step) for i, step in enumerate(plan))
        return list(await asyncio.wait_for(asyncio.gather(*jobs), 60))
