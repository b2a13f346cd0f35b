"""The one list of wire protocols: the scenario's `protocol` -> its WireProtocol (members load lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

    from qbench.run.protocols.base import Clock, WireProtocol
    from qbench.run.scenario.payloads import PayloadGenerator
    from qbench.run.scenario.schema import Scenario


def make_protocol(scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock,
                  payloads: PayloadGenerator | None = None) -> WireProtocol:
    """The WireProtocol for `scenario.protocol` (a page load when `endpoint.page` is set) against `target`."""
    if scenario.endpoint.page is not None:
        from qbench.run.protocols.page import PageProtocol

        return PageProtocol(scenario, target, http, clock)
    if scenario.protocol == "openai":
        from qbench.run.protocols.openai import OpenAIProtocol

        return OpenAIProtocol(scenario, target, http, clock)
    if scenario.protocol == "http":
        from qbench.run.protocols.http import HttpProtocol

        return HttpProtocol(scenario, target, http, clock)
    if scenario.protocol == "mcp":
        from qbench.run.protocols.mcp import McpProtocol

        return McpProtocol(scenario, target, http, clock)
    from qbench.run.protocols.gradio import GradioProtocol

    return GradioProtocol(scenario, target, http, clock, payloads)
