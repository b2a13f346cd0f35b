"""Wire protocols: `base` (the WireProtocol interface, the HTTP session from the scenario's limits),
`gradio` (discovery, inputs and uploads for every Gradio release) over one `QueueWire` per Gradio
family (`queue` states them: `ws`, `sse_join`, `sse`), `http` (plain request/response with a JSON body
template, streamed bodies read as they arrive) and `openai` (OpenAI-compatible completions: TTFT,
inter-token gaps, token counts).

`make_protocol` and `make_wire` are the one list of what exists: the interfaces in `base` and `queue`
never import their implementations; this package does, lazily, so importing `base` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

    from qbench.run.protocols.base import Clock, WireProtocol
    from qbench.run.protocols.queue import GradioApp, QueueWire
    from qbench.run.scenario import Scenario


def make_protocol(scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> WireProtocol:
    """The WireProtocol for `scenario.protocol` ("gradio", "http" or "openai") against `target`."""
    if scenario.protocol == "openai":
        from qbench.run.protocols.openai import OpenAIProtocol

        return OpenAIProtocol(scenario, target, http, clock)
    if scenario.protocol == "http":
        from qbench.run.protocols.http import HttpProtocol

        return HttpProtocol(scenario, target, http, clock)
    from qbench.run.protocols.gradio import GradioProtocol

    return GradioProtocol(scenario, target, http, clock)


def make_wire(app: GradioApp, http: aiohttp.ClientSession, clock: Clock, pool: int) -> QueueWire:
    """The QueueWire for `app.family` (pool: session-pool size, 0 = a new session per request)."""
    if app.family == "ws":
        from qbench.run.protocols.ws import WebSocketWire

        return WebSocketWire(app, http, clock, pool)
    if app.family == "sse":
        from qbench.run.protocols.sse_join import JoinStreamWire

        return JoinStreamWire(app, http, clock, pool)
    from qbench.run.protocols.sse import SessionStreamWire

    return SessionStreamWire(app, http, clock, pool)
