"""The load's HTTP session (qbench.run.protocols.base.make_http_session): its pool reuses the connection
released last, so the extra connections of a burst go idle and are closed (aiohttp's keep-alive)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from qbench.run.protocols.base import make_http_session
from qbench.run.scenario.schema import Load
from tests.run.conftest import serve_aiohttp


def test_after_a_burst_one_connection_serves_and_the_rest_go_idle() -> None:
    ports: list[int] = []

    async def where(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05 if request.query.get("slow") else 0)
        ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        return web.Response(text="ok")

    app = web.Application()
    app.add_routes([web.get("/", where)])

    async def run(url: str) -> set[int]:
        async with make_http_session(Load.model_validate({"rate": 1, "requests": 1})) as http:

            async def get(query: str = "") -> None:
                async with http.get(f"{url}/{query}") as response:
                    await response.read()

            await asyncio.gather(*(get("?slow=1") for _ in range(6)))  # a burst: six connections
            ports.clear()
            for _ in range(30):  # one at a time
                await get()
            return set(ports)

    with serve_aiohttp(app) as url:
        used = asyncio.run(run(url))
    assert len(used) == 1  # aiohttp's own pool would cycle through all six, keeping every one alive
