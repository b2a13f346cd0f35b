"""The commented scenario YAML `qbench init` writes from a Draft (no secret written)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from qbench.run.protocols.gradio_api import Suggestion, flow
from qbench.run.scenario.credentials import Auth, is_secret_header

PASSWORD_ENV = "APP_PASSWORD"
VARIANTS = 16
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")

@dataclass
class DraftInput:
    """One payload input and what it stands for."""

    what: str  # e.g. "Slider 'Size'"
    suggestion: Suggestion


@dataclass
class Draft:
    """What `render` writes: one endpoint of one protocol, its inputs, the load and the SLO."""

    name: str
    protocol: str
    endpoint: dict[str, Any]
    inputs: list[DraftInput]
    about: list[str]  # header comment lines (what was read, from which release)
    slo: dict[str, float]
    notes: list[str] = field(default_factory=list)  # said on the console (other endpoints, what to edit)
    endpoint_notes: list[str] = field(default_factory=list)  # comments above `endpoint:`
    fill_in: bool = False  # the user must edit the file before it runs


#: Where each protocol's scenario was read from (the header's first line).
READ_FROM = {"gradio": "the app's own API", "openai": "the server's GET /v1/models",
             "mcp": "the server's tools/list", "http": "what the server publishes"}
#: What a per-request timeout does, per protocol (the `timeout:` line's comment).
TIMEOUT_DOES = {
    "gradio": "a timed-out Gradio event is cancelled",
    "openai": "a timed-out request's connection is closed (the server stops generating)",
    "mcp": "a timed-out tool call's stream is closed",
    "http": "a timed-out request's connection is closed",
}
#: The SLO comment's examples, per protocol.
SLO_EXAMPLES = {
    "openai": [
        "slo:",
        "  # What your users tolerate: p95_ttft_s, the wait for a reply's first token (~1-2 s for a chat),",
        "  # and p95_latency_s, the whole reply; p99_itl_s bounds the gaps between tokens (over every gap).",
        "  # Token keys need endpoint.stream: true. `qbench run` exits 3 when one is missed; `qbench",
        "  # capacity` finds the highest rate that meets them; `qbench sweep` ranks server settings by them.",
    ],
}
LOAD_LINES = [
    "load:",
    "  # A first, gentle load: 4 users in a closed loop, each sends, waits for its answer, then waits",
    "  # 1 s more. How many users can it take? `qbench capacity` on this file finds the highest rate",
    "  # that meets the SLO below. For an open-loop rate, replace users/think_time/ramp_up with",
    "  # `rate: 2` (requests per second) and `arrival: poisson`.",
    "  users: 4",
    "  think_time: 1",
    "  ramp_up: 2                        # users start spread over 2 s",
    "  duration: 30                      # seconds of load",
    "  warmup: 5                         # requests in the first 5 s are not summarised",
    "  timeout: 60                       # per request; {timeout_does}",
]

SLO_LINES = [
    "slo:",
    "  # What your users tolerate, end to end (queue wait + processing). Start from the p95 latency you",
    "  # would accept (a classifier ~1 s, a chat reply's first token ~1-2 s, an image generation 10-30 s),",
    "  # then tighten it. `qbench run` exits 3 when it is missed; `qbench capacity` finds the highest",
    "  # rate that meets it; `qbench sweep` ranks server settings by it.",
]


def load_lines(protocol: str) -> list[str]:
    """The `load:` section, its comments fitting `protocol`."""
    does = TIMEOUT_DOES.get(protocol, TIMEOUT_DOES["http"])
    return [line.replace("{timeout_does}", does) for line in LOAD_LINES]


def slo_lines(protocol: str) -> list[str]:
    """The `slo:` section's comment, fitting `protocol`."""
    return SLO_EXAMPLES.get(protocol, SLO_LINES)


def render(draft: Draft, target: str, auth: Auth, command: str) -> str:
    """The whole scenario file for `draft`."""
    read_from = READ_FROM.get(draft.protocol, READ_FROM["http"])
    lines = [f"# Written by `{command}` from {read_from}: {draft.about[0]}."]
    lines += [f"# {line}" for line in draft.about[1:]]
    if draft.fill_in:
        lines.append("# Edit the parts marked FILL IN, then: qbench run THIS_FILE")
    else:
        lines.append("# It runs as it is: qbench run THIS_FILE (edit the generators to match real traffic).")
    lines += [f"name: {_scalar(draft.name)}", f"target: {_scalar(target)}", f"protocol: {draft.protocol}"]
    lines += endpoint_lines(draft)
    lines += load_lines(draft.protocol)
    lines += slo_lines(draft.protocol) + [f"  {key}: {_number(value)}" for key, value in draft.slo.items()]
    lines += auth_lines(auth)
    return "\n".join(lines) + "\n"


def render_mix(drafts: list[Draft], target: str, auth: Auth, command: str) -> str:
    """A scenario whose `mix:` sends every draft's endpoint with an equal weight, to edit."""
    fill_in = any(d.fill_in for d in drafts)
    lines = [f"# Written by `{command}` from the app's own API: {drafts[0].about[0].split(', endpoint')[0]}, "
             f"a mix of its {len(drafts)} public endpoints.",
             "# Each request picks an endpoint by weight (relative: weights 3 and 1 send 75% and 25%):",
             "# set them to the share of traffic each event really gets.",
             "# Edit the parts marked FILL IN, then: qbench run THIS_FILE" if fill_in else
             "# It runs as it is: qbench run THIS_FILE (edit weights and generators to match real traffic)."]
    lines += ["name: mix", f"target: {_scalar(target)}", f"protocol: {drafts[0].protocol}", "mix:"]
    own = len({tuple(d.slo.items()) for d in drafts}) > 1  # a stream beside clicks: bounds of its own
    for draft in drafts:
        lines += [f"  # {draft.about[0]}", "  - weight: 1"]
        lines += endpoint_lines(draft, "    ")
        if own:
            bounds = {k: v for k, v in draft.slo.items() if k != "error_rate"}
            lines.append(f"    slo: {_flow_mapping(bounds)}")
    lines += load_lines(drafts[0].protocol)
    slo = {"error_rate": 0.01} if own else {k: v for d in drafts for k, v in d.slo.items()}
    lines += slo_lines(drafts[0].protocol) + [f"  {key}: {_number(value)}" for key, value in slo.items()]
    lines += auth_lines(auth)
    return "\n".join(lines) + "\n"


def endpoint_lines(draft: Draft, indent: str = "") -> list[str]:
    """`endpoint:` and `payload:` for one draft: a comment above each input saying what it accepts."""
    lines = [f"{indent}# {note}" for note in draft.endpoint_notes]
    lines.append(f"{indent}endpoint: {_flow_mapping(draft.endpoint)}")
    specs = [i.suggestion.spec for i in draft.inputs]
    rows = [len(spec["example"]["values"]) for spec in specs if "example" in spec]
    variants = max([VARIANTS, *rows])  # every example row is sent
    lines += [f"{indent}payload:", f"{indent}  seed: 0",
              f"{indent}  variants: {variants:<22}# distinct input sets, made before the run and cycled"]
    if not draft.inputs:
        lines.append(f"{indent}  inputs: []                      # the endpoint takes no input")
        return lines
    lines.append(f"{indent}  inputs:")
    for n, item in enumerate(draft.inputs, 1):
        made = item.suggestion
        lines.append(f"{indent}    # {n}. {item.what}: {made.note}")
        if made.alternative is not None:
            lines.append(f"{indent}    #    or generated: - {flow(made.alternative)}")
        lines.append(f"{indent}    - {flow(made.spec)}")
    return lines


def auth_lines(auth: Auth) -> list[str]:
    """The `auth:` section for the credentials `qbench init` used (none: no section)."""
    if not auth.is_set:
        return []
    section: dict[str, Any] = {}
    lines = ["auth:"]
    if auth.login is not None and auth.login.username is not None:
        password = auth.login.password or ""
        if not _ENV_REF.match(password):
            password = "${" + PASSWORD_ENV + "}"
            lines.append(f"  # the app asks for a login: set {PASSWORD_ENV} (or pass --auth USER:PASSWORD)")
        section["login"] = {"username": auth.login.username, "password": password}
    if auth.bearer is not None and _ENV_REF.match(auth.bearer):
        section["bearer"] = auth.bearer
    secret = sorted(k for k in auth.headers if is_secret_header(k, auth.secret_headers))
    plain = {k: v for k, v in auth.headers.items() if k not in secret}
    if plain:
        section["headers"] = plain
    if secret:
        lines.append(f"  # not written (secrets): headers {', '.join(secret)}; pass them with --header")
    if not section:
        return []
    for key, value in section.items():
        lines.append(f"  {key}: {_flow_mapping(value) if isinstance(value, dict) else _scalar(value)}")
    return lines


def _flow_mapping(value: dict[str, Any]) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6).strip()


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _number(value: float) -> str:
    return f"{value:g}"
