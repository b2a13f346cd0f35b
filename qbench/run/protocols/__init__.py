"""Wire protocols: `base` (the WireProtocol interface, the HTTP session from the scenario's limits),
`gradio` (queue join + uploads + cancel) with `sse` (one SSE reader per session), `http`
(plain request/response with a JSON body template, streamed bodies read as they arrive) and `openai`
(OpenAI-compatible completions: TTFT, inter-token gaps, token counts).

`make_protocol` is the one list of what exists: the interface in `base` never imports its
implementations; this package does, lazily, so importing `base` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

    from qbench.run.protocols.base import Clock, WireProtocol
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
