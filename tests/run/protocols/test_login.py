"""qbench.run.protocols.login against small aiohttp servers: what each answer to POST /login means, and
the credentials every request carries (per session slot with several accounts)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp import web

from qbench.errors import TargetError
from qbench.run.protocols.login import SESSION_SLOT, Authenticator
from qbench.run.scenario.credentials import Account, Credentials
from tests.run.conftest import serve_aiohttp


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """/a/login: the Gradio answer (cookie per user); /noauth/login: 302 (an app without auth);
    /nocookie/login: 200 without a cookie; /echo: the Cookie and Authorization headers it got."""

    async def login(request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("password") != "pw-" + str(form.get("username")):
            return web.json_response({"detail": "Incorrect credentials."}, status=400)
        resp = web.json_response({"success": True})
        resp.set_cookie("access-token-unsecure-x", f"t-{form['username']}", httponly=True)
        return resp

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("/")

    async def bare(request: web.Request) -> web.Response:
        return web.json_response({"success": True})

    async def flaky_login(request: web.Request) -> web.Response:
        LOGIN_CALLS.append(1)
        if len(LOGIN_CALLS) > 1:  # the password changed after the first login
            return web.json_response({"detail": "Incorrect credentials."}, status=400)
        return await login(request)

    async def locked(request: web.Request) -> web.Response:
        return web.json_response({"detail": "Not authenticated"}, status=401)

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({k: request.headers.get(k) for k in ("Cookie", "Authorization")})

    async def guarded_login(request: web.Request) -> web.Response:  # a gateway in front of /login
        if request.headers.get("X-Api-Key") != "k1" or "tenant=t1" not in request.headers.get("Cookie", ""):
            return web.json_response({"detail": "no key"}, status=403)
        return await login(request)

    app = web.Application()
    app.add_routes(
        [
            web.post("/a/login", login),
            web.post("/noauth/login", redirect),
            web.post("/nocookie/login", bare),
            web.get("/echo", echo),
            web.post("/flaky/login", flaky_login),
            web.post("/guarded/login", guarded_login),
            web.get("/locked", locked),
        ]
    )
    with serve_aiohttp(app) as base:
        yield base


LOGIN_CALLS: list[int] = []


def creds(*users: str, **headers: str) -> Credentials:
    return Credentials(tuple(Account(u, "pw-" + u) for u in users), dict(headers), {"tenant": "t1"})


async def headers_seen(auth: Authenticator, url: str, slots: list[int]) -> list[dict[str, str]]:
    await auth.start(0)
    async with aiohttp.ClientSession(middlewares=auth.middlewares) as http:

        async def one(slot: int) -> dict[str, str]:
            SESSION_SLOT.set(slot)
            async with http.get(url + "/echo") as resp:
                data: dict[str, str] = await resp.json()
                return data

        seen = await asyncio.gather(*(one(s) for s in slots))
    await auth.close()
    return list(seen)


def test_each_slot_sends_its_accounts_cookie_and_the_shared_credentials(url: str) -> None:
    auth = Authenticator(creds("ann", "ben", Authorization="Bearer b1"), url + "/a")
    seen = asyncio.run(headers_seen(auth, url, [0, 1, 2]))
    assert [s["Cookie"] for s in seen] == [
        "tenant=t1; access-token-unsecure-x=t-ann",
        "tenant=t1; access-token-unsecure-x=t-ben",
        "tenant=t1; access-token-unsecure-x=t-ann",
    ]
    assert {s["Authorization"] for s in seen} == {"Bearer b1"}
    assert auth.info()["logins"] == 2 and auth.login_needed is True


@pytest.mark.parametrize(
    ("path", "users", "problem"),
    [
        ("/a", ("ann", "eve!"), "login as 'eve!' was refused (HTTP 400"),
        ("/missing", ("ann",), "no login route (HTTP 404)"),
        ("/nocookie", ("ann",), "answered HTTP 200 without a session cookie"),
    ],
)
def test_refusals_name_the_key(url: str, path: str, users: tuple[str, ...], problem: str) -> None:
    accounts = tuple(Account(u, "pw-" + u if u != "eve!" else "nope") for u in users)
    auth = Authenticator(Credentials(accounts), url + path)
    with pytest.raises(TargetError) as err:
        asyncio.run(auth.start(0))
    assert problem in str(err.value) and "nope" not in str(err.value)
    asyncio.run(auth.close())


def test_an_app_without_auth_redirects_and_that_is_fine(url: str) -> None:
    auth = Authenticator(creds("ann"), url + "/noauth")
    asyncio.run(auth.start(1))
    assert auth.login_needed is False and auth.info()["logins"] == 1
    asyncio.run(auth.close())


def test_a_refused_re_login_is_not_tried_again(url: str) -> None:
    async def go() -> list[int]:
        auth = Authenticator(creds("ann"), url + "/flaky")
        await auth.start(1)
        async with aiohttp.ClientSession(middlewares=auth.middlewares) as http:
            statuses = []
            for _ in range(3):
                async with http.get(url + "/locked") as resp:
                    statuses.append(resp.status)
        await auth.close()
        assert auth.relogins == 0 and auth.refused == {0}
        return statuses

    assert asyncio.run(go()) == [401, 401, 401]
    assert len(LOGIN_CALLS) == 2  # the first login and one refused re-login, then no more


def test_the_login_carries_the_headers_and_cookies_too(url: str) -> None:
    auth = Authenticator(creds("ann", **{"X-Api-Key": "k1"}), url + "/guarded")
    asyncio.run(auth.start(1))
    assert auth.login_needed is True and auth.info()["login_s"] > 0
    asyncio.run(auth.close())
