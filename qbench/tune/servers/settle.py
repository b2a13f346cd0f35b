"""Between two runs against one server: wait until the queue the first one left behind has drained (Gradio's
queue/status), so the next run measures its own rate, not that backlog."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from qbench.run import Writer, control

SETTLE_FILE = "settle.json"


@dataclass(frozen=True)
class Settled:
    """How the wait went: seconds waited, the queue size first and last seen (None: no status), drained."""

    waited_s: float
    queue_size: int | None
    drained: bool
    note: str = ""
    found_waiting: int | None = None


def queue_status_url(client: httpx.Client, base_url: str) -> str:
    """<base><api_prefix>/queue/status (`api_prefix` from /config: /gradio_api from 5.0, absent before)."""
    config = client.get(base_url.rstrip("/") + "/config").raise_for_status().json()
    prefix = str(config.get("api_prefix") or "") if isinstance(config, dict) else ""
    return base_url.rstrip("/") + prefix + "/queue/status"


def waiting(client: httpx.Client, url: str) -> int:
    size = client.get(url).raise_for_status().json().get("queue_size")
    if not isinstance(size, int):
        raise ValueError(f"queue_size {size!r} is not a count")
    return size


def wait_for_empty_queue(base_url: str, timeout_s: float = 60.0, poll_s: float = 0.1) -> Settled:
    """Poll the queue's status until no event waits, at most `timeout_s`; never raises."""
    started = time.monotonic()
    size: int | None = None
    first: int | None = None
    try:
        with control.client(5.0) as client:
            url = queue_status_url(client, base_url)
            first = size = waiting(client, url)
            while size > 0 and time.monotonic() - started < timeout_s:
                time.sleep(poll_s)
                size = waiting(client, url)
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return Settled(time.monotonic() - started, size, False, f"no queue status: {exc}", first)
    drained = size == 0
    note = "" if drained else f"still {size} waiting after {timeout_s:g} s; the next run starts anyway"
    return Settled(time.monotonic() - started, size, drained, note, first)


def settle(base_url: str, run_dir: Path, timeout_s: float = 60.0) -> Settled:
    """`wait_for_empty_queue`, noted in `run_dir/settle.json` when it had to wait or could not tell."""
    settled = wait_for_empty_queue(base_url, timeout_s)
    if settled.found_waiting or not settled.drained:
        Writer().json(run_dir / SETTLE_FILE, asdict(settled))  # numbers and a note: nothing to mask
    return settled
