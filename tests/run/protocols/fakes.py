"""Stand-ins for aiohttp's response in the wire tests: a body played back chunk by chunk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson


def sse(*messages: dict[str, Any]) -> list[bytes]:
    """Server-sent-event frames, one a message."""
    return [b"data: " + orjson.dumps(m) + b"\n\n" for m in messages]


class FakeContent:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def read(self) -> bytes:
        return b""


class FakeResponse:
    """A response with `status` whose body is `chunks` (bytes, or messages sent as SSE frames)."""

    def __init__(self, status: int, body: bytes | list[bytes] | list[dict[str, Any]]) -> None:
        self.status = status
        if isinstance(body, bytes):
            chunks = [body]
        else:
            chunks = [c if isinstance(c, bytes) else sse(c)[0] for c in body]
        self.content = FakeContent(chunks)

    async def read(self) -> bytes:
        return b"".join(self.content.chunks)

    async def __aenter__(self) -> FakeResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None
