"""Print the wire messages a real Gradio release exchanges, per protocol family (a dev tool).

    python -m tests.gradio_versions.trace 3.50.2 4.44.1     # from the repository root

For each release: /config's protocol, api_prefix and keys, then the raw message sequence of a plain
call, a generator, a failing function, two batched calls, a queue_full and a cancel. This is how the
facts in qbench/run/protocols/gradio.py's docstring were checked.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import aiohttp

from .servers import serve_release

SHOW = 160  # characters per message


async def config(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url + "/config") as resp:
        return dict(await resp.json())


async def call(http: aiohttp.ClientSession, url: str, cfg: dict[str, Any], api_name: str, text: str,
               log: list[str], cancel_after: float | None = None) -> None:
    try:
        await asyncio.wait_for(_call(http, url, cfg, api_name, text, log, cancel_after), 15)
    except asyncio.TimeoutError:
        log.append("  TIMEOUT (no end in 15 s)")


async def _call(http: aiohttp.ClientSession, url: str, cfg: dict[str, Any], api_name: str, text: str,
                log: list[str], cancel_after: float | None = None) -> None:
    fn_index = next(i for i, d in enumerate(cfg["dependencies"]) if d.get("api_name") == api_name)
    fn_index = cfg["dependencies"][fn_index].get("id", fn_index)
    protocol, api = cfg.get("protocol", "ws"), url + cfg.get("api_prefix", "")
    session = uuid.uuid4().hex[:8]
    hash_ = {"fn_index": fn_index, "session_hash": session}
    body = {"data": [text], "event_data": None, **hash_}

    def note(kind: str, msg: Any) -> None:
        log.append(f"  {kind} {json.dumps(msg)[:SHOW]}")

    async def cancel(event_id: str | None) -> None:
        await asyncio.sleep(cancel_after or 0)
        version = tuple(int(x) for x in str(cfg.get("version", "0")).split(".")[:2])
        path, payload = ("/cancel", {**hash_, "event_id": event_id}) if version >= (4, 31) else \
            ("/reset", hash_ if protocol == "ws" else {"event_id": event_id})
        async with http.post(api + path, json=payload) as resp:
            note(f"POST {path} -> {resp.status}", (await resp.text())[:100])

    if protocol == "ws":
        async with http.ws_connect(url.replace("http", "ws", 1) + "/queue/join") as ws:
            if cancel_after:
                asyncio.get_running_loop().create_task(cancel(None))
            async for frame in ws:
                msg = json.loads(frame.data)
                note("<-", msg)
                if msg["msg"] == "send_hash":
                    await ws.send_json(hash_)
                elif msg["msg"] == "send_data":
                    await ws.send_json(body)
            note("ws closed", ws.close_code)
        return
    if protocol == "sse":
        async with http.get(api + "/queue/join", params=hash_) as resp:
            note(f"GET /queue/join -> {resp.status}", resp.headers.get("content-type"))
            async for line in resp.content:
                if not line.strip():
                    continue
                msg = json.loads(line.decode()[5:])
                note("<-", msg)
                if msg["msg"] == "send_data":
                    data = {**body, "event_id": msg["event_id"]}
                    async with http.post(api + "/queue/data", json=data) as r:
                        note(f"POST /queue/data -> {r.status}", await r.text())
                    if cancel_after:
                        asyncio.get_running_loop().create_task(cancel(msg["event_id"]))
            note("stream ended", "")
        return
    async with http.post(api + "/queue/join", json=body) as resp:
        note(f"POST /queue/join -> {resp.status}", await resp.text())
        if resp.status != 200:
            return
        event_id = (await resp.json())["event_id"]
    if cancel_after:
        asyncio.get_running_loop().create_task(cancel(event_id))
    async with http.get(api + "/queue/data", params={"session_hash": session}) as resp:
        note(f"GET /queue/data -> {resp.status}", "")
        async for line in resp.content:
            if line.strip():
                note("<-", json.loads(line.decode()[5:]))
        note("stream ended", "")


async def trace(version: str) -> None:
    async with aiohttp.ClientSession() as http:
        with serve_release(version) as url, serve_release(version, max_size=1) as tight:
            cfg = await config(http, url)
            print(f"== gradio {version}: version={cfg.get('version')} protocol={cfg.get('protocol')!r} "
                  f"api_prefix={cfg.get('api_prefix')!r}")
            print("   config keys:", ", ".join(sorted(cfg)))
            api = url + cfg.get("api_prefix", "")
            for route in ("/info", "/queue/status"):
                async with http.get(api + route) as resp:
                    print(f"   GET {route} -> {resp.status}")
            for name in ("echo", "stream", "fail"):
                log: list[str] = []
                await call(http, url, cfg, name, "hi", log)
                print(f"-- {name}\n" + "\n".join(log))
            tcfg = await config(http, tight)
            logs: list[list[str]] = [[], [], []]
            await asyncio.gather(*(call(http, tight, tcfg, "sleep", f"q{i}", logs[i]) for i in range(3)))
            print("-- queue_full (max_size=1, 3 x sleep)\n" + "\n  --\n".join("\n".join(x) for x in logs))
            log = []
            await call(http, url, cfg, "long", "c", log, cancel_after=0.5)
            print("-- cancel (long generator, after 0.5 s)\n" + "\n".join(log))
            # last: a batch stalls 4.8.0's queue for good (its dispatcher task dies on a ValueError)
            logs = [[], []]
            await asyncio.gather(*(call(http, url, cfg, "batch", f"b{i}", logs[i]) for i in range(2)))
            print("-- batch x2\n" + "\n".join(logs[0]) + "\n  --\n" + "\n".join(logs[1]))


if __name__ == "__main__":
    for v in sys.argv[1:]:
        asyncio.run(asyncio.wait_for(trace(v), 120))
