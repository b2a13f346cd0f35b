"""Where was the limit? Records (+ the server's own settings when it reports them) -> findings.

From the records alone, over the measured window (warm-up excluded):

    waiting(t)   requests sent but not started (the queue, as the client saw it)
    running(t)   requests started (process_starts) but not completed
    saturated    the run did not keep up (qbench.run.steady: backlog or queue wait trending up), or the
                 later half of the requests (by send time: a ramp saturates at its end) waited in the
                 queue, beyond the wait every request pays (the 10th percentile: the join's round
                 trip), longer than they took to serve and at least `MIN_WAIT_S`
    K            the effective concurrency: the 95th percentile of running(t) while requests waited
    growth       median service time of requests that started with about K running, over that of
                 requests that started with at most K/2 running (the first ones, if K is 1)

Findings, most specific first (each a sentence a user can act on):

    generator    the load generator lagged (its own send lag / loop lag / CPU; see run_console.py); and, in
                 place of any finding about the server, when the run looked saturated while the
                 generator's event loop or sends lagged by at least half the excess queue wait: the
                 client saw its own lag as a queue (`GEN_LAG_SHARE`)
    usage        the server's CPU (all threads, and its event loop's thread) and GPU busy share over
                 the run, when it reports them (the reference server's /status at start and end)
    server_cpu   saturated while the server's event loop kept a core busy, >= 50% of a core and >= 80%
                 of the server's CPU (a shared host gives it no more than its share of a core; and the
                 GPU, if any, was mostly idle): request handling in one Python thread is the limit
    idle_slots   requests waited while fewer slots ran than the server is configured for (its /status
                 reports them): another limit holds them (max_threads, a shared concurrency_id...)
    model_bound  saturated and service time grows with concurrency (growth >= 1.5): the model or the
                 server's CPU is the limit; more concurrency adds latency, not throughput
    queue_limit  saturated and service time barely grows (< 1.5): the queue's limit of K caps
                 throughput at about K / service time; raise concurrency_limit or batch
    server_cpu   also when saturated while on average under half a request ran (an instant function):
                 the requests waited in request handling, not for the function
    headroom     not saturated: the server kept up with the offered load
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run.records import RequestRecord
from qbench.run.steady import steadiness
from qbench.run.summary import Summary

GROWTH_MODEL_BOUND = 1.5
MIN_REQUESTS = 20
MIN_GROUP = 20  # requests in each group compared for growth
LOOP_BUSY = 0.5  # share of a core that counts as an event loop at its limit (on a shared host)...
LOOP_SHARE = 0.8  # ... when it also did this share of the server's CPU (not a thread pool's work)
GEN_LAG_SHARE = 0.5  # the generator's lag, as a share of the excess queue wait, that explains the wait
GEN_LAG_MIN_S = 0.02  # below this the generator's lag explains no queue
MIN_WAIT_S = 0.005  # an excess queue wait below this is the protocol's, not a queue
MIN_RUNNING = 0.5  # fewer running on average while requests waited: they did not wait for the function


@dataclass(frozen=True)
class Finding:
    kind: str  # generator | idle_slots | model_bound | queue_limit | headroom
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class _Load:
    """waiting/running counts at each request's start, and over the time grid."""

    waiting: np.ndarray  # per grid time
    running: np.ndarray  # per grid time
    running_at_start: np.ndarray  # per started request, including itself
    service: np.ndarray  # per started and completed request, aligned with running_at_start
    later_medians: tuple[float, float]  # median queue wait and service, later half of the requests
    wait_floor: float  # 10th percentile of every request's queue wait: what a request pays with no queue


def diagnose(
    records: list[RequestRecord], summary: Summary, server: dict[str, Any] | None = None,
    generator_warnings: list[str] | None = None,
) -> list[Finding]:
    """Findings for a run (see the module docstring); [] when there are too few requests to judge."""
    findings = [Finding("generator", w) for w in generator_warnings or []]
    usage = server_usage(server)
    if usage.text:
        findings.append(Finding("usage", usage.text))
    ok = [r for r in records if not r.warmup and r.sent_at_s is not None]
    load = _load(ok)
    if load is None:
        return findings
    waited = load.waiting > 0
    queue_wait, service = load.later_medians
    excess = queue_wait - load.wait_floor
    steady = steadiness(records)
    k = float(np.percentile(load.running[waited], 95)) if waited.any() else 0.0
    behind = steady is not None and not steady.steady
    saturated = behind or bool(excess > max(service, MIN_WAIT_S))
    lag = generator_lag(summary)
    if saturated and lag is not None and lag >= max(GEN_LAG_MIN_S, GEN_LAG_SHARE * excess):
        return [*findings, Finding("generator", (
            f"the load generator lagged (event loop or sends up to {_ms(lag)}, p99) about as long as the "
            f"requests waited (later half: median queue wait {_ms(queue_wait)}): its timings show its own "
            "lag, not the server's limit; split the load (--processes), lower the rate, or use a quieter "
            "machine"))]
    if not saturated:
        share = f"{waited.mean():.0%}"
        return [*findings, Finding("headroom", (
            f"the server kept up: requests waited in the queue {share} of the time (later half: median "
            f"queue wait {_ms(queue_wait)}, of which {_ms(load.wait_floor)} every request pays; service "
            f"{_ms(service)})"))]
    if (float(load.running[waited].mean()) if waited.any() else 0.0) < MIN_RUNNING:
        why = f" ({steady.verdict})" if behind and steady is not None else ""
        return [*findings, Finding("server_cpu", (
            f"requests waited{why} while hardly one ran at a time (median service {_ms(service)}): they "
            "waited in request handling (the event loop, HTTP, the load generator), not for the function; "
            "more concurrency will not help, less work per request or more server processes will"))]
    if usage.loop_bound and (usage.gpu_busy is None or max(usage.gpu_busy) < 0.5):
        gpu = "" if usage.gpu_busy is None else f" while the GPU was busy only {max(usage.gpu_busy):.0%}"
        findings.append(Finding("server_cpu", (
            f"the server's event loop kept one core {usage.loop_cores:.0%} busy{gpu} as the queue grew: "
            "request handling (uploads, decoding, streaming) in one Python thread, not the model, is "
            "the likely limit; more concurrency will not help, less work per request or more server "
            "processes will")))
    slots = configured_slots(server)
    if slots is not None and k < slots - 0.5:
        findings.append(Finding("idle_slots", (
            f"requests waited while only about {k:.0f} of the {slots} configured slots ran: another limit "
            "holds them back (max_threads, a concurrency_id shared with other functions, or a worker "
            "pool smaller than the limit)")))
    growth = _growth(load, k)
    mean_service = summary.phase("service_s").mean
    capacity = k / mean_service if mean_service else float("nan")
    offered = f"{summary.offered_rps:.1f}" if summary.offered_rps else "the offered"
    caps = f"that caps throughput near {capacity:.1f} req/s (against {offered} req/s offered)"
    if growth is not None and growth >= GROWTH_MODEL_BOUND:
        gpu = "" if usage.gpu_busy is None else f" (GPU busy {max(usage.gpu_busy):.0%})"
        findings.append(Finding("model_bound", (
            f"service time grows with concurrency (x{growth:.1f} from few to {k:.0f} running): the model "
            f"or the server's CPU is the limit{gpu}, not the queue; more concurrency adds latency, not "
            "throughput (batching may, if the model batches well)")))
    elif growth is not None:
        findings.append(Finding("queue_limit", (
            f"the queue ran about {k:.0f} request(s) at a time while the rest waited, and service time "
            f"barely grows with concurrency (x{growth:.1f} from few to {k:.0f} running): {caps}; "
            "raise concurrency_limit or batch")))
    else:
        findings.append(Finding("queue_limit", (
            f"the queue ran about {k:.0f} request(s) at a time while the rest waited: {caps}; raising "
            "concurrency_limit or batching helps if the model has headroom (too few requests ran at "
            "lower concurrency to tell)")))
    return findings


@dataclass(frozen=True)
class Usage:
    """The server's own use of the machine over the run, from its /status at the start and the end."""

    cores: float | None = None  # process CPU time / wall time (all threads)
    loop_cores: float | None = None  # the main thread's (the event loop's) CPU time / wall time
    gpu_busy: list[float] | None = None  # mean NVML utilisation per GPU (0-1)

    @property
    def text(self) -> str:
        parts = []
        if self.cores is not None:
            parts.append(f"server CPU {self.cores:.0%} of a core")
        if self.loop_cores is not None:
            parts.append(f"its event loop {self.loop_cores:.0%}")
        if self.gpu_busy is not None:
            parts.append("GPU busy " + ", ".join(f"{b:.0%}" for b in self.gpu_busy))
        return ", ".join(parts) + " (means over the run)" if parts else ""

    @property
    def loop_bound(self) -> bool:
        """The event loop's thread kept a core busy and did most of the server's CPU work."""
        if self.loop_cores is None or self.loop_cores < LOOP_BUSY:
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
    return Usage(
        cores=None if cpu is None else cpu / wall,
        loop_cores=None if loop is None else loop / wall,
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


def _load(records: list[RequestRecord]) -> _Load | None:
    sent = np.array([r.sent_at_s for r in records], dtype=np.float64)
    started = np.array([np.nan if r.started_at_s is None else r.started_at_s for r in records])
    completed = np.array([np.nan if r.completed_at_s is None else r.completed_at_s for r in records])
    done = np.isfinite(started) & np.isfinite(completed)
    if done.sum() < MIN_REQUESTS:
        return None
    end = float(np.nanmax(completed)) if np.isfinite(completed).any() else float(sent.max())
    grid = np.linspace(float(sent.min()), end, 400)
    left_queue = np.where(np.isfinite(started), started, np.where(np.isfinite(completed), completed, np.inf))
    finished = np.where(np.isfinite(completed), completed, np.inf)
    waiting = _count_le(sent, grid) - _count_le(left_queue, grid)
    has_start = np.isfinite(started)
    running = _count_le(started[has_start], grid) - _count_le(finished[has_start], grid)
    starts, ends = started[done], completed[done]
    at_start = _count_le(started[has_start], starts) - _count_le(finished[has_start], starts)
    later = done & (sent >= float(np.median(sent)))  # the later half of the requests, by send time
    later = later if later.any() else done
    medians = (float(np.median((started - sent)[later])), float(np.median((completed - started)[later])))
    floor = float(np.percentile((started - sent)[done], 10))
    return _Load(waiting, running, at_start, ends - starts, medians, floor)


def _count_le(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(times), grid, side="right")


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
    """Requests the server is configured to run at once for the endpoint (its limit times its batch
    size), when it reports its settings (the reference server's /status does); else None."""
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
    return "n/a" if value is None else f"{value * 1000:.0f} ms"
