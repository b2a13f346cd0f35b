"""Where was the limit? Records (+ the server's settings, usage and phases when it reports them) -> findings,
most specific first: generator, usage, server_cpu, device or per_request_work, idle_slots, model_bound,
queue_limit, headroom, warmup, then phase findings. Rules: docs/design/load-diagnosis-reports.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import numpy as np

from qbench.run.diagnose.finding import Finding
from qbench.run.diagnose.phases import (
    MODEL_SHARE,
    Breakdown,
    Demand,
    breakdown,
    demand,
    phase_findings,
    phase_medians,
)
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord
from qbench.run.results.steady import Steadiness, steadiness
from qbench.run.results.summary import Summary

__all__ = ["Finding", "Usage", "configured_slots", "diagnose", "generator_lag", "host_cpus", "server_usage"]

GROWTH_MODEL_BOUND = 1.5
MIN_REQUESTS = 20
MIN_GROUP = 20  # requests in each group compared for growth
LOOP_BUSY = 0.5  # share of a core (run or waited for) that counts as an event loop at its limit...
LOOP_CROWDED = 0.1  # the loop waited for a core this share of the run: the host's other processes
LOOP_SHARE = 0.8  # ... when it also did this share of the server's CPU (not a thread pool's work)
GEN_LAG_SHARE = 0.5  # the generator's lag, as a share of the excess queue wait, that explains the wait
GEN_LAG_MIN_S = 0.02  # below this the generator's lag explains no queue
MIN_WAIT_S = 0.005  # an excess queue wait below this is the protocol's, not a queue
MIN_RUNNING = 0.5  # fewer running on average while requests waited: they did not wait for the function
CLOSED_WAIT_SHARE = 0.1  # closed loop: an excess wait beyond this share of the service is a queue
BUSY = 0.75  # a resource busy this share of the run is saturated (two that alternate: 0.5 each at most)
HELP_PER_REQUEST = (
    "decode and preprocess in worker processes or on the GPU, run several server processes behind one "
    "address, keep uploads in memory, or send smaller inputs")
ROUND_TRIP_HOW = {
    "server": "the rest is the server's own queue wait",
    "join": "upload, join and the start message",
    "first": "the shortest wait of the run",
}


@dataclass(frozen=True)
class _Load:
    """waiting/running counts at each request's start, and over the time grid."""

    waiting: np.ndarray  # per grid time
    running: np.ndarray  # per grid time
    running_at_start: np.ndarray  # per started request, including itself
    service: np.ndarray  # per started and completed request, aligned with running_at_start
    later_medians: tuple[float, float]  # median queue wait and service, later half of the requests
    excess: float  # the later half's median queue wait beyond the round trip (module docstring)
    round_trip: float  # what a request paid with no queue (median, later half)
    source: str  # where the round trip came from: server | join | first
    rank: float | None  # the later half's median rank in the server's queue (first estimation)


@dataclass(frozen=True)
class _Context:
    """What the limit rules read, besides the load."""

    summary: Summary
    server: dict[str, Any] | None
    usage: Usage
    cpus: int | None
    users: int | None  # closed loop: its users; None for an open loop
    split: Breakdown | None  # the endpoint's service split by the server's phases, when carried
    steady: Steadiness | None
    demand: Demand | None = None  # what a request asked of the device and the host (one endpoint's phases)


def diagnose(
    records: Columns | Sequence[RequestRecord], summary: Summary, server: dict[str, Any] | None = None,
    generator_warnings: list[str] | None = None, *, cpus: int | None = None, describe: bool = True,
) -> list[Finding]:
    """Findings for a run (only the generator's, usage and phase findings with too few requests). `cpus`: the
    server host's cores when known (`host_cpus`); `describe`: add the per-endpoint phase findings."""
    cols = Columns.of(records)
    findings = [Finding("generator", w) for w in generator_warnings or []]
    usage = server_usage(server)
    if usage.text:
        findings.append(Finding("usage", usage.text))
    phases = phase_medians(cols)
    described = phase_findings(phases) if describe else []
    measured = cols.measured()
    if len(cols) and not measured.any():
        return [*findings, Finding("warmup", (
            f"nothing was measured: load.warmup covered all {len(cols)} requests of the run, so no "
            "figure or limit can be judged; shorten load.warmup or lengthen the run"))]
    steady = steadiness(cols)  # before the load: its arrays and the load's would add up at the peak
    sent = ~np.isnan(cols.floats("sent_at_s"))
    load = _load(cols.where(measured & sent), cols.where(sent & ~np.isnan(cols.floats("started_at_s"))))
    if load is None:
        return findings + described
    one = len(phases) == 1
    split = breakdown(next(iter(phases.values()))) if one else None
    ctx = _Context(summary, server, usage, cpus, closed_loop_users(cols), split, steady,
                   demand(cols) if one else None)
    limit = _limit(load, ctx)
    if any(f.kind == "generator" for f in limit):
        return findings + limit
    said = {"work_share"} if any(f.kind in ("per_request_work", "device") for f in limit) else set()
    return findings + limit + [f for f in described if f.kind not in said]


def _saturated(load: _Load, ctx: _Context) -> bool:
    service = load.later_medians[1]
    if ctx.users is not None:
        return load.excess > max(MIN_WAIT_S, CLOSED_WAIT_SHARE * service)
    behind = ctx.steady is not None and not ctx.steady.steady
    return behind or load.excess > max(service, MIN_WAIT_S)


def _limit(load: _Load, ctx: _Context) -> list[Finding]:
    """The finding(s) about the server's limit, most specific first."""
    waited = load.waiting > 0
    queue_wait, service = load.later_medians
    saturated = _saturated(load, ctx)
    lag = generator_lag(ctx.summary)
    if saturated and lag is not None and lag >= max(GEN_LAG_MIN_S, GEN_LAG_SHARE * load.excess):
        return [Finding("generator", (
            f"the load generator lagged (event loop or sends up to {_ms(lag)}, p99) about as long as the "
            f"requests waited (later half: median queue wait {_ms(queue_wait)}): its timings show its own "
            "lag, not the server's limit; split the load (--processes), lower the rate, or use a quieter "
            "machine"))]
    if not saturated:
        return [_headroom(load, ctx, waited)]
    at = _at_limit(load, ctx)
    if (float(load.running[waited].mean()) if waited.any() else 0.0) < MIN_RUNNING:
        behind = ctx.steady is not None and not ctx.steady.steady and ctx.users is None
        why = f" ({ctx.steady.verdict})" if behind and ctx.steady is not None else ""
        return [Finding("server_cpu", (
            f"{at}requests waited{why} while hardly one ran at a time (median service {_ms(service)}): they "
            "waited in request handling (the event loop, HTTP, the load generator), not for the function; "
            "more concurrency will not help, less work per request or more server processes will"))]
    usage = ctx.usage
    if usage.loop_bound and (usage.gpu_busy is None or max(usage.gpu_busy) < 0.5):
        gpu = "" if usage.gpu_busy is None else f" while the GPU was busy only {max(usage.gpu_busy):.0%}"
        crowded = (f" and waited for a core another {usage.loop_waited:.0%} of the time (other processes "
                   "on the host took it)" if usage.crowded else "")
        loop = Finding("server_cpu", (
            f"{at}the server's event loop kept one core {usage.loop_cores:.0%} busy{crowded}{gpu} as the "
            "queue grew: "
            "request handling (uploads, decoding, streaming) in one Python thread, not the model, is "
            "the likely limit; more concurrency will not help, less work per request or more server "
            "processes will"))
        return [loop, *_queue_or_model(load, ctx, "")]
    busy = _resource_limit(ctx, at)
    if busy is not None:
        return [busy]
    return _queue_or_model(load, ctx, at)


def _queue_or_model(load: _Load, ctx: _Context, at: str) -> list[Finding]:
    findings = []
    waited = load.waiting > 0
    k = float(np.percentile(load.running[waited], 95)) if waited.any() else 0.0
    slots = configured_slots(ctx.server)
    if slots is not None and k < slots - 0.5:
        findings.append(Finding("idle_slots", (
            f"requests waited while only about {k:.0f} of the {slots} configured slots ran: another limit "
            "holds them back (max_threads, a concurrency_id shared with other functions, or a worker "
            "pool smaller than the limit)")))
    growth = _growth(load, k)
    mean_service = ctx.summary.phase("service_s").mean
    capacity = k / mean_service if mean_service else float("nan")
    caps = f"that caps throughput near {capacity:.1f} req/s ({_served(ctx)})"
    limit = f" (its configured limit: {slots})" if slots is not None and abs(k - slots) < 0.5 else ""
    ran = f"{at}the queue ran about {k:.0f} request(s) at a time{limit} while the rest waited"
    if growth is not None and growth >= GROWTH_MODEL_BOUND:
        gpu = "" if ctx.usage.gpu_busy is None else f" (GPU busy {max(ctx.usage.gpu_busy):.0%})"
        findings.append(Finding("model_bound", (
            f"{at}service time grows with concurrency (x{growth:.1f} from few to {k:.0f} running): the model "
            f"or the server's CPU is the limit{gpu}, not the queue; more concurrency adds latency, not "
            "throughput (batching may, if the model batches well)")))
    elif growth is not None:
        findings.append(Finding("queue_limit", (
            f"{ran}, and service time barely grows with concurrency (x{growth:.1f} from few to {k:.0f} "
            f"running): {caps}; raise concurrency_limit or batch")))
    else:
        findings.append(Finding("queue_limit", (
            f"{ran}: {caps}; raising concurrency_limit or batching helps if the model has headroom (too "
            "few requests ran at lower concurrency to tell)")))
    return findings


@dataclass(frozen=True)
class _Busy:
    """The busy shares of the device and of the server's host work over the run."""

    device: float | None  # 0-1 (more where forward passes overlapped); None: not known
    host: float | None  # X x the host's demand, or the process's CPU in cores, whichever is larger
    device_from: str  # "NVML" | "phases" | ""
    host_from: str = ""  # "phases" (X x the host's demand) | "cpu" (the process's CPU, in cores) | ""


def _busy(ctx: _Context) -> _Busy:
    x, usage, need = ctx.summary.throughput_rps, ctx.usage, ctx.demand
    device, device_from = None, ""
    if usage.gpu_busy is not None:
        device, device_from = max(usage.gpu_busy), "NVML"
    elif need is not None and need.device_s is not None:
        device, device_from = x * need.device_s, "phases"
    hosts = [(v, src) for v, src in ((None if need is None else x * need.host_s, "phases"),
                                     (usage.cores, "cpu")) if v is not None]
    host, host_from = max(hosts) if hosts else (None, "")
    return _Busy(device, host, device_from, host_from)


def _resource_limit(ctx: _Context, at: str) -> Finding | None:
    """device or per_request_work, or None: neither resource is saturated."""
    busy = _busy(ctx)
    host = busy.host or 0.0
    if busy.device is not None:
        if busy.device >= BUSY:  # a share of what the device can give: past BUSY nothing else adds much
            return _device_finding(ctx, busy, at)
        if host >= BUSY:
            return _work_finding(ctx, busy, at)
        return None
    split = ctx.split
    if split is None or split.model_share >= MODEL_SHARE or not split.work_explained or host < BUSY:
        return None
    return _work_finding(ctx, busy, at)


def _rates(ctx: _Context, busy: _Busy) -> str:
    """'at 14.3 req/s, the device busy 87% of the run (61 ms per request), ...': the busy shares in words."""
    need, x = ctx.demand, ctx.summary.throughput_rps
    parts = []
    if busy.device is not None:
        per = (f" ({_ms(need.device_s)} per request)" if need is not None and need.device_s is not None
               else "")
        what = "the GPU" if busy.device_from == "NVML" else "the device"
        parts.append(f"{what} busy {busy.device:.0%} of the run{per}")
    if need is not None:  # beside the process's CPU when that gave the host's figure: both are facts
        parts.append(f"the server's own work {x * need.host_s:.0%} ({_ms(need.host_s)} per request)")
    used = _used_text(ctx.usage, ctx.cpus)
    return f"at {x:.1f} req/s, " + ", ".join(parts) + (f"; {used}" if used else "")


def _device_finding(ctx: _Context, busy: _Busy, at: str) -> Finding:
    split = ctx.split
    model = f"; {split.model_text()} of {_ms(split.service_ms / 1000)} of service" if split else ""
    return Finding("device", (
        f"{at}the device is the limit ({_rates(ctx, busy)}{model}): it was busy nearly all the time, so more "
        "concurrency or faster request handling will not help; a faster device, a smaller or quantised "
        "model, or larger batches (if the model batches well) will"))


def _work_finding(ctx: _Context, busy: _Busy, at: str) -> Finding:
    split = ctx.split
    work = (f"{split.work_text()}: {_ms(split.work_ms / 1000)} of {_ms(split.service_ms / 1000)}; "
            f"{split.model_text()}; " if split is not None and split.work_explained else "")
    return Finding("per_request_work", (
        f"{at}per-request work in the server process is the limit ({work}{_rates(ctx, busy)}): decoding, "
        "preprocessing, uploads and messaging run one at a time in one Python process; more concurrency or "
        f"batching will not help; {HELP_PER_REQUEST}"))


def _used_text(usage: Usage, cpus: int | None) -> str:
    """'the server process used 1.3 of the host's 16 cores' (or of a core, cores unknown); '' unknown."""
    if usage.cores is None:
        return ""
    of = f"{usage.cores:.1f} of the host's {cpus} cores" if cpus else f"{usage.cores:.0%} of a core"
    return f"the server process used {of}"


def _at_limit(load: _Load, ctx: _Context) -> str:
    """A closed loop's 'at its limit for 128 users (...): ' before a limit finding; '' for open loops."""
    if ctx.users is None:
        return ""
    ahead = f", each request behind a median of {load.rank:.0f} in the server's queue" if load.rank else ""
    return (f"at its limit for {ctx.users} users (they waited {_ms(load.excess)} beyond the round trip "
            f"for {_ms(load.later_medians[1])} of service{ahead}): ")


def _served(ctx: _Context) -> str:
    """'against 40.0 req/s offered', or what a closed loop's users got."""
    s = ctx.summary
    if ctx.users is not None:
        return f"the {ctx.users} users got {s.throughput_rps:.1f} req/s"
    return f"against {s.offered_rps:.1f} req/s offered" if s.offered_rps else "against the offered load"


def _headroom(load: _Load, ctx: _Context, waited: np.ndarray) -> Finding:
    queue_wait, service = load.later_medians
    trip = f"the protocol's round trip {_ms(load.round_trip)} ({ROUND_TRIP_HOW[load.source]})"
    if ctx.users is not None:
        where = "the server's own queue" if load.source == "server" else f"the queue beyond {trip}"
        return Finding("headroom", (
            f"not at its limit for {ctx.users} users: requests waited {_ms(load.excess)} in {where}, for "
            f"{_ms(service)} of service; a closed loop offers only what the server serves, so add users "
            "to find its limit"))
    return Finding("headroom", (
        f"the server kept up: requests waited in the queue {waited.mean():.0%} of the time (later half: "
        f"median queue wait {_ms(queue_wait)}, of which {trip}; service {_ms(service)})"))


def closed_loop_users(records: Columns | Sequence[RequestRecord]) -> int | None:
    """The users of a closed loop (each user's requests sent as planned, one after another); None: open."""
    cols = Columns.of(records)
    sent_all = cols.floats("sent_at_s")
    rows = cols.where(~np.isnan(sent_all))
    sent = rows.floats("sent_at_s")
    if not sent.size or (rows.floats("intended_at_s") != sent).any():
        return None
    users = rows.ints("user_id")
    order = np.lexsort((sent, users))  # by user, then send time; ties in the run's order (stable)
    users, sent, completed = users[order], sent[order], rows.floats("completed_at_s")[order]
    same = users[1:] == users[:-1]  # consecutive requests of one user
    if not same.any():
        return None  # no user sent twice
    before, after = completed[:-1][same], sent[1:][same]
    if np.isnan(before).any() or (after < before).any():
        return None
    return int(np.unique(users).size)


def host_cpus(host: Mapping[str, Any] | None, target: str | None) -> int | None:
    """run.json's `host.cpus` when the server ran on qbench's host (loopback or its name), else None."""
    if not isinstance(host, Mapping) or not isinstance(host.get("cpus"), int) or not target:
        return None
    name = urlparse(target if "://" in target else f"http://{target}").hostname or ""
    local = name in ("localhost", "::1", "0.0.0.0", host.get("hostname")) or name.startswith("127.")
    return int(host["cpus"]) if local else None


@dataclass(frozen=True)
class Usage:
    """The server's own use of the machine over the run, from its /status at the start and the end."""

    cores: float | None = None  # process CPU time / wall time (all threads)
    loop_cores: float | None = None  # the main thread's (the event loop's) CPU time / wall time
    loop_waited: float | None = None  # the time it was ready to run but waited for a core / wall time
    gpu_busy: list[float] | None = None  # mean NVML utilisation per GPU (0-1)

    @property
    def text(self) -> str:
        parts = []
        if self.cores is not None:
            parts.append(f"server CPU {self.cores:.0%} of a core")
        if self.loop_cores is not None:
            waited = f" (and {self.loop_waited:.0%} waiting for a core)" if self.crowded else ""
            parts.append(f"its event loop {self.loop_cores:.0%}{waited}")
        if self.gpu_busy is not None:
            parts.append("GPU busy " + ", ".join(f"{b:.0%}" for b in self.gpu_busy))
        return ", ".join(parts) + " (means over the run)" if parts else ""

    @property
    def crowded(self) -> bool:
        """The event loop waited for a core a noticeable share of the run (other processes on the host)."""
        return self.loop_waited is not None and self.loop_waited >= LOOP_CROWDED

    @property
    def loop_demand(self) -> float | None:
        """The share of a core the event loop wanted: its CPU plus its wait for a core, over wall time."""
        if self.loop_cores is None:
            return None
        return self.loop_cores + (self.loop_waited or 0.0)

    @property
    def loop_bound(self) -> bool:
        """The event loop's thread wanted a whole core and did most of the server's CPU work."""
        demand = self.loop_demand
        if demand is None or self.loop_cores is None or demand < LOOP_BUSY:
            return False
        return self.cores is None or self.loop_cores >= LOOP_SHARE * self.cores


def generator_lag(summary: Summary) -> float | None:
    """The generator's worst p99 lag: its event loop's oversleep or its sends' (None: not measured)."""
    lags = [summary.generator.p99_loop_lag_s, summary.phase("send_lag_s").p99]
    present = [float(v) for v in lags if v is not None]
    return max(present) if present else None


def server_usage(server: dict[str, Any] | None) -> Usage:
    """CPU and GPU use between the run's first and last /status (reference server; {} elsewhere)."""
    start = server.get("status") if isinstance(server, dict) else None
    end = server.get("status_end") if isinstance(server, dict) else None
    if not isinstance(start, dict) or not isinstance(end, dict):
        return Usage()
    wall = _delta(start, end, "uptime_s")
    if not wall or wall <= 0:
        return Usage()
    cpu, loop = _delta(start, end, "cpu_s"), _delta(start, end, "event_loop_cpu_s")
    waited = _delta(start, end, "event_loop_wait_s")
    return Usage(
        cores=None if cpu is None else cpu / wall,
        loop_cores=None if loop is None else loop / wall,
        loop_waited=None if waited is None else waited / wall,
        gpu_busy=_gpu_busy(start.get("gpu"), end.get("gpu")),
    )


def _delta(start: dict[str, Any], end: dict[str, Any], key: str) -> float | None:
    a, b = start.get(key), end.get(key)
    return float(b) - float(a) if isinstance(a, int | float) and isinstance(b, int | float) else None


def _gpu_busy(start: Any, end: Any) -> list[float] | None:
    if not isinstance(start, list) or not isinstance(end, list) or not start or len(start) != len(end):
        return None
    busy = []
    for a, b in zip(start, end, strict=True):
        span = _delta(a, b, "sampled_s")
        used = _delta(a, b, "busy_s")
        if not span or span <= 0 or used is None:
            return None
        busy.append(used / span)
    return busy


def _load(measured: Columns, begun: Columns) -> _Load | None:
    """The load over the `measured` sent requests; the round trip over every started one (`begun`)."""
    sent, started = measured.new_floats("sent_at_s"), measured.floats("started_at_s")
    completed = measured.floats("completed_at_s")
    has_start, has_end = np.isfinite(started), np.isfinite(completed)
    done = has_start & has_end
    if done.sum() < MIN_REQUESTS:
        return None
    end = float(np.nanmax(completed)) if has_end.any() else float(sent.max())
    grid = np.linspace(float(sent.min()), end, 400)
    later = done & (sent >= float(np.median(sent)))  # the later half of the requests, by send time
    later = later if later.any() else done
    medians = (float(np.median((started - sent)[later])), float(np.median((completed - started)[later])))
    sent.sort()  # our own: sorted in place
    waiting = np.searchsorted(sent, grid, side="right")
    del sent
    left_queue = np.where(has_end, completed, np.inf)  # left the queue: started, else completed, else never
    np.copyto(left_queue, started, where=has_start)
    left_queue.sort()
    waiting -= np.searchsorted(left_queue, grid, side="right")
    del left_queue
    service, starts = completed[done] - started[done], started[done]
    finished = completed[has_start]
    del completed
    finished[np.isnan(finished)] = np.inf
    finished.sort()
    started = started[has_start]
    started.sort()
    running = _between(started, finished, grid)
    at_start = _between(started, finished, starts)
    del started, finished, starts
    late = measured.where(later)
    excess, trip, source = _round_trip(late, begun)
    ranks = late.floats("rank")
    ranks = ranks[~np.isnan(ranks)]
    rank = float(np.median(ranks)) if ranks.size else None
    return _Load(waiting, running, at_start, service, medians, excess, trip, source, rank)


def _round_trip(later: Columns, started: Columns) -> tuple[float, float, str]:
    """(excess queue wait, round trip, its source) for the later half of the requests."""
    waits = _wait(later)
    own = later.floats("server_queue_wait_s")
    own = own[~np.isnan(own)]
    if own.size >= len(later) / 2:
        queue = float(np.median(own))
        return queue, max(float(np.median(waits)) - queue, 0.0), "server"
    joined_later = ~np.isnan(later.floats("joined_at_s"))
    joined = ~np.isnan(started.floats("joined_at_s"))
    if joined.sum() >= len(started) / 2 and joined_later.any():
        delivery = float(_after_join(started)[joined].min())
        mine = later.where(joined_later)
        queue = float(np.median(_after_join(mine))) - delivery
        join = float(np.median(np.nan_to_num(mine.floats("joined_at_s"))
                               - np.nan_to_num(mine.floats("sent_at_s"))))
        return max(queue, 0.0), max(join, 0.0) + delivery, "join"
    trip = float(_wait(started).min())
    return max(float(np.median(waits)) - trip, 0.0), trip, "first"


def _wait(cols: Columns) -> np.ndarray:
    """Send -> process start (a missing time as 0, as the records' `or 0.0`). In place, as _after_join."""
    wait: np.ndarray = np.nan_to_num(cols.new_floats("started_at_s"), copy=False)
    wait -= np.nan_to_num(cols.floats("sent_at_s"))
    return wait


def _after_join(cols: Columns) -> np.ndarray:
    """Join acknowledged -> process start, in place (0 when the start message overtook the join's answer)."""
    since = np.nan_to_num(cols.new_floats("sent_at_s"), copy=False)
    joined = np.nan_to_num(cols.new_floats("joined_at_s"), copy=False)
    np.copyto(since, joined, where=~(since > joined))  # max(joined, sent), as Python's max picks
    del joined
    after: np.ndarray = np.nan_to_num(cols.new_floats("started_at_s"), copy=False)
    after -= since
    del since
    after[after < 0.0] = 0.0
    return after


def _between(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """At each time, how many started (sorted `starts`) and had not ended (sorted `ends`)."""
    return np.searchsorted(starts, times, side="right") - np.searchsorted(ends, times, side="right")


def _growth(load: _Load, k: float) -> float | None:
    """Median service at about k running over the median at few running; None without both groups."""
    busy = load.service[load.running_at_start >= max(1.0, k - 0.5)]
    few = load.service[load.running_at_start <= max(1.0, k / 2)]
    enough = max(MIN_GROUP, int(0.05 * load.service.size))
    if k < 1.5 or busy.size < enough or few.size < enough:  # one at a time, or too few to compare
        return None
    base = float(np.median(few))
    return float(np.median(busy)) / base if base > 0 else None


def configured_slots(server: dict[str, Any] | None) -> int | None:
    """Requests the server runs at once for the endpoint (limit x batch size) by its settings, else None."""
    if not isinstance(server, dict):
        return None
    status = server.get("status")
    settings = status.get("settings") if isinstance(status, dict) else None
    config = server.get("config")
    if not isinstance(settings, dict) or not isinstance(config, dict):
        return None
    fn_index = server.get("fn_index")
    functions = settings.get("functions") or []
    deps = config.get("dependencies") or []
    api_name = next((d.get("api_name") for d in deps if isinstance(d, dict) and d.get("id") == fn_index),
                    None)
    fn = next((f for f in functions if isinstance(f, dict) and f.get("api_name") == api_name), None)
    if fn is None:
        return None
    limit = fn.get("concurrency_limit")
    if limit == "default":
        limit = (settings.get("queue") or {}).get("default_concurrency_limit")
    if not isinstance(limit, int):
        return None  # unlimited: max_threads bounds it, which is not per function
    batch = int(fn.get("max_batch_size") or 1) if fn.get("batch") else 1
    return limit * batch


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.1f} ms" if value < 0.01 else f"{value * 1000:.0f} ms"
