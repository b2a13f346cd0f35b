"""What a sweep's recommendation says beside its ranking: the winner as code (settings, a launch
command, a framework's code), a paired comparison with the runner-up, and the notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from qbench.run import Columns, pair_runs, read_records
from qbench.tune.knobs.frameworks import bentoml_code, litserve_code, rayserve_code, torchserve_code
from qbench.tune.knobs.reference import apply_server_knobs
from qbench.tune.ranking.recommend import Advice, RankedPoint, Ranking, max_size_advice
from qbench.tune.servers.apphook import HookRecord, app_change, read_hook_record
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.evaluate import PointServers
from qbench.tune.values.ceiling import CapacityRecord
from qbench.tune.values.result import PointResult


def sweep_advice(config: SweepConfig, defaults: dict[str, Any], servers: PointServers, ranking: Ranking,
            capacity: CapacityRecord | None, capacity_notes: list[str]) -> Advice:
    """What the recommendation says beside the ranking: code inputs, the winner's capacity and notes."""
    winner, gradio = ranking.winner, config.scenario.protocol == "gradio"
    # what the startup hook read at the winner's launch (an app qbench started): read once, used thrice
    hook = read_hook_record(config.sweep_dir / "points" / winner.point_id) if winner and config.hook else None
    code, label = "", ""
    if winner is not None and servers.framework == "litserve":
        code, label = litserve_advice(hook, winner)
    elif winner is not None and servers.framework == "bentoml":
        code, label = bentoml_advice(hook, winner)
    elif winner is not None and servers.framework == "rayserve":
        code, label = rayserve_advice(hook, winner)
    elif winner is not None and servers.framework == "torchserve":
        code, label = torchserve_advice(hook, winner)
    elif winner is not None and not gradio:
        advised = max_size_advice(winner, config.constraints).max_size
        code, label = server_advice(config, winner, advised)
    notes = config.grid.edge_notes(winner.knobs) if winner is not None else []
    notes += paired_note(config.sweep_dir, ranking.ranked)
    if hook is not None and hook.chosen and not defaults:  # an app: its own settings where unswept
        defaults = hook.app_settings(hook.chosen[0])
    change = app_change(hook, winner.knobs) if winner and hook is not None and hook.launched else []
    return Advice(
        defaults=defaults, gradio_major=servers.gradio_major, objective_why=config.objective_why,
        gradio=gradio, server_api=server_api(config, servers),
        server_code=code, server_code_label=label, app_change=change,
        capacity=capacity, notes=notes + capacity_notes, framework=servers.framework,
        own_cap_now=hook.own_queue_cap() if hook is not None else "",
    )


def server_api(config: SweepConfig, servers: PointServers) -> str | None:
    """The endpoint's name for a gradio.Server app (settings: `@server.api(...)` arguments), else None."""
    if servers.app_mode != "server":
        return None
    return config.scenario.endpoint.api_name or ""


def litserve_advice(hook: HookRecord | None, winner: PointResult) -> tuple[str, str]:
    """(code, label): the winner as LitServe code, from what the hook read at the winner's launch."""
    part = hook.litserve if hook is not None else {}
    apis = part.get("apis") or [{}]
    own = {**(apis[0].get("app") or {}), **((part.get("server") or {}).get("app") or {})}
    release = f" {part['version']}" if part.get("version") else ""
    code = litserve_code(winner.knobs, str(apis[0].get("type") or "MyAPI"), own)
    return code, f"LitServe{release}: your app's API and server with the winner's settings"


def bentoml_advice(hook: HookRecord | None, winner: PointResult) -> tuple[str, str]:
    """(code, label): the winner as a BentoML service's decorators, from the hook's record."""
    part = hook.bentoml if hook is not None else {}
    apis = [a for a in part.get("apis") or [] if (a.get("app") or {}).get("batchable")] or [{}]
    own = {**(apis[0].get("app") or {}), **((part.get("service") or {}).get("app") or {})}
    own.pop("batchable", None)
    release = f" {part['version']}" if part.get("version") else ""
    code = bentoml_code(winner.knobs, str(part.get("name") or "MyService"),
                        str(apis[0].get("name") or "predict"), own)
    return code, f"BentoML{release}: your service's decorators with the winner's settings"


def rayserve_advice(hook: HookRecord | None, winner: PointResult) -> tuple[str, str]:
    """(code, label): the winner as a Ray Serve deployment's decorators, from the hook's record."""
    part = hook.rayserve if hook is not None else {}
    batches = part.get("batches") or []
    deployments = part.get("deployments") or []
    ingress = next((d for d in deployments if d.get("ingress")), deployments[0] if deployments else {})
    batch = batches[0] if batches else {}
    method = str(batch.get("name") or "predict").rsplit(".", 1)[-1]
    release = f" {part['version']}" if part.get("version") else ""
    code = rayserve_code(winner.knobs, str(ingress.get("name") or "MyModel"), method,
                         batch.get("app") or {}, ingress.get("app") or {}, batched=bool(batches))
    return code, f"Ray Serve{release}: your deployment's decorators with the winner's settings"


def torchserve_advice(hook: HookRecord | None, winner: PointResult) -> tuple[str, str]:
    """(code, label): the winner as TorchServe configuration, from the launcher's record."""
    part = hook.torchserve if hook is not None else {}
    models = part.get("models") or []
    own = dict((models[0].get("app") or {}) if models else {})
    release = f" {part['version']}" if part.get("version") else ""
    code = torchserve_code(winner.knobs, models, own)
    return code, f"TorchServe{release}: your config.properties with the winner's settings"


def server_advice(config: SweepConfig, winner: PointResult, advised: int | None) -> tuple[str, str]:
    """(code, label) for a plain HTTP target: reference-server settings, or the launch command."""
    knobs = dict(winner.knobs)
    if config.base_settings is not None:
        if "max_size" not in knobs and advised is not None:
            knobs["max_size"] = advised
        settings = apply_server_knobs(config.base_settings, knobs, config.api_name)
        settings.pop("admin_token", None)
        had_auth = settings.pop("auth", None) is not None  # secrets never reach advice or its files
        body = yaml.safe_dump(settings, sort_keys=False)
        if had_auth:
            body += "# auth: as in your settings (qbench never writes credentials)\n"
        return body, "reference server settings: save as server.yaml, then qbench serve --config server.yaml"
    if config.launch is not None:
        command = config.launch.format_map({**knobs, "port": "{port}"})
        return command, "your app's command with the winner's knobs"
    return "", ""


def paired_note(sweep_dir: Path, ranked: list[RankedPoint]) -> list[str]:
    """Whether the winner and the runner-up differ request by request, when their runs share a schedule."""
    ok = [r for r in ranked if r.verdict not in ("failed", "infeasible", "knobs_not_applied")][:2]
    if len(ok) < 2:
        return []
    try:
        first, second = (read_records(sweep_dir / "points" / r.point_id) for r in ok)
    except (OSError, ValueError):
        return []
    pairing = pair_runs(Columns.of(second), Columns.of(first))  # B = the winner, A = the runner-up
    latency = {p.phase: p for p in pairing.phases}.get("latency_s")
    if not pairing.shared or latency is None:
        return []
    winner, runner_up = ok[0].point_id, ok[1].point_id
    head = f"per request, {winner} against the runner-up {runner_up} ({latency.pairs} pairs, one schedule)"
    if latency.verdict == "no clear difference":
        return [f"{head}: no clear latency difference (p = {_p(latency.p_value)}); "
                "their latency order is within the noise"]
    ms = [f"{v * 1000:+.1f}" for v in (latency.median_diff, latency.ci_low, latency.ci_high)]
    return [f"{head}: latency median {ms[0]} ms (95% CI {ms[1]} to {ms[2]} ms), {winner} faster for "
            f"{latency.b_faster:.0%} of requests ({latency.verdict})"]


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2g}"
