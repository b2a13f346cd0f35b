"""The control plane: a server's own routes (/config, /status, /admin/config, readiness) over httpx."""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Mapping
from typing import Any

import httpx

from qbench.errors import ServerLaunchError

TIMEOUT_S = 10.0  # /status on a busy GPU server reads NVML; an idle one answers in milliseconds


def client(timeout_s: float = TIMEOUT_S, **kwargs: Any) -> httpx.Client:
    """A synchronous httpx client for control calls: explicit timeout, no proxy from the environment."""
    return httpx.Client(timeout=httpx.Timeout(timeout_s), trust_env=False, verify=tls(), **kwargs)


@functools.cache
def tls() -> ssl.SSLContext:
    """One TLS context for every control call of the process (httpx's default one: certifi's CA bundle)."""
    return httpx.create_ssl_context(trust_env=False)


def _json_or_none(response: httpx.Response) -> dict[str, Any] | None:
    """The body of a 200 JSON answer as a dict, else None (a Gradio app has no /status: 404)."""
    if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def read_status(
    base_url: str,
    *,
    headers: Mapping[str, str] | None = None,
    cookies: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
    http: httpx.Client | None = None,
) -> dict[str, Any] | None:
    """The reference server's `GET /status` JSON; None where it has none or does not answer.
    `headers`/`cookies`: the run's static credentials; `http`: a client to reuse, else one for this call."""
    url = base_url.rstrip("/") + "/status"
    try:
        if http is not None:
            return _json_or_none(http.get(url, timeout=timeout_s))
        with client(timeout_s, headers=dict(headers or {}), cookies=dict(cookies or {})) as own:
            return _json_or_none(own.get(url))
    except httpx.HTTPError:
        return None


async def read_status_async(
    base_url: str,
    *,
    headers: Mapping[str, str] | None = None,
    cookies: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> dict[str, Any] | None:
    """`read_status` for a caller inside an event loop (the runner, around its run)."""
    try:
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s), trust_env=False, verify=tls(),
            headers=dict(headers or {}), cookies=dict(cookies or {}),
        ) as http:
            return _json_or_none(await http.get(base_url.rstrip("/") + "/status"))
    except httpx.HTTPError:
        return None


def read_gradio_version(base_url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """The `version` a Gradio app's `GET /config` announces (None when there is no such answer)."""
    return _config_key(base_url, "version", timeout_s)


def read_gradio_mode(base_url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """The `mode` a Gradio app's `GET /config` announces ("server", "blocks", "interface"); else None."""
    return _config_key(base_url, "mode", timeout_s)


def _config_key(base_url: str, key: str, timeout_s: float) -> str | None:
    try:
        with client(timeout_s) as http:
            response = http.get(base_url.rstrip("/") + "/config")
        response.raise_for_status()
        config = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    return str(config[key]) if isinstance(config, dict) and config.get(key) else None


def set_admin_config(base_url: str, settings: Mapping[str, Any], token: str) -> Any:
    """`POST /admin/config` with `Authorization: Bearer <token>`: the server's answer (its new settings).
    ServerLaunchError when it refuses (the status and the start of its reason) or cannot be reached."""
    url = base_url.rstrip("/") + "/admin/config"
    try:
        with client(5.0) as http:
            response = http.post(url, json=dict(settings), headers={"Authorization": f"Bearer {token}"})
        response.raise_for_status()
        return response.json() if response.content else None
    except httpx.HTTPStatusError as exc:
        code, detail = exc.response.status_code, exc.response.text[:500]
        raise ServerLaunchError(f"POST /admin/config refused ({code}): {detail}") from None
    except (httpx.HTTPError, ValueError) as exc:
        raise ServerLaunchError(f"POST /admin/config failed: {exc}") from None


def answers(http: httpx.Client, url: str, any_status: bool = False) -> bool:
    """Is the server up? `GET url` answers 200, or 401/403 (an app behind a login is up), or with
    `any_status` anything below 500 (a plain HTTP server without that route listens, hence is ready)."""
    try:
        status = http.get(url).status_code
    except httpx.TransportError:
        return False
    return status in (200, 401, 403) or (any_status and status < 500)


def wait_answering(url: str, timeout_s: float = 60.0) -> None:
    """Poll `GET url` until it answers at all (any status); RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    with client(2.0) as http:
        while time.monotonic() < deadline:
            try:
                http.get(url)
                return
            except httpx.TransportError:
                time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up within {timeout_s:g} s")
