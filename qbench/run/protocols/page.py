"""A page load as a browser makes it (`endpoint: {page: /}`), one request: the HTML, then its scripts,
stylesheets and their chunks, and the app's /config, theme and info, at most PARALLEL at a time."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import JOURNEY, Clock, fail, status_kind
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import Scenario, endpoint_label

PARALLEL = 6  # connections a browser opens per host
TAG_URL = re.compile(rb"<(?:script|link)\b[^>]*?\b(?:src|href)=[\"']([^\"']+)[\"']", re.I)
CHUNK = re.compile(rb"[\"'](\./[A-Za-z0-9_.-]+\.(?:js|css))[\"']")
FETCHED = (".js", ".mjs", ".css")


class PageProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        ep = scenario.endpoint
        assert ep.page is not None
        self.base = target.rstrip("/")
        self.url = self.base + "/" + ep.page.lstrip("/")
        self.http, self.clock, self.headers = http, clock, dict(ep.headers)
        self.endpoint_label = endpoint_label(scenario.protocol, ep)
        self.resources: list[str] = []  # everything after the HTML, learned by discover()
        self.heartbeat: str | None = None  # the app's heartbeat route (Gradio 4.x+), learned by discover()

    async def discover(self) -> dict[str, Any]:
        """Read the page once: the resources a visit loads (its assets, their chunks, the app's API)."""
        html = await self._get_checked(self.url)
        assets = page_assets(html, self.url)
        chunks: list[str] = []
        for script in [a for a in assets if urlsplit(a).path.endswith((".js", ".mjs"))]:
            chunks += entry_chunks(await self._get_checked(script), script)
        config = await self._json(self.base + "/config")
        prefix = str((config or {}).get("api_prefix") or "")
        if config and str(config.get("version") or "3").split(".")[0] not in ("2", "3"):
            self.heartbeat = self.base + prefix + "/heartbeat/"
        api = [self.base + path for path in ("/config", "/theme.css", prefix + "/info")] if config else []
        self.resources = list(dict.fromkeys(assets + chunks + api))
        return {"page": self.url, "resources": len(self.resources) + 1, "assets": len(assets),
                "chunks": len(chunks), "html_bytes": len(html), "heartbeat": self.heartbeat is not None}

    async def _get_checked(self, url: str) -> bytes:
        """`url`'s body, uncompressed; TargetError when it cannot be read."""
        try:
            async with self.http.get(url, headers={**self.headers, "Accept-Encoding": "identity"}) as resp:
                body = await resp.read()
        except (aiohttp.ClientError, OSError) as exc:
            raise TargetError(f"{url}: cannot connect ({exc.__class__.__name__}: {exc}); is the app "
                              "running, and is this its base URL?") from None
        if resp.status >= 400:
            raise TargetError(f"{url}: HTTP {resp.status}: the page (or an asset it names) is not served")
        return body

    async def _json(self, url: str) -> dict[str, Any] | None:
        try:
            async with self.http.get(url, headers=self.headers) as resp:
                data = orjson.loads(await resp.read()) if resp.status == 200 else None
        except (aiohttp.ClientError, OSError, orjson.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        record.sent_at_s = self.clock.now()
        record.bytes_sent = 0
        try:
            async with self.http.get(self.url, headers=self.headers) as resp:
                record.joined_at_s = self.clock.now()
                record.http_status = resp.status
                html = await resp.read()
            if resp.status >= 400:
                message = f"GET {self.url}: HTTP {resp.status}"
                fail(record, status_kind(resp.status), message, self.clock.now())
                return
            gate = asyncio.Semaphore(PARALLEL)
            sizes = await asyncio.gather(*(self._fetch(url, gate) for url in self.resources))
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"page {self.url}: {exc.__class__.__name__}: {exc}", self.clock.now())
            return
        except _Refused as refused:
            fail(record, refused.kind, str(refused), self.clock.now())
            return
        record.outputs = len(sizes) + 1
        record.bytes_received = len(html) + sum(sizes)
        record.completed_at_s = self.clock.now()
        record.outcome = "ok"
        journey = JOURNEY.get()
        if journey is not None and self.heartbeat is not None:
            journey.background.append(asyncio.create_task(self._beat(self.heartbeat + journey.session_hash)))

    async def _beat(self, url: str) -> None:
        """Hold the tab's heartbeat stream open, reading it, until the journey cancels it."""
        try:
            async with self.http.get(url, headers=self.headers) as resp:
                async for _ in resp.content.iter_any():
                    pass
        except (aiohttp.ClientError, OSError):
            return  # the journey's own requests say whether the app still answers

    async def _fetch(self, url: str, gate: asyncio.Semaphore) -> int:
        async with gate, self.http.get(url, headers=self.headers) as resp:
            body = await resp.read()
        if resp.status >= 400:
            raise _Refused(status_kind(resp.status), f"GET {url}: HTTP {resp.status} (loading {self.url})")
        return len(body)

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: the executor cancels the fetches."""

    async def close(self) -> None:
        return None


class _Refused(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def page_assets(html: bytes, page_url: str) -> list[str]:
    """The scripts and stylesheets a page's tags name, as absolute URLs on the page's host only."""
    host = urlsplit(page_url).netloc
    found = []
    for raw in TAG_URL.findall(html):
        url = urljoin(page_url, raw.decode("utf-8", "replace"))
        parts = urlsplit(url)
        if parts.netloc == host and parts.path.endswith(FETCHED):
            found.append(url)
    return list(dict.fromkeys(found))


def entry_chunks(script: bytes, script_url: str) -> list[str]:
    """The chunks an entry script names ("./name-hash.js" / ".css"), as absolute URLs."""
    return list(dict.fromkeys(urljoin(script_url, m.decode()) for m in CHUNK.findall(script)))
