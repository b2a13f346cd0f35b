"""The OpenAI front's own per-token timestamps, to check a client's TTFT and inter-token figures against.

For each streamed completion the server keeps when the request reached the handler and when each
content chunk was handed to the ASGI server for sending, on `time.perf_counter()` (CLOCK_MONOTONIC on
Linux, the clock qbench's records use too, so durations from both sides compare directly). The
client's request id is the `X-Request-Id` header when it sends one (qbench does; so do vLLM's and
most OpenAI-compatible clients' logs), else the completion id. The last `capacity` timelines are
kept (a ring), read with `GET /status/tokens`:

    {"clock": "perf_counter", "kept": 2, "dropped": 0,
     "timelines": [{"request_id": "17", "completion_id": "chatcmpl-...", "received_at_s": 812.113,
                    "token_at_s": [812.164, 812.184, ...], "finish_reason": "length"}, ...]}
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

#: Timelines kept by default: enough for a long bench run, bounded memory (~100 B per token).
DEFAULT_CAPACITY = 4096


@dataclass
class TokenTimeline:
    request_id: str  # the client's X-Request-Id, else the completion id
    completion_id: str  # the id the server gave the completion (chatcmpl-... / cmpl-...)
    received_at_s: float  # perf_counter when the request reached the handler
    token_at_s: list[float] = field(default_factory=list)  # perf_counter as each content chunk was sent
    finish_reason: str | None = None  # stop / length; None if the stream ended otherwise


class TokenLog:
    """A bounded ring of token timelines, newest last."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._ring: deque[TokenTimeline] = deque(maxlen=capacity)
        self.dropped = 0  # timelines pushed out of the ring since the server started

    def start(self, request_id: str | None, completion_id: str, received_at_s: float) -> TokenTimeline:
        if len(self._ring) == self._ring.maxlen:
            self.dropped += 1
        timeline = TokenTimeline(request_id or completion_id, completion_id, received_at_s)
        self._ring.append(timeline)
        return timeline

    def snapshot(self) -> dict[str, Any]:
        timelines = [asdict(t) for t in self._ring]
        return {"clock": "perf_counter", "kept": len(timelines), "dropped": self.dropped,
                "timelines": timelines}

    def clear(self) -> None:
        self._ring.clear()
        self.dropped = 0


def now() -> float:
    return time.perf_counter()
