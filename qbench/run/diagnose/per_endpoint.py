"""Where was the limit, per function, in a run of several endpoints: the run's findings, each endpoint's, and
`shared_group` or `starved` for an endpoint held back behind another function's jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qbench.run.diagnose.limits import Finding, diagnose
from qbench.run.records.columns import Columns, Held
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import Summary

STARVED_SHARE = 0.3  # of an endpoint's waiting time with none of its own jobs running
OTHERS_BUSY = 0.8  # of that time with another endpoint's jobs running
GRID = 800
ONCE = ("usage", "generator")  # findings about the whole server or the generator: said for the total only


def diagnose_run(records: Columns | Sequence[RequestRecord], summary: Summary,
                 server: dict[str, Any] | None = None, generator_warnings: list[str] | None = None, *,
                 cpus: int | None = None) -> list[Finding]:
    """Findings for the run, then per endpoint of a mix; `cpus`: the server host's cores when known."""
    cols = Held(Columns.of(records))
    findings = diagnose(cols, summary, server, generator_warnings, cpus=cpus)
    if not summary.endpoints:
        return findings
    measured = cols.where(cols.measured() & ~np.isnan(cols.floats("sent_at_s")))
    codes, labels = measured.labels("endpoint")
    groups = _groups(server)
    for label, sub in summary.endpoints.items():
        own = codes == (labels.index(label) if label in labels else -2)
        mine = measured.where(own)
        behind = None
        if _waits(sub):
            behind = _shared_group(label, summary, groups) or _starved(label, measured, codes, labels)
        idle = _idle_while_waiting(mine)
        for f in diagnose(mine, sub, _for_function(server, label), cpus=cpus, describe=False):
            if f.kind in ONCE or (behind is not None and f.kind == "headroom"):
                continue
            if idle and f.kind in ("queue_limit", "model_bound"):  # its own limit was not what held it
                continue
            findings.append(Finding(f.kind, f"{label}: {f.message}"))
        if behind is not None:
            findings.append(behind)
    return findings


def _waits(sub: Summary) -> bool:
    """The endpoint's requests waited longer than they ran, on average (the mean: backlogs show in tails)."""
    wait, service = sub.phase("queue_wait_s").mean, sub.phase("service_s").mean
    return wait is not None and service is not None and wait > service


def _for_function(server: dict[str, Any] | None, label: str) -> dict[str, Any] | None:
    """The run's server snapshot as if `label` were its endpoint (its fn_index: its configured slots)."""
    if not isinstance(server, dict):
        return server
    mine = (server.get("mix") or {}).get(label)
    if not isinstance(mine, dict) or "fn_index" not in mine:
        return server
    return {**server, "fn_index": mine["fn_index"]}


def _groups(server: dict[str, Any] | None) -> dict[str, tuple[str, int | None]]:
    """api_name -> (explicit concurrency_id, the group's limit: its lowest), from the server's settings."""
    status = server.get("status") if isinstance(server, dict) else None
    settings = status.get("settings") if isinstance(status, dict) else None
    if not isinstance(settings, dict):
        return {}
    default = (settings.get("queue") or {}).get("default_concurrency_limit")
    out: dict[str, tuple[str, int | None]] = {}
    limits: dict[str, list[int]] = {}
    for fn in settings.get("functions") or []:
        gid = fn.get("concurrency_id") if isinstance(fn, dict) else None
        if gid is None:
            continue
        limit = fn.get("concurrency_limit")
        limit = default if limit == "default" else limit
        if isinstance(limit, int):
            limits.setdefault(gid, []).append(limit)
        out[str(fn.get("api_name"))] = (gid, None)
    return {name: (gid, min(limits[gid]) if gid in limits else None) for name, (gid, _) in out.items()}


def _shared_group(label: str, summary: Summary, groups: dict[str, tuple[str, int | None]]) -> Finding | None:
    if label not in groups:
        return None
    gid, limit = groups[label]
    others = [o for o in summary.endpoints if o != label and groups.get(o, ("",))[0] == gid]
    if not others:
        return None
    busy = {name: _busy_s(summary.endpoints[name]) for name in [label, *others]}
    total = sum(busy.values())
    share = sum(busy[o] for o in others) / total if total > 0 else 0.0
    cap = f"one limit of {limit} for the group" if limit is not None else "one limit for the group"
    names = ", ".join(others)
    return Finding("shared_group", (
        f"{label} shares concurrency_id '{gid}' with {names} ({cap}): {names} took {share:.0%} of the "
        f"group's running time, and {label} waited {_means(summary.endpoints[label])}: the backlog of "
        f"{names} delays {label}; give {label} its own concurrency_id, or raise the group's limit if "
        "the model has headroom"))


def _means(sub: Summary) -> str:
    wait, service = sub.phase("queue_wait_s").mean, sub.phase("service_s").mean
    return f"{_ms(wait)} in the queue on average for {_ms(service)} of service"


def _busy_s(sub: Summary) -> float:
    service = sub.phase("service_s")
    return (service.mean or 0.0) * service.count


def _starved(label: str, measured: Columns, codes: np.ndarray, labels: list[str]) -> Finding | None:
    """The endpoint waited with none of its own jobs running while another's ran. `codes`, `labels`: the
    endpoint of each of the `measured` requests (Columns.labels)."""
    own = codes == labels.index(label) if label in labels else np.zeros(len(measured), dtype=bool)
    if own.sum() < 20:
        return None
    start = float(np.nan_to_num(measured.floats("sent_at_s")).min())
    end = float(_last(measured).max())
    grid = np.linspace(start, end, GRID)
    waiting, running = _counts(measured.where(own), grid)
    starved = (waiting > 0) & (running == 0)
    if not waiting.any() or starved.sum() < STARVED_SHARE * (waiting > 0).sum():
        return None
    best, busiest = None, 0.0
    for other in sorted(set(labels) - {label}):
        _, theirs = _counts(measured.where(codes == labels.index(other)), grid)
        share = float((theirs[starved] > 0).mean())
        if share > busiest:
            best, busiest = other, share
    if best is None or busiest < OTHERS_BUSY:
        return None
    idle = starved.sum() / (waiting > 0).sum()
    return Finding("starved", (
        f"{label}'s requests waited with none of its own jobs running {idle:.0%} of their "
        f"waiting time, and {best}'s jobs were running {busiest:.0%} of those moments: {label} "
        f"waits behind {best} (a shared concurrency_id, Gradio's default for events of one Python "
        "function, a shared worker pool as Gradio 3.x's concurrency_count, or max_threads); give it "
        "its own concurrency_id"))


def _idle_while_waiting(records: Columns) -> bool:
    """Most of the time the endpoint's requests waited, none of its own jobs ran."""
    sent = records.floats("sent_at_s")
    if not (~np.isnan(sent)).any():
        return False
    grid = np.linspace(float(np.nanmin(sent)), float(_last(records).max()), GRID)
    del sent
    waiting, running = _counts(records, grid)
    waited = waiting > 0
    return bool(waited.any() and (running[waited] == 0).mean() > 0.5)


def _or(value: np.ndarray, other: np.ndarray | float) -> np.ndarray:
    """Python's `value or other` for each value: `other` where the value is None (NaN) or 0."""
    return np.where(np.isnan(value) | (value == 0), other, value)


def _last(records: Columns) -> np.ndarray:
    """Each request's last time: completed, else sent, else 0 (the records' `completed or sent or 0`)."""
    return _or(records.floats("completed_at_s"), _or(records.floats("sent_at_s"), 0.0))


def _counts(records: Columns, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Requests waiting (sent, not started) and running (started, not completed) at each grid time."""
    def le(times: np.ndarray) -> np.ndarray:
        return np.searchsorted(times, grid, side="right")

    sent_all = records.floats("sent_at_s")
    is_sent = ~np.isnan(sent_all)
    times = sent_all[is_sent]
    del sent_all
    times.sort()
    waiting = le(times)
    started_all, completed_all = records.floats("started_at_s"), records.floats("completed_at_s")
    times = np.where(np.isnan(started_all), _or(completed_all, np.inf), started_all)[is_sent]  # left
    times.sort()
    waiting -= le(times)
    has_start = ~np.isnan(started_all)
    times = started_all[has_start]
    del started_all
    times.sort()
    running = le(times)
    times = completed_all[has_start]
    del completed_all
    times[np.isnan(times)] = np.inf
    times.sort()
    running -= le(times)
    return waiting, running


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"
