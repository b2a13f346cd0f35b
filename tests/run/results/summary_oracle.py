"""The summary as qbench computed it from a list of records before it computed it from columns (issue
47): the oracle that tests/run/results/test_summary_columns.py holds qbench.run.results.summary to, key
for key and digit for digit. Kept verbatim (its own dataclasses too); do not "fix" it. Changed on
purpose since: the gaps (itl, chunk latency, output gaps) are over every gap, a record without its
histogram standing in with its statistics (issue 54); `error_rate` not measured when none was sent.

The original module docstring (the semantics) lives on in qbench/run/results/summary.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from qbench.run import gap_histogram
from qbench.run.records import RequestRecord, iter_measured
from qbench.run.results.server_phases import TraceReport
from qbench.run.scenario.scenario import Slo

#: Phases summarised with percentiles (names of RequestRecord derived properties).
PHASES = (
    "latency_s", "latency_from_send_s", "queue_wait_s", "service_s", "ttfo_s", "send_lag_s",
    "ttft_s", "tpot_s", "download_s",
)
#: Where the time went: client-only time, then the server's phases (RequestRecord fields), in this order.
SERVER_PHASES = (
    "client_only_s", "server_queue_wait_s", "server_upload_s", "server_preprocess_s", "server_fn_s",
    "server_postprocess_s", "server_streaming_diff_s", "server_total_s", "server_prepare_s",
    "server_batch_prepare_s", "server_h2d_s", "server_forward_s", "server_batch_size",
)


@dataclass
class Stats:
    """Distribution of one phase in seconds (None when there are no values)."""

    count: int = 0
    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        if not values:
            return cls()
        arr = np.asarray(values, dtype=np.float64)
        p50, p90, p95, p99 = (float(x) for x in np.percentile(arr, [50, 90, 95, 99]))
        return cls(
            count=int(arr.size),
            mean=float(arr.mean()),
            min=float(arr.min()),
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            max=float(arr.max()),
        )


@dataclass
class GeneratorStats:
    """How hard the load generator itself worked (to tell a saturated client from a slow server)."""

    cpu_s: float | None = None  # process CPU time (user+system) during the run
    cpu_percent: float | None = None  # cpu_s / wall time * 100 (100 = one full core)
    max_loop_lag_s: float | None = None  # worst event-loop oversleep seen by the ticker
    p99_loop_lag_s: float | None = None  # 99th percentile of the ticker's oversleep
    loop_wait_share: float | None = None  # a field added since (the summary's shape, not its figures)
    max_in_flight: int | None = None  # most requests in flight at once
    in_flight_cap: int | None = None  # scenario's cap on in-flight requests (None = uncapped)
    processes: int = 1  # generator processes used (local processes or Ray actors)
    executor: str = "local"  # local | processes | ray (qbench.run.load.executor)
    workers: list[WorkerStats] = field(default_factory=list)  # per worker, when there are several
    clock_uncertainty_s: float | None = None  # Ray: worst node's clock offset uncertainty (+-, s)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GeneratorStats:
        values = dict(data)
        values["workers"] = [WorkerStats(**w) for w in data.get("workers", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class WorkerStats:
    """One generator worker (process or Ray actor): is it the bottleneck, and how sure is its clock?"""

    index: int  # the part it ran (open loop: request ids index, index + N, ...; closed loop: users)
    where: str  # host and pid, or the Ray node
    requests: int = 0  # records it produced (generator_lost ones included)
    sent: int = 0  # of which it sent
    cpu_s: float | None = None  # its own process CPU time during the run
    cpu_percent: float | None = None  # cpu_s / wall time * 100 (100 = one full core)
    max_loop_lag_s: float | None = None  # worst event-loop oversleep
    p99_send_lag_s: float | None = None  # actual - intended send time, 99th percentile (s)
    max_send_lag_s: float | None = None
    clock_offset_s: float | None = None  # Ray: node clock minus driver clock, measured before the run
    clock_uncertainty_s: float | None = None  # Ray: +- bound of that offset (half the best round trip)
    lost: str | None = None  # why the worker was lost mid-run (its unreported requests: generator_lost)


@dataclass
class SloCheck:
    """One SLO threshold and how the run did against it."""

    name: str  # the Slo field, e.g. "p95_latency_s"
    threshold: float
    actual: float | None  # None when the run produced no value (counts as failed)
    passed: bool
    kind: str  # "max" (actual must be <= threshold) or "min" (actual must be >= threshold)
    note: str | None = None  # why actual is missing or differs from the ok-only table


@dataclass
class JourneyStats:
    """The journeys of a run (scenario `journey:`): how many finished, and how long a user took."""

    started: int = 0
    completed: int = 0  # every request of every step done, each ok
    failed: int = 0  # ended by a failed request (a journey stops at its first error)
    unfinished: int = 0  # cut off by the end of the run (duration, requests, a stop)
    duration: Stats = field(default_factory=Stats)  # completed: first intended send -> last completion (s)
    steps: dict[str, Summary] = field(default_factory=dict)  # per step, "<index>:<endpoint>"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JourneyStats:
        return cls(started=data.get("started", 0), completed=data.get("completed", 0),
                   failed=data.get("failed", 0), unfinished=data.get("unfinished", 0),
                   duration=Stats(**data.get("duration", {})),
                   steps={k: Summary.from_dict(v) for k, v in (data.get("steps") or {}).items()})


@dataclass
class Summary:
    """What a run did, computed from its records. JSON-able via to_dict()/from_dict()."""

    requests: int = 0  # measured (non-warm-up) records
    sent: int = 0  # of which actually sent
    not_sent: int = 0  # never sent (run interrupted / stopped first)
    completed_ok: int = 0
    errors: int = 0  # sent requests that ended in an error
    errors_by_kind: dict[str, int] = field(default_factory=dict)  # all measured records, by error_kind
    error_samples: dict[str, str] = field(default_factory=dict)  # error_kind -> its first message
    error_rate: float = 0.0  # errors / sent
    duration_s: float = 0.0  # measured window (s)
    throughput_rps: float = 0.0  # ok completions per second
    goodput_rps: float = 0.0  # ok completions meeting the SLO's per-request thresholds, per second
    offered_rps: float = 0.0  # arrival rate the schedule offered
    latency: dict[str, Stats] = field(default_factory=dict)  # phase name (PHASES) -> Stats
    eta_error: Stats = field(default_factory=Stats)  # server ETA minus reality (s), first estimation
    generator: GeneratorStats = field(default_factory=GeneratorStats)
    input_tokens: int = 0  # prompt tokens of ok requests (as reported by the server)
    output_tokens: int = 0  # output tokens of ok requests
    output_tps: float = 0.0  # output tokens of ok requests per second of the window
    chunks_sent: int = 0  # streamed inputs: chunks ok requests sent into their events
    chunks_answered: int = 0  # of which an output answered (the others were replaced by a later one)
    request_output_tps: Stats = field(default_factory=Stats)  # per-request output tokens/s (not seconds)
    slo: list[SloCheck] = field(default_factory=list)
    slo_passed: bool = True  # every check passed, each endpoint's too
    endpoints: dict[str, Summary] = field(default_factory=dict)  # per endpoint label (runs of several)
    journeys: JourneyStats | None = None  # runs of a scenario's journey
    # where the time went: SERVER_PHASES -> Stats of ok requests (server_batch_size in requests, not s)
    server_phases: dict[str, Stats] = field(default_factory=dict)
    server_traces: TraceReport | None = None  # where the server's phases came from (the run's only)

    def phase(self, name: str) -> Stats:
        return self.latency.get(name, Stats())

    def checks(self) -> list[SloCheck]:
        """Every SLO check: the run's, then each endpoint's (named `endpoint: check`)."""
        return self.slo + [replace(c, name=f"{label}: {c.name}") for label, e in self.endpoints.items()
                           for c in e.slo]

    def failed_checks(self) -> list[SloCheck]:
        """Failed checks, each endpoint's too (named `endpoint: check`)."""
        return [c for c in self.checks() if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        values = dict(data)
        values["latency"] = {k: Stats(**v) for k, v in data.get("latency", {}).items()}
        values["eta_error"] = Stats(**data.get("eta_error", {}))
        values["generator"] = GeneratorStats.from_dict(data.get("generator", {}))
        values["request_output_tps"] = Stats(**data.get("request_output_tps", {}))
        values["slo"] = [SloCheck(**c) for c in data.get("slo", [])]
        values["endpoints"] = {k: Summary.from_dict(v) for k, v in (data.get("endpoints") or {}).items()}
        journeys = data.get("journeys")
        values["journeys"] = JourneyStats.from_dict(journeys) if isinstance(journeys, dict) else None
        values["server_phases"] = {k: Stats(**v) for k, v in (data.get("server_phases") or {}).items()}
        traces = data.get("server_traces")
        values["server_traces"] = TraceReport.from_dict(traces) if isinstance(traces, dict) else None
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


def summarize(
    records: Sequence[RequestRecord],
    slo: Slo | None = None,
    *,
    duration_s: float | None = None,
    generator: GeneratorStats | None = None,
    endpoint_slos: dict[str, Slo | None] | None = None,
    journey_length: int | None = None,
    server_traces: TraceReport | None = None,
) -> Summary:
    """Summarise the measured (non-warm-up) records; evaluate `slo` if given (see module docstring).

    Records of several endpoints are also summarised per endpoint, over the run's window, in
    `endpoints`. For a mix (`endpoint_slos` given: label -> the entry's own slo, or None), `slo`'s
    latency and error thresholds apply to every endpoint, an entry's own slo replacing the thresholds
    it sets, and the rate thresholds (min_throughput, min_goodput, min_output_tps) to the total.
    Without `endpoint_slos`, `slo` is judged on the total only.

    Records of journeys (`journey_length`: the requests of a whole journey) are also summarised per
    step and per journey (`journeys`: `journey_stats`). `server_traces` (how the server's phases were
    read: qbench.run.results.server_phases) is kept on the summary as given.
    """
    measured = list(iter_measured(records))
    labels = sorted({r.endpoint for r in measured})
    if endpoint_slos is not None:
        summary = _by_endpoint(measured, labels, slo, endpoint_slos, duration_s, generator)
    else:
        summary = _summarize(measured, slo, duration_s=duration_s, generator=generator)
        if len(labels) > 1:  # not a mix (a journey's steps): the SLO is the total's, endpoints are facts
            summary.endpoints = {label: _summarize([r for r in measured if r.endpoint == label],
                                                   duration_s=summary.duration_s) for label in labels}
    if journey_length is not None:
        summary.journeys = journey_stats(records, journey_length, slo, summary.duration_s)
    if records and not measured:
        _all_warmup(summary, len(records))
    summary.server_traces = server_traces
    return summary


def _all_warmup(summary: Summary, count: int) -> None:
    """Say why no check has a figure when the warm-up covered every request (else: 'actual none')."""
    note = f"no request measured: load.warmup covered all {count} requests of the run"
    for checks in [summary.slo, *(e.slo for e in summary.endpoints.values())]:
        for i, check in enumerate(checks):
            if check.actual is None and check.note is None:
                checks[i] = replace(check, note=note)


def journey_stats(records: Sequence[RequestRecord], length: int, slo: Slo | None,
                  window: float) -> JourneyStats:
    """Journeys started, completed, failed and cut off; time to finish one; each step's summary.

    A journey is counted when its first request is outside the warm-up window; it is complete when all
    `length` requests of it are ok; `duration` is from its first intended send to its last completion.
    """
    by_journey: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.journey_id is not None:
            by_journey.setdefault(r.journey_id, []).append(r)
    stats = JourneyStats()
    durations: list[float] = []
    for rs in by_journey.values():
        if rs[0].warmup:
            continue
        stats.started += 1
        if _failed(rs):
            stats.failed += 1
        elif len(rs) >= length and all(r.ok for r in rs):
            stats.completed += 1
            durations.append(max(r.completed_at_s or 0.0 for r in rs) - rs[0].intended_at_s)
        else:
            stats.unfinished += 1
    stats.duration = Stats.of(durations)
    measured = list(iter_measured(records))
    keys = sorted({(r.step, r.endpoint) for r in measured if r.step is not None}, key=lambda k: k[0] or 0)
    stats.steps = {f"{step}:{label}": _summarize([r for r in measured if r.step == step], slo,
                                                 duration_s=window) for step, label in keys}
    return stats


def _failed(rs: list[RequestRecord]) -> bool:
    """A journey ended by a request that failed on its own (not closed by the end of the run)."""
    return any(r.sent_at_s is not None and not r.ok and r.error_kind not in ("deadline", "interrupted")
               for r in rs)


RATE_THRESHOLDS = ("min_throughput", "min_goodput", "min_output_tps")


def _by_endpoint(measured: list[RequestRecord], labels: list[str], slo: Slo | None,
                 own: dict[str, Slo | None], duration_s: float | None,
                 generator: GeneratorStats | None) -> Summary:
    window = duration_s if duration_s is not None else _window(measured)
    inherited = slo.model_copy(update=dict.fromkeys(RATE_THRESHOLDS)) if slo is not None else None
    rates = Slo(**{k: v for k, v in slo.thresholds().items() if k in RATE_THRESHOLDS}) if slo else None
    judged = {label: _merged(inherited, own.get(label)) for label in labels}
    endpoints = {label: _summarize([r for r in measured if r.endpoint == label], judged[label],
                                   duration_s=window) for label in labels}
    total = _summarize(measured, duration_s=window, generator=generator)
    total.goodput_rps = _per_s(sum(1 for r in measured if r.ok and meets_slo(r, judged[r.endpoint])), window)
    if rates is not None and rates.thresholds():
        total.slo = evaluate_slo(total, rates)
    total.endpoints = endpoints
    total.slo_passed = all(c.passed for c in total.slo) and all(e.slo_passed for e in endpoints.values())
    return total


def _merged(inherited: Slo | None, own: Slo | None) -> Slo | None:
    """An endpoint's SLO: the scenario's thresholds, with those its mix entry sets replaced."""
    if own is None or inherited is None:
        return own or inherited
    return Slo(**{**inherited.thresholds(), **own.thresholds()})


def _summarize(
    measured: list[RequestRecord],
    slo: Slo | None = None,
    *,
    duration_s: float | None = None,
    generator: GeneratorStats | None = None,
) -> Summary:
    sent = [r for r in measured if r.sent_at_s is not None]
    ok = [r for r in measured if r.ok]
    window = duration_s if duration_s is not None else _window(measured)
    errors_by_kind: dict[str, int] = {}
    samples: dict[str, str] = {}
    for r in measured:
        if not r.ok:
            kind = r.error_kind or "client"
            errors_by_kind[kind] = errors_by_kind.get(kind, 0) + 1
            if kind not in samples and r.error_message:
                samples[kind] = r.error_message
    errors = sum(1 for r in sent if not r.ok)
    summary = Summary(
        requests=len(measured),
        sent=len(sent),
        not_sent=len(measured) - len(sent),
        completed_ok=len(ok),
        errors=errors,
        errors_by_kind=dict(sorted(errors_by_kind.items())),
        error_samples=dict(sorted(samples.items())),
        error_rate=errors / len(sent) if sent else 0.0,
        duration_s=window,
        throughput_rps=_per_s(len(ok), window),
        goodput_rps=_per_s(sum(1 for r in ok if meets_slo(r, slo)), window),
        offered_rps=_offered(measured, window),
        latency={name: Stats.of(_values(measured, name, ok_only=name != "send_lag_s")) for name in PHASES},
        eta_error=Stats.of(_values(ok, "eta_error_s", ok_only=True)),
        generator=generator or GeneratorStats(),
        input_tokens=sum(r.input_tokens or 0 for r in ok),
        output_tokens=sum(r.output_tokens or 0 for r in ok),
        request_output_tps=Stats.of(_values(ok, "output_tps", ok_only=True)),
    )
    summary.output_tps = _per_s(summary.output_tokens, window)
    if any(r.itl_count for r in ok):
        summary.latency["itl_s"] = itl_stats(ok)
    if any(r.chunks_sent for r in ok):
        stream_stats(summary, ok)
    summary.server_phases = server_phase_stats(ok)
    if slo is not None:
        summary.slo = evaluate_slo(summary, slo, _end_to_end_with_failures(sent))
        summary.slo_passed = all(c.passed for c in summary.slo)
    return summary


def server_phase_stats(ok: Sequence[RequestRecord]) -> dict[str, Stats]:
    """Where the time went: each of SERVER_PHASES that some request has, over those that have it."""
    out = {}
    for name in SERVER_PHASES:
        values = _values(ok, name, ok_only=True)
        if values:
            out[name] = Stats.of(values)
    return out


def meets_slo(record: RequestRecord, slo: Slo | None) -> bool:
    """Whether one ok request meets the SLO's per-request thresholds (the tightest of each phase)."""
    if slo is None:
        return True
    for phase, limit in slo.per_request_limits().items():
        value = getattr(record, phase)
        if value is None or value > limit:
            return False
    return True


def evaluate_slo(
    summary: Summary, slo: Slo, end_to_end: dict[str, tuple[list[float], int]] | None = None
) -> list[SloCheck]:
    """One check per threshold set in `slo`; a missing actual value fails the check.

    `end_to_end`: phase -> (sorted ok values, failed sent count) for the end-to-end latency phases;
    their percentile checks then count failures as slower than any bound (module docstring)."""
    checks: list[SloCheck] = []
    for name, threshold in slo.thresholds().items():
        actual, kind = slo_actual(summary, name)
        note = None
        stat, _, phase = name.partition("_")
        if end_to_end is not None and phase in end_to_end:
            actual, note = _percentile_with_failures(*end_to_end[phase], stat)
        if actual is None:
            passed = False
        elif kind == "min":
            passed = actual >= threshold
        else:
            passed = actual <= threshold
        checks.append(SloCheck(name, threshold, actual, passed, kind, note))
    return checks


def _end_to_end_with_failures(sent: Sequence[RequestRecord]) -> dict[str, tuple[list[float], int]]:
    failed = sum(1 for r in sent if not r.ok)
    return {
        name: (sorted(_values(sent, name, ok_only=True)), failed)
        for name in ("latency_s", "latency_from_send_s")
    }


def _percentile_with_failures(
    ok_sorted: list[float], failed: int, stat: str
) -> tuple[float | None, str | None]:
    """Type-7 (linear) percentile over the ok values plus `failed` values slower than all of them."""
    n = len(ok_sorted) + failed
    if n == 0:
        return None, None
    q = 1.0 if stat == "max" else float(stat[1:]) / 100.0
    rank = q * (n - 1)
    if rank > len(ok_sorted) - 1:
        return None, f"{failed / n:.1%} of sent requests failed: the {stat} falls among them"
    lo = int(rank)
    hi = min(lo + 1, len(ok_sorted) - 1)
    value = ok_sorted[lo] + (ok_sorted[hi] - ok_sorted[lo]) * (rank - lo)
    return value, (f"over all {n} sent requests, the {failed} failed ones ranked slowest" if failed else None)


def slo_actual(summary: Summary, name: str) -> tuple[float | None, str]:
    """The summary's figure an SLO threshold `name` is judged on, and whether it is a "min" or "max"."""
    if name == "error_rate":  # the rule as today's: none sent after the warm-up is not measured
        return (summary.error_rate if summary.sent else None), "max"
    if name == "min_throughput":
        return summary.throughput_rps, "min"
    if name == "min_goodput":
        return summary.goodput_rps, "min"
    if name == "min_output_tps":
        return summary.output_tps, "min"
    if name == "min_chunks_answered":
        return (summary.chunks_answered / summary.chunks_sent if summary.chunks_sent else None), "min"
    stat, _, phase = name.partition("_")
    stats = summary.phase(phase)
    return getattr(stats, stat), "max"


#: (count, mean, max, histogram, [(statistic, share)] standing in for a missing histogram, uncounted)
_ITL = ("itl_count", "itl_mean_s", "itl_max_s", "itl_hist",
        [("itl_p50_s", 0.5), ("itl_p99_s", 0.49), ("itl_max_s", 0.01)], None)
_CHUNK = ("chunk_latency_count", "chunk_latency_mean_s", "chunk_latency_max_s", "chunk_latency_hist",
          [("chunk_latency_p50_s", 0.5), ("chunk_latency_p95_s", 0.45), ("chunk_latency_max_s", 0.05)], None)
_GAP = ("output_gap_count", "output_gap_mean_s", "output_gap_max_s", "output_gap_hist",
        [("output_gap_p95_s", 1.0)], "output_gap_p95_s")


def _own_gaps(r: RequestRecord, kind: tuple[Any, ...]) -> tuple[int, float | None, float | None]:
    """A record's (count, mean, max) of one kind of gap; an older record's one statistic as one gap."""
    count, mean, top = getattr(r, kind[0]), getattr(r, kind[1]), getattr(r, kind[2])
    alone = getattr(r, kind[5]) if kind[5] else None
    if kind[5] and count == 0 and alone is not None:
        return 1, alone, alone
    return count, mean, top


def _stand_in(r: RequestRecord, count: int, kind: tuple[Any, ...]) -> dict[int, int]:
    """A record without a histogram: its `count` gaps split by share over its statistics, each at the
    statistic at or above it (a missing statistic: the next one given)."""
    out: dict[int, int] = {}
    given, cumulative = 0, 0.0
    stats = kind[4]
    for k, (_, share) in enumerate(stats):
        cumulative += share
        upto = count if k == len(stats) - 1 else int(np.rint(count * cumulative))
        value = next((getattr(r, n) for n, _ in stats[k:] if getattr(r, n) is not None), None)
        if upto - given > 0 and value is not None:
            index = gap_histogram.bucket(value)
            out[index] = out.get(index, 0) + upto - given
            given = upto
    return out


def gap_stats(records: Sequence[RequestRecord], kind: tuple[Any, ...]) -> Stats:
    """Every gap of one kind (issue 54: a histogram per record, a stand-in for one without)."""
    rows = [(r, *_own_gaps(r, kind)) for r in records]
    rows = [row for row in rows if row[1] and row[2] is not None]
    if not rows:
        return Stats()
    count = sum(row[1] for row in rows)
    mean = sum(row[1] * row[2] for row in rows) / count
    top = max(row[3] or 0.0 for row in rows)
    merged: dict[int, int] = {}
    for r, n, _, _ in rows:
        text = getattr(r, kind[3])
        own = gap_histogram.decode(text) if text else _stand_in(r, n, kind)
        for index, c in own.items():
            merged[index] = merged.get(index, 0) + c
    qs = gap_histogram.percentiles(merged, [0.0, 0.5, 0.9, 0.95, 0.99])
    if not qs:
        return Stats(count=count, mean=mean, max=top)
    low, p50, p90, p95, p99 = (min(q, top) for q in qs)
    return Stats(count=count, mean=mean, min=low, p50=p50, p90=p90, p95=p95, p99=p99, max=top)


def itl_stats(records: Sequence[RequestRecord]) -> Stats:
    return gap_stats(records, _ITL)


def stream_stats(summary: Summary, ok: Sequence[RequestRecord]) -> None:
    """Chunks, chunk latency and output gaps of streamed inputs onto `summary`: every chunk and gap."""
    summary.chunks_sent = sum(r.chunks_sent for r in ok)
    summary.chunks_answered = sum(r.chunks_answered for r in ok)
    chunks = gap_stats(ok, _CHUNK)
    if chunks.count:
        summary.latency["chunk_latency_s"] = chunks
    summary.latency["output_gap_s"] = gap_stats(ok, _GAP)


def _values(records: Sequence[RequestRecord], name: str, *, ok_only: bool) -> list[float]:
    out: list[float] = []
    for r in records:
        if ok_only and not r.ok:
            continue
        value = getattr(r, name)
        if value is not None:
            out.append(value)
    return out


def _window(records: Sequence[RequestRecord]) -> float:
    """First intended send -> the later of the last OK completion and the last send. A failure's
    completion time is when it was given up (a 60 s timeout, the drain deadline): counting it would
    stretch the window and make one straggler look like a slow server."""
    if not records:
        return 0.0
    start = min(r.intended_at_s for r in records)
    ends = [r.completed_at_s for r in records if r.ok and r.completed_at_s is not None]
    ends += [r.sent_at_s for r in records if r.sent_at_s is not None]
    return max(max(ends, default=start) - start, 0.0)


def _offered(records: Sequence[RequestRecord], window: float) -> float:
    if not records:
        return 0.0
    times = [r.intended_at_s for r in records]
    span = max(times) - min(times)
    if len(times) > 1 and span > 0:
        return (len(times) - 1) / span
    return _per_s(len(times), window)


def _per_s(count: int, window: float) -> float:
    return count / window if window > 0 else 0.0
