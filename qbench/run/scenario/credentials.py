"""The scenario's `auth:` section (login, bearer, headers, cookies), `${NAME}` environment references read
when a run starts, and `Secrets`: a run's secret values as data, to mask what is written or printed."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote_plus, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    field_serializer,
    model_validator,
)

from qbench.errors import ScenarioError

MASK = "***"
REVEAL = {"reveal_secrets": True}  # model_dump(context=REVEAL): keep secrets (in-memory hand-overs only)
SECRET_WORDS = ("authorization", "cookie", "token", "key", "secret", "password", "credential")
# query parameter names that carry a credential: SECRET_WORDS anywhere in the name, or one of these as a
# whole word of it (`?__sign=` on a Space, `?X-Amz-Signature=`, `?sig=`; not `?design=`, `?author=`)
SECRET_QUERY_NAMES = frozenset({"sign", "sig", "signature", "auth", "jwt", "pass", "pwd", "apikey"})
MIN_SECRET_CHARS = 3  # shorter values are not scrubbed from free text (too many false hits)

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_secret_header(name: str, extra: tuple[str, ...] | list[str] = ()) -> bool:
    """Authorization, Cookie and anything named like *token*, *key*, *secret* (or listed in `extra`)."""
    low = name.lower()
    return any(word in low for word in SECRET_WORDS) or low in {e.lower() for e in extra}


def _mask(value: str | None, info: SerializationInfo) -> str | None:
    if value is None or (info.context or {}).get("reveal_secrets"):
        return value
    return value if _ENV_REF.fullmatch(value) else MASK


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Login(_Model):
    """Gradio's login route: one account (`username` + `password`) or a `users` file of accounts."""

    username: str | None = None
    password: str | None = None
    users: Path | None = None  # one `user,password` per line; session / user k logs in as line k % n
    # session: each closed-loop user or pooled session logs in on its own (one browser each); run: one
    # login per account, shared by every session. A new session per request shares its account's login.
    per: Literal["session", "run"] = "session"

    @model_validator(mode="after")
    def _one_source(self) -> Login:
        single = self.username is not None or self.password is not None
        if self.users is not None and single:
            raise ValueError("expected either username and password, or users (a file), not both")
        if self.users is None and (self.username is None or self.password is None):
            raise ValueError("expected username and password (or users: a file of user,password lines)")
        return self

    @field_serializer("password")
    def _hide(self, value: str | None, info: SerializationInfo) -> str | None:
        return _mask(value, info)


class Auth(_Model):
    """Credentials for every protocol; dumps show literal secrets as ***."""

    login: Login | None = None
    bearer: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    cookies: dict[str, str] = Field(default_factory=dict)
    secret_headers: list[str] = Field(default_factory=list)

    @field_serializer("bearer")
    def _hide_bearer(self, value: str | None, info: SerializationInfo) -> str | None:
        return _mask(value, info)

    @field_serializer("headers")
    def _hide_headers(self, value: dict[str, str], info: SerializationInfo) -> dict[str, str]:
        return redact_headers(value, self.secret_headers, info)

    @field_serializer("cookies")
    def _hide_cookies(self, value: dict[str, str], info: SerializationInfo) -> dict[str, str]:
        return {k: _mask(v, info) or "" for k, v in value.items()}

    @property
    def is_set(self) -> bool:
        return bool(self.login or self.bearer or self.headers or self.cookies)


def refusal_hint(status: int, auth: Auth) -> str:
    """What to set or check when the target answers 401 or 403 to a scenario with `auth`."""
    if status == 401 and auth.login is not None:
        return "logged in, yet refused: check auth.login (the account) and that the target is the app's root"
    if auth.bearer is not None or auth.headers or auth.cookies:
        keys = ", ".join(
            k
            for k, v in (
                ("auth.bearer", auth.bearer),
                ("auth.headers", auth.headers),
                ("auth.cookies", auth.cookies),
            )
            if v
        )
        return f"the credentials were refused: check {keys}" + (
            "" if status == 403 else ", or set auth.login"
        )
    if status == 401:
        return (
            "this app asks for a login: set auth.login (--auth USER:PASS); "
            "for a token or an API key set auth.bearer (--bearer-env NAME) or auth.headers"
        )
    return "the Space is private or access is denied: set auth.bearer (--bearer-env HF_TOKEN) or auth.headers"


def redact_headers(headers: dict[str, str], extra: list[str], info: SerializationInfo) -> dict[str, str]:
    """Header values as a dump shows them: secret-looking names masked (unless REVEAL)."""
    return {k: (_mask(v, info) or "") if is_secret_header(k, extra) else v for k, v in headers.items()}


# ---------------------------------------------------------------- the secrets of one run, as data


def _secret_query_name(name: str) -> bool:
    return any(word in name for word in SECRET_WORDS) or bool(
        SECRET_QUERY_NAMES.intersection(re.split(r"[^a-z0-9]+", name))
    )


def _url_secrets(url: str | None) -> list[str]:
    """A URL's credentials: its password and secret-looking query values (`?token=`), raw and decoded."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [parts.password, unquote_plus(parts.password)] if parts.password else []
    for pair in parts.query.split("&"):
        name, _, raw = pair.partition("=")
        if raw and _secret_query_name(unquote_plus(name).lower()):
            found += [raw, unquote_plus(raw)]
    return found


@dataclass(frozen=True)
class Secrets:
    """Values that must never reach a file or the terminal; immutable; `redact` shows each as `***`."""

    values: frozenset[str] = frozenset()
    _longest_first: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = frozenset(v for v in self.values if len(v) >= MIN_SECRET_CHARS)
        object.__setattr__(self, "values", kept)
        object.__setattr__(self, "_longest_first", tuple(sorted(kept, key=len, reverse=True)))

    def __repr__(self) -> str:
        return f"Secrets({len(self.values)} values)"  # never the values themselves

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self.values | other.values)

    def with_values(self, *values: str) -> Secrets:
        return Secrets(self.values.union(values))

    def with_url(self, url: str | None) -> Secrets:
        """Also the credentials in `url` (user:pass@, ?token=...)."""
        return self.with_values(*_url_secrets(url))

    def redact(self, text: str) -> str:
        for secret in self._longest_first:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


# ---------------------------------------------------------------- resolved (in memory only)


@dataclass(frozen=True)
class Account:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class Credentials:
    """`Auth` with every `${NAME}` read from the environment and the users file read."""

    accounts: tuple[Account, ...] = ()  # empty: no login
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # bearer included
    cookies: dict[str, str] = field(default_factory=dict, repr=False)
    per_session: bool = True  # login.per: session (each session slot logs in on its own)

    secret_headers: tuple[str, ...] = ()  # auth.secret_headers: more header names whose values are secret

    @property
    def login(self) -> bool:
        return bool(self.accounts)

    @property
    def secrets(self) -> Secrets:
        """Every secret value: passwords, cookies, secret headers (a bearer with and without `Bearer `)."""
        values = [account.password for account in self.accounts] + list(self.cookies.values())
        for name, value in self.headers.items():
            if is_secret_header(name, self.secret_headers):
                values += [value, value.removeprefix("Bearer ")]
        return Secrets(frozenset(values))


def resolve(auth: Auth, *, environ: dict[str, str] | None = None) -> Credentials:
    """Read env references and the users file (`.secrets`: every secret value). Raises ScenarioError."""
    env = dict(os.environ) if environ is None else environ
    accounts: tuple[Account, ...] = ()
    if auth.login is not None and auth.login.users is not None:
        accounts = read_users(auth.login.users)
    elif auth.login is not None:
        user = expand(auth.login.username or "", "auth.login.username", env)
        accounts = (Account(user, expand(auth.login.password or "", "auth.login.password", env)),)
    headers = {k: expand(v, f"auth.headers.{k}", env) for k, v in auth.headers.items()}
    if auth.bearer is not None:
        headers["Authorization"] = "Bearer " + expand(auth.bearer, "auth.bearer", env)
    cookies = {k: expand(v, f"auth.cookies.{k}", env) for k, v in auth.cookies.items()}
    per_session = auth.login is None or auth.login.per == "session"
    return Credentials(accounts, headers, cookies, per_session, tuple(auth.secret_headers))


def expand(value: str, key: str, env: dict[str, str]) -> str:
    """`${NAME}` -> the environment variable; an unset one is a ScenarioError naming key and variable."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ScenarioError(
                f"key '{key}': environment variable {name} is not set (the value names ${{{name}}})"
            )
        return env[name]

    return _ENV_REF.sub(one, value)


def read_users(path: Path) -> tuple[Account, ...]:
    """`user,password` per line (blank lines and `#` comments skipped). Raises ScenarioError."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ScenarioError(f"key 'auth.login.users': cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"key 'auth.login.users': {path} is not UTF-8 text") from None
    accounts = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, sep, password = line.partition(",")
        if not sep or not user.strip():
            raise ScenarioError(
                f"key 'auth.login.users': {path} line {number}: expected `user,password`"
            )  # the line itself is not shown: it may hold a password
        accounts.append(Account(user.strip(), password.strip()))
    if not accounts:
        raise ScenarioError(f"key 'auth.login.users': {path} has no `user,password` lines")
    return tuple(accounts)


def parse_header(item: str) -> tuple[str, str]:
    """`--header 'K: V'` -> (K, V). Raises ScenarioError."""
    name, sep, value = item.partition(":")
    if not sep or not name.strip() or not re.fullmatch(r"[!#$%&'*+^_`|~0-9A-Za-z-]+", name.strip()):
        raise ScenarioError("--header: expected 'Name: value', e.g. --header 'X-Api-Key: ${GATEWAY_KEY}'")
    return name.strip(), value.strip()


def cli_overrides(
    auth: str | None, headers: list[str], bearer_env: str | None, *, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """`--auth USER:PASS`, `--header 'K: V'` (repeatable), `--bearer-env NAME` -> dotted overrides."""
    env = dict(os.environ) if environ is None else environ
    overrides: dict[str, Any] = {}
    if auth is not None:
        user, sep, password = auth.partition(":")
        if not sep or not user:
            raise ScenarioError("--auth: expected USER:PASSWORD (the password may be ${ENV_VAR})")
        overrides["auth.login"] = {"username": user, "password": password}
    for item in headers:
        name, value = parse_header(item)
        overrides[f"auth.headers.{name}"] = value
    if bearer_env is not None:
        if bearer_env not in env:
            raise ScenarioError(f"--bearer-env: environment variable {bearer_env} is not set")
        overrides["auth.bearer"] = f"${{{bearer_env}}}"
    return overrides
