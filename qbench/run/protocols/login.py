"""Credentials on the wire: `Authenticator` logs in to Gradio's `/login` (per session slot or per account)
and its aiohttp middleware adds the run's headers and cookies to every request, logging in again on a 401."""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from typing import Any

import aiohttp

from qbench.errors import TargetError
from qbench.run.scenario.credentials import (
    Account,
    Credentials,
    Secrets,
    is_secret_header,
    resolve,
)
from qbench.run.scenario.schema import Load, Scenario

#: The session slot of the request being sent (the load generator sets it in each request's task).
SESSION_SLOT: ContextVar[int] = ContextVar("qbench_session_slot", default=0)
LOGIN_CONCURRENCY = 8


def run_secrets(scenario: Scenario, target: str) -> Secrets:
    """A run's secrets: its credentials, secret-looking endpoint headers, its URLs'. Raises ScenarioError."""
    secrets = resolve(scenario.auth).secrets.with_url(target).with_url(scenario.target)
    for _, endpoint, _ in scenario.endpoints():
        secrets = secrets.with_url(endpoint.path).with_values(*(
            value for name, value in endpoint.headers.items()
            if is_secret_header(name, scenario.auth.secret_headers)
        ))
    return secrets


def authenticator(scenario: Scenario, target: str) -> Authenticator:
    """The run's Authenticator, holding `run_secrets` to mask error texts with. Raises ScenarioError."""
    credentials = resolve(scenario.auth)
    return Authenticator(credentials, target, scenario.load.connect_timeout, run_secrets(scenario, target))


def session_slots(load: Load) -> int:
    """How many sessions a run keeps apart: its users, its session pool, else one per request (0)."""
    return load.users or (load.sessions if isinstance(load.sessions, int) else 0)


class Authenticator:
    """Logs in and adds credentials to every request of one aiohttp session."""

    def __init__(self, credentials: Credentials, target: str, connect_timeout_s: float = 10.0,
                 secrets: Secrets | None = None) -> None:
        self.credentials = credentials
        # what `mask` hides: the run's secrets (default: the credentials' and the target's), and the
        # session tokens each login receives
        self.secrets = secrets if secrets is not None else credentials.secrets.with_url(target)
        self.login_url = target.rstrip("/") + "/login"
        self.connect_timeout_s = connect_timeout_s
        # Per login (a session slot's with login.per: session, else an account's), set up by `start`:
        self.slots = 0  # session slots that log in on their own (0: one login per account)
        self.offset, self.stride = 0, 1  # slot k uses account (k * stride + offset) % n (see spread)
        self.cookies: list[dict[str, str]] = [{} for _ in credentials.accounts]  # what each login set
        self.generation = [0 for _ in credentials.accounts]  # bumped by each login
        self.locks = [asyncio.Lock() for _ in credentials.accounts]
        self.refused: set[int] = set()  # logins whose re-login was refused
        self.logins = 0
        self.relogins = 0
        self.login_s: float | None = None  # wall time of the opening logins
        self.login_needed: bool | None = None  # False: the app has no auth (its /login redirects)
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------ login

    def spread(self, index: int, processes: int) -> None:
        """Generator process `index` of `processes`: its slot k uses account (k * processes + index) % n."""
        self.offset, self.stride = index, processes

    async def start(self, slots: int) -> None:
        """Log in for the run's `slots` sessions (0: a new session per request). TargetError on a refusal."""
        if not self.credentials.login:
            return
        accounts = len(self.credentials.accounts)
        self.slots = slots if self.credentials.per_session else 0
        count = self.slots or accounts  # logins by session slot, else by account
        self.cookies = [{} for _ in range(count)]
        self.generation = [0] * count
        self.locks = [asyncio.Lock() for _ in range(count)]
        used = range(count) if self.slots or not slots else sorted({self._account(k) for k in range(slots)})
        gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

        async def one(index: int) -> None:
            async with gate:
                await self._login(index)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in used))
        self.login_s = time.perf_counter() - t0

    def _account(self, slot: int) -> int:
        return (slot * self.stride + self.offset) % len(self.credentials.accounts)

    def _key(self, slot: int) -> int:
        return slot % self.slots if self.slots else self._account(slot)

    async def _login(self, index: int) -> None:
        account = self.credentials.accounts[self._account(index) if self.slots else index]
        session = self._login_session()
        form = {"username": account.username, "password": account.password}
        try:
            headers = dict(self.credentials.headers)  # a gateway or a private Space guards /login too
            if self.credentials.cookies:
                headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.credentials.cookies.items())
            async with session.post(
                self.login_url, data=form, headers=headers, allow_redirects=False
            ) as resp:
                body = await resp.read()
                cookies = {name: morsel.value for name, morsel in resp.cookies.items() if morsel.value}
                status = resp.status
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise TargetError(
                self.mask(f"{self.login_url}: cannot log in ({exc.__class__.__name__}: {exc})")
            ) from None
        self._judge(account, status, body, cookies)
        self.secrets = self.secrets.with_values(*cookies.values())  # a session token echoed back: ***
        self.cookies[index] = cookies
        self.generation[index] += 1
        self.logins += 1

    def _judge(self, account: Account, status: int, body: bytes, cookies: dict[str, str]) -> None:
        if status in (301, 302, 303, 307):
            self.login_needed = False  # Gradio redirects /login when the app has no auth
            return
        excerpt = self.mask(body.decode(errors="replace").strip().replace("\n", " ")[:200]) or "(empty body)"
        if status in (400, 401, 403):
            raise TargetError(
                f"{self.login_url}: the login as '{account.username}' was refused "
                f"(HTTP {status}: {excerpt}); check auth.login (username and password, or the users file)"
            )
        if status == 404:
            raise TargetError(
                f"{self.login_url}: no login route (HTTP 404); the target must be the app's root URL "
                "(with its mount path), and auth.login is for Gradio's auth= (use auth.bearer or "
                "auth.headers for a token or an API key)"
            )
        if status != 200 or not cookies:
            raise TargetError(
                f"{self.login_url}: the login as '{account.username}' answered HTTP {status} "
                f"{'without a session cookie' if status == 200 else excerpt}; check auth.login"
            )
        self.login_needed = True

    async def _relogin(self, index: int, seen: int) -> bool:
        """Log in again unless another request did since generation `seen`; False when refused (for good)."""
        async with self.locks[index]:
            if self.generation[index] != seen:
                return True
            if index in self.refused:
                return False
            try:
                await self._login(index)
            except TargetError:
                self.refused.add(index)
                return False
            self.relogins += 1
            return True

    def _login_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout_s, sock_read=30.0)
            self._session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------ every request

    @property
    def middlewares(self) -> list[aiohttp.ClientMiddlewareType]:
        """For make_http_session: none when the run has no credentials (no cost per request)."""
        creds = self.credentials
        return [self.middleware] if creds.login or creds.headers or creds.cookies else []

    async def middleware(
        self, req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        index = self._key(SESSION_SLOT.get()) if self.credentials.login else 0
        theirs = req.headers.get("Cookie")  # the session's own cookies (e.g. a load balancer's)
        seen = self._apply(req, index, theirs)
        resp = await handler(req)
        if resp.status == 401 and self.credentials.login and self.login_needed:
            if await self._relogin(index, seen):
                resp.release()
                self._apply(req, index, theirs)
                resp = await handler(req)
        return resp

    def _apply(self, req: aiohttp.ClientRequest, index: int, theirs: str | None) -> int:
        """Put the headers and cookies on `req`; the login generation they came from."""
        for name, value in self.credentials.headers.items():
            req.headers[name] = value
        cookies = dict(self.credentials.cookies)
        if self.credentials.login:
            cookies.update(self.cookies[index])
        if cookies:
            ours = "; ".join(f"{k}={v}" for k, v in cookies.items())
            req.headers["Cookie"] = f"{theirs}; {ours}" if theirs else ours
        return self.generation[index] if self.credentials.login else 0

    async def __aenter__(self) -> Authenticator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def mask(self, text: str) -> str:
        """`text` as a record or an error may show it: the run's secrets and its session tokens as ***."""
        return self.secrets.redact(text)

    def info(self) -> dict[str, Any]:
        """What run.json shows: names and counts, never a value."""
        return {
            "login": self.credentials.login,
            "login_needed": self.login_needed,
            "accounts": len(self.credentials.accounts),
            "per": "session" if self.credentials.per_session else "run",
            "logins": self.logins,
            "relogins": self.relogins,  # a 401 on a logged-in session: logged in again once
            "login_s": self.login_s,
            "headers": sorted(self.credentials.headers),
            "cookies": sorted(self.credentials.cookies),
        }
