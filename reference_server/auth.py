"""Login and tokens, as a Gradio app launched with `auth=` behaves (settings `auth:`); the same in
every release emulated (`gradio: 3|4|5|6`), as 3.50 to 6.x log in alike.

    auth:
      users: {alice: secret}        # Gradio's auth=[("alice", "secret")]: the login form and cookies
      tokens: [hf_abc]              # accepted as `Authorization: Bearer <t>` (or X-HF-Authorization)

`POST /login` (form fields username, password; also /login/) answers `{"success": true}` and sets
`access-token-<cookie id>` (Secure, SameSite=None) and `access-token-unsecure-<cookie id>`, both
HttpOnly, holding one token per login; a wrong pair answers 400 "Incorrect credentials.". `GET
/logout` forgets the user's tokens. Every other route answers 401 {"detail": "Not authenticated"}
without a valid cookie or bearer token (3.x's websocket handshake is refused), except the monitoring
ones (/status, /metrics, /healthz, /admin/config, which has its own token) and
/gradio_api/login_check (401 until logged in). Tokens live in memory: a restarted server forgets them.
`Logins.forget()` does that on purpose (tests of a client's re-login).
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, field_serializer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MASK = "***"
OPEN_PATHS = frozenset({"/status", "/metrics", "/healthz", "/admin/config", "/logout", "/logout/"})
LOGIN_PATHS = frozenset({"/login", "/login/"})
MAX_FORM_BYTES = 64 * 1024


class AuthSettings(BaseModel):
    """Accounts and bearer tokens; dumps show `***` for passwords and tokens unless the context
    says {"reveal_secrets": True} (handing the settings to a launched server)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    users: dict[str, str] = Field(default_factory=dict)
    tokens: list[str] = Field(default_factory=list)

    @field_serializer("users")
    def _hide_users(self, value: dict[str, str], info: SerializationInfo) -> dict[str, str]:
        return value if _reveal(info) else {user: MASK for user in value}

    @field_serializer("tokens")
    def _hide_tokens(self, value: list[str], info: SerializationInfo) -> list[str]:
        return value if _reveal(info) else [MASK for _ in value]

    @property
    def enabled(self) -> bool:
        return bool(self.users or self.tokens)


def _reveal(info: SerializationInfo) -> bool:
    return bool((info.context or {}).get("reveal_secrets"))


def parse_auth_flags(pairs: list[str], tokens: list[str]) -> dict[str, Any]:
    """`--auth USER:PASS` (repeatable) and `--auth-token T` -> an `auth` settings mapping."""
    users: dict[str, str] = {}
    for pair in pairs:
        user, sep, password = pair.partition(":")
        if not sep or not user:
            raise ValueError(
                f"--auth: expected USER:PASSWORD, got {user or '(empty)'!r}{':...' if sep else ''}"
            )
        users[user] = password
    return {"users": users, "tokens": list(tokens)}


@dataclass
class Logins:
    """The server's login tokens (in memory, like Gradio's app.tokens) and its cookie suffix."""

    cookie_id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    sessions: dict[str, str] = field(default_factory=dict)  # login token -> user

    def forget(self) -> None:
        """What a restart does: every login token is gone (clients must log in again)."""
        self.sessions.clear()


class AuthMiddleware:
    """Pure ASGI: the login and logout routes, and the credential check in front of every route."""

    def __init__(self, app: ASGIApp, settings: AuthSettings, logins: Logins) -> None:
        self.app = app
        self.settings = settings
        self.cookie_id = logins.cookie_id
        self.sessions = logins.sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and path in LOGIN_PATHS and scope.get("method") == "POST":
            await self._login(receive, send)
        elif path in ("/logout", "/logout/"):
            await self._logout(scope, send)
        elif path in ("/gradio_api/login_check", "/gradio_api/login_check/") and self.user(scope) is not None:
            await _json(send, 200, None)  # Gradio's frontend asks this before showing its login form
        elif path in OPEN_PATHS or self.user(scope) is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _json(send, 401, {"detail": "Not authenticated"})

    def user(self, scope: Scope) -> str | None:
        """Who the request is: a login cookie's user, `<token>` for a bearer token, or None."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        for name in ("authorization", "x-hf-authorization"):
            scheme, _, token = headers.get(name, "").partition(" ")
            if scheme.lower() == "bearer" and any(
                hmac.compare_digest(token.encode(), t.encode()) for t in self.settings.tokens
            ):
                return "<token>"
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        for name in (f"access-token-{self.cookie_id}", f"access-token-unsecure-{self.cookie_id}"):
            morsel = cookie.get(name)
            if morsel is not None and morsel.value in self.sessions:
                return self.sessions[morsel.value]
        return None

    async def _login(self, receive: Receive, send: Send) -> None:
        form = parse_qs((await _body(receive)).decode("utf-8", errors="replace"))
        username = (form.get("username") or [""])[0].strip()
        password = (form.get("password") or [""])[0]
        expected = self.settings.users.get(username)
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            await _json(send, 400, {"detail": "Incorrect credentials."})
            return
        token = secrets.token_urlsafe(16)
        self.sessions[token] = username
        cookies = [
            f"access-token-{self.cookie_id}={token}; HttpOnly; Path=/; SameSite=none; Secure",
            f"access-token-unsecure-{self.cookie_id}={token}; HttpOnly; Path=/; SameSite=lax",
        ]
        await _json(send, 200, {"success": True}, cookies)

    async def _logout(self, scope: Scope, send: Send) -> None:
        user = self.user(scope)
        for token in [t for t, u in self.sessions.items() if u == user]:
            del self.sessions[token]
        expired = "=; Max-Age=0; Path=/"
        cookies = [
            f"access-token-{self.cookie_id}{expired}",
            f"access-token-unsecure-{self.cookie_id}{expired}",
        ]
        await send(
            {
                "type": "http.response.start",
                "status": 302,
                "headers": [(b"location", b"/"), *((b"set-cookie", c.encode()) for c in cookies)],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_FORM_BYTES:
            chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(send: Send, status: int, body: Any, cookies: list[str] = []) -> None:  # noqa: B006
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    headers += [(b"set-cookie", c.encode()) for c in cookies]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})
