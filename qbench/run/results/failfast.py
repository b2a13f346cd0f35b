"""Never fail silently: stop a run whose opening requests all fail the same way, and say why."""

from __future__ import annotations

from qbench.run.records.schema import RequestRecord

STOP_PREFIX = "stopped early"  # how the stop reason of a run this guard stopped begins

OPENING_REQUESTS = 20
OPENING_S = 3.0
GUARDED_KINDS = frozenset({"connect", "http_4xx", "http_5xx", "stream_broken", "client"})

_HINTS_BY_STATUS = {
    401: (
        "this app asks for a login: set auth.login (--auth USER:PASS); for a token or an API key set "
        "auth.bearer (--bearer-env NAME) or auth.headers (already set: check them)"
    ),
    403: (
        "the Space is private or access is denied: set auth.bearer (--bearer-env HF_TOKEN) or the header "
        "the gateway wants in auth.headers (already set: check them)"
    ),
    404: (
        "the route does not exist: a wrong prefix (Gradio 5+ serves its API under /gradio_api, 3.x and 4.x "
        "at the root), the wrong Gradio protocol (set gradio_protocol) or the wrong target URL"
    ),
    405: "the route exists but not for this method: the wrong Gradio protocol (set gradio_protocol)?",
    422: "the server rejected the request body: check endpoint (api_name / fn_index) and payload.inputs",
}
_HINTS_BY_KIND = {
    "connect": "nothing answers there: is the server up, and are the host and port right?",
    "http_4xx": "the server refuses the requests: check the endpoint and the payload",
    "http_5xx": "the server fails before running the function: check its log",
    "stream_broken": "the server ends the stream early: the wrong Gradio protocol (set gradio_protocol)?",
    "client": "a qbench bug: please report it with the run directory",
}


class OpeningGuard:
    """Watches finished requests until the opening is judged; `verdict` is set when it all failed."""

    def __init__(self, requests: int = OPENING_REQUESTS, window_s: float = OPENING_S) -> None:
        self.size = requests
        self.window_s = window_s
        self.seen: list[RequestRecord] = []
        self.done = False
        self.verdict: str | None = None
        self._window_closed = False

    def observe(self, record: RequestRecord) -> str | None:
        """A sent request finished; returns the verdict when this one completes a failed opening."""
        if self.done or record.sent_at_s is None:
            return None
        self.seen.append(record)
        kind = record.error_kind
        if record.ok or kind not in GUARDED_KINDS or kind != self.seen[0].error_kind:
            self.done = True
            return None
        return self._judge()

    def tick(self, elapsed_s: float, sent: int) -> str | None:
        """Called as the run goes: once past the window, the opening is what was sent by then."""
        if not self.done and not self._window_closed and elapsed_s >= self.window_s:
            self._window_closed = True
            self.size = min(self.size, max(sent, 1))
        return self._judge()

    def finish(self, sent: int) -> str | None:
        """The run is over: judge a shorter opening on what was sent (a run of 5 that all failed)."""
        self._window_closed = True
        self.size = min(self.size, max(sent, 1))
        return self._judge()

    def _judge(self) -> str | None:
        if self.done or len(self.seen) < self.size:
            return None
        self.done = True
        self.verdict = describe(self.seen)
        return self.verdict


def describe(records: list[RequestRecord]) -> str:
    """ "the first N requests all failed with KIND: <sample>; likely cause: <hint>"."""
    first = records[0]
    kind = first.error_kind or "client"
    message = first.error_message or "(no message)"
    if "(websocket)" in message and first.http_status in (403, 404):  # starlette: no such websocket route
        hint = "no websocket route there: only Gradio 3.x speaks ws (leave gradio_protocol to /config)"
    else:
        by_status = _HINTS_BY_STATUS.get(first.http_status or 0)
        hint = by_status or _HINTS_BY_KIND.get(kind, "see the sample message")
    count = "the first request" if len(records) == 1 else f"the first {len(records)} requests all"
    return f"{count} failed with {kind}: {message}; likely cause: {hint}"
