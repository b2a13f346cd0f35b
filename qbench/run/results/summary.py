"""Records -> Summary: throughput, goodput, percentiles per phase, error kinds and the SLO verdict, each the
records' own figure to the last digit. Which records count: docs/design/records-and-results.md."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from qbench.run.json_values import Readable
from qbench.run.records import gap_histogram
from qbench.run.records.columns import Columns, column_stat
from qbench.run.records.schema import RequestRecord
from qbench.run.results.device import DeviceStats, device_stats
from qbench.run.results.figures import Figures
from qbench.run.results.server_phases import TraceReport
from qbench.run.scenario.schema import Slo

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
    def of(cls, values: Sequence[float] | np.ndarray) -> Stats:
        arr = np.asarray(values, dtype=np.float64)
        if not arr.size:
            return cls()
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
class GeneratorStats(Readable):
    """How hard the load generator itself worked (to tell a saturated client from a slow server)."""

    cpu_s: float | None = None  # process CPU time (user+system) during the run
    cpu_percent: float | None = None  # cpu_s / wall time * 100 (100 = one full core)
    max_loop_lag_s: float | None = None  # worst event-loop oversleep seen by the ticker
    p99_loop_lag_s: float | None = None  # 99th percentile of the ticker's oversleep
    loop_wait_share: float | None = None  # its event loop's thread runnable but waiting for a core / wall
    max_in_flight: int | None = None  # most requests in flight at once
    in_flight_cap: int | None = None  # scenario's cap on in-flight requests (None = uncapped)
    processes: int = 1  # generator processes used (local processes or Ray actors)
    executor: str = "local"  # local | processes | ray (qbench.run.load.executor)
    workers: list[WorkerStats] = field(default_factory=list)  # per worker, when there are several
    clock_uncertainty_s: float | None = None  # Ray: worst node's clock offset uncertainty (+-, s)



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
    """One SLO bound and how a run (or a point) did against it: made by `judge_bound` only."""

    name: str  # the Slo field, e.g. "p95_latency_s"
    threshold: float
    actual: float | None  # None when the run produced no value (counts as failed)
    passed: bool
    kind: str  # "max" (actual must be <= threshold) or "min" (actual must be >= threshold)
    note: str | None = None  # why actual is missing or differs from the ok-only table

    @property
    def why(self) -> str:
        """Why it failed, in words ("" when it passed): 'p95_latency_s 2.5 > 2', 'error_rate 5.0% > 1.0%'."""
        if self.passed:
            return ""
        if self.actual is None:
            named = f"{self.name}: " if self.name else ""  # a reason from a file of before typed checks
            return named + self.note if self.note else f"{self.name} not measured (no completed request)"
        share = self.name == "error_rate"
        actual = f"{self.actual:.1%}" if share else f"{self.actual:.3g}"
        bound = f"{self.threshold:.1%}" if share else f"{self.threshold:g}"
        ranked = " (failed requests ranked slowest)" if self.note else ""
        return f"{self.name} {actual} {'<' if self.kind == 'min' else '>'} {bound}{ranked}"

    @property
    def excess(self) -> float:
        """How far past the bound, relative to it (0 when it passed; 10 with no figure)."""
        if self.actual is None:
            return 10.0
        if self.kind == "min":
            return max(0.0, 1 - self.actual / self.threshold) if self.threshold else 0.0
        return max(0.0, self.actual / self.threshold - 1) if self.threshold else float(self.actual > 0)


def judge_bound(name: str, threshold: float, actual: float | None, note: str | None = None) -> SloCheck:
    """The SLO's one judge: `actual` against the bound `name` sets (a min_* bound is a floor, any other a
    ceiling); no figure fails."""
    kind = "min" if name.startswith("min_") else "max"
    passed = actual is not None and (actual >= threshold if kind == "min" else actual <= threshold)
    return SloCheck(name, threshold, actual, passed, kind, note)


def e2e_breaches(summaries: Sequence[Summary]) -> list[SloCheck]:
    """The end-to-end latency checks the runs failed with their failed requests ranked slowest, one per
    bound (the first in order of their reasons): what `qbench run` said, where ok-only figures may pass."""
    failed = sorted((c for s in summaries for c in s.slo if c.name.endswith("_latency_s") and not c.passed),
                    key=lambda c: c.why)
    first: dict[str, SloCheck] = {}
    for check in failed:
        first.setdefault(check.name, check)
    return list(first.values())


@dataclass
class JourneyStats(Readable):
    """The journeys of a run (scenario `journey:`): how many finished, and how long a user took."""

    started: int = 0
    completed: int = 0  # every request of every step done, each ok
    failed: int = 0  # ended by a failed request (a journey stops at its first error)
    unfinished: int = 0  # cut off by the end of the run (duration, requests, a stop)
    duration: Stats = field(default_factory=Stats)  # completed: first intended send -> last completion (s)
    steps: dict[str, Summary] = field(default_factory=dict)  # per step, "<index>:<endpoint>"



@dataclass
class Summary(Readable, tolerant=True):
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
    device: DeviceStats | None = None  # the forward passes beside the served rate, GPU busy (the run's)

    def phase(self, name: str) -> Stats:
        return self.latency.get(name, Stats())

    def figures(self) -> Figures:
        """The headline figures every later stage quotes (end-to-end latency of ok requests)."""
        latency = self.phase("latency_s")
        return Figures(throughput_rps=self.throughput_rps, goodput_rps=self.goodput_rps,
                       p50_latency_s=latency.p50, p95_latency_s=latency.p95, p99_latency_s=latency.p99,
                       mean_latency_s=latency.mean, error_rate=self.error_rate)

    def checks(self) -> list[SloCheck]:
        """Every SLO check: the run's, then each endpoint's (named `endpoint: check`)."""
        return self.slo + [replace(c, name=f"{label}: {c.name}") for label, e in self.endpoints.items()
                           for c in e.slo]

    def failed_checks(self) -> list[SloCheck]:
        """Failed checks, each endpoint's too (named `endpoint: check`)."""
        return [c for c in self.checks() if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)



def summarize(
    records: Columns | Sequence[RequestRecord],
    slo: Slo | None = None,
    *,
    duration_s: float | None = None,
    generator: GeneratorStats | None = None,
    endpoint_slos: dict[str, Slo | None] | None = None,
    journey_length: int | None = None,
    server_traces: TraceReport | None = None,
) -> Summary:
    """Summarise the measured (non-warm-up) records (`Columns`, or a small run's records); evaluate `slo`.
    Several endpoints are summarised per endpoint too (a mix's `endpoint_slos`: label -> its own slo, or
    None), journeys per step and per journey (`journey_length`)."""
    cols = records if isinstance(records, Columns) else Columns.of(records)
    measured = cols.where(cols.measured())
    codes, names = measured.labels("endpoint")
    by_label = {label: codes == names.index(label) for label in sorted(names)}  # masks: a view at a time
    if endpoint_slos is not None:
        summary = _by_endpoint(measured, by_label, slo, endpoint_slos, duration_s, generator)
    else:
        summary = _summarize(measured, slo, duration_s=duration_s, generator=generator)
        if len(by_label) > 1:  # not a mix (a journey's steps): the SLO is the total's, endpoints are facts
            summary.endpoints = {label: _summarize(measured.where(rows), duration_s=summary.duration_s)
                                 for label, rows in by_label.items()}
    if journey_length is not None:
        summary.journeys = journey_stats(cols, journey_length, slo, summary.duration_s)
    if len(cols) and not len(measured):
        _all_warmup(summary, len(cols))
    summary.server_traces = server_traces
    summary.device = device_stats(measured.where(measured.ok()), summary.duration_s)
    return summary


def _all_warmup(summary: Summary, count: int) -> None:
    """Say why no check has a figure when the warm-up covered every request (else: 'actual none')."""
    note = f"no request measured: load.warmup covered all {count} requests of the run"
    for checks in [summary.slo, *(e.slo for e in summary.endpoints.values())]:
        for i, check in enumerate(checks):
            if check.actual is None and check.note is None:
                checks[i] = replace(check, note=note)


def journey_stats(cols: Columns, length: int, slo: Slo | None, window: float) -> JourneyStats:
    """Journeys started, completed, failed and cut off; time to finish one; each step's summary.
    `cols`: every record of the run, the warm-up's included."""
    stats = JourneyStats()
    journey = cols.floats("journey_id")
    rows = np.flatnonzero(~np.isnan(journey))
    if rows.size:
        order = rows[np.argsort(journey[rows], kind="stable")]  # journey by journey, each in row order
        ids = journey[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        firsts = order[starts]  # each journey's first record
        failed = np.logical_or.reduceat(_failed(cols)[order], starts)
        all_ok = np.logical_and.reduceat(cols.ok()[order], starts)
        sizes = np.diff(np.r_[starts, order.size])
        last = np.maximum.reduceat(np.nan_to_num(cols.floats("completed_at_s")[order], nan=0.0), starts)
        counted = ~cols.bools("warmup")[firsts]
        completed = counted & ~failed & (sizes >= length) & all_ok
        stats.started = int(np.count_nonzero(counted))
        stats.failed = int(np.count_nonzero(counted & failed))
        stats.completed = int(np.count_nonzero(completed))
        stats.unfinished = stats.started - stats.failed - stats.completed
        seen = np.argsort(firsts, kind="stable")  # the journeys in order of their first record
        durations = (last - cols.floats("intended_at_s")[firsts])[seen]
        stats.duration = Stats.of(durations[completed[seen]])
    measured = cols.where(cols.measured())
    steps = measured.floats("step")
    codes, names = measured.labels("endpoint")
    for step in np.unique(steps[~np.isnan(steps)]).tolist():
        in_step = steps == step
        for label in sorted(names[c] for c in np.unique(codes[in_step]).tolist()):
            stats.steps[f"{int(step)}:{label}"] = _summarize(measured.where(in_step), slo, duration_s=window)
    return stats


def _failed(cols: Columns) -> np.ndarray:
    """Requests that failed on their own (not closed by the end of the run: they end a journey)."""
    codes, kinds = cols.labels("error_kind")
    closed = np.isin(codes, [i for i, kind in enumerate(kinds) if kind in ("deadline", "interrupted")])
    failed: np.ndarray = ~np.isnan(cols.floats("sent_at_s")) & ~cols.ok() & ~closed
    return failed


RATE_THRESHOLDS = ("min_throughput", "min_goodput", "min_output_tps")


def _by_endpoint(measured: Columns, by_label: dict[str, np.ndarray], slo: Slo | None,
                 own: dict[str, Slo | None], duration_s: float | None,
                 generator: GeneratorStats | None) -> Summary:
    window = duration_s if duration_s is not None else _window(measured, measured.ok())
    inherited = slo.model_copy(update=dict.fromkeys(RATE_THRESHOLDS)) if slo is not None else None
    rates = Slo(**{k: v for k, v in slo.thresholds().items() if k in RATE_THRESHOLDS}) if slo else None
    judged = {label: _merged(inherited, own.get(label)) for label in by_label}
    endpoints = {label: _summarize(measured.where(rows), judged[label], duration_s=window)
                 for label, rows in by_label.items()}
    total = _summarize(measured, duration_s=window, generator=generator)
    ok = measured.ok()
    good = sum(_count(meets_slo(measured.where(rows & ok), judged[label]))
               for label, rows in by_label.items())
    total.goodput_rps = _per_s(good, window)
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
    measured: Columns,
    slo: Slo | None = None,
    *,
    duration_s: float | None = None,
    generator: GeneratorStats | None = None,
) -> Summary:
    ok_mask = measured.ok()
    sent = ~np.isnan(measured.floats("sent_at_s"))
    ok = measured.where(ok_mask)
    window = duration_s if duration_s is not None else _window(measured, ok_mask)
    errors_by_kind, samples = _errors(measured.where(~ok_mask))
    errors = _count(sent & ~ok_mask)
    sent_count, ok_count = _count(sent), len(ok)
    summary = Summary(
        requests=len(measured),
        sent=sent_count,
        not_sent=len(measured) - sent_count,
        completed_ok=ok_count,
        errors=errors,
        errors_by_kind=errors_by_kind,
        error_samples=samples,
        error_rate=errors / sent_count if sent_count else 0.0,
        duration_s=window,
        throughput_rps=_per_s(ok_count, window),
        goodput_rps=_per_s(_count(meets_slo(ok, slo)), window),
        offered_rps=_offered(measured, window),
        latency={name: Stats.of(column_stat(measured if name == "send_lag_s" else ok, name))
                 for name in PHASES},
        eta_error=Stats.of(column_stat(ok, "eta_error_s")),
        generator=generator or GeneratorStats(),
        input_tokens=_total(ok, "input_tokens"),
        output_tokens=_total(ok, "output_tokens"),
        request_output_tps=Stats.of(column_stat(ok, "output_tps")),
    )
    summary.output_tps = _per_s(summary.output_tokens, window)
    if ok.ints("itl_count").any():
        summary.latency["itl_s"] = itl_stats(ok)
    if ok.ints("chunks_sent").any():
        stream_stats(summary, ok)
    summary.server_phases = server_phase_stats(ok)
    if slo is not None:
        summary.slo = evaluate_slo(summary, slo, _end_to_end_with_failures(measured, sent, ok_mask, slo))
        summary.slo_passed = all(c.passed for c in summary.slo)
    return summary


def _errors(failed: Columns) -> tuple[dict[str, int], dict[str, str]]:
    """The failed requests by error kind (none: "client"), and each kind's first message, kind order."""
    if not len(failed):
        return {}, {}
    import pyarrow.compute as pc

    codes, names = failed.labels("error_kind")
    table = [name or "client" for name in names] + ["client"]  # the last entry: code -1 (None)
    kinds = sorted(set(table))
    kind = np.array([kinds.index(name) for name in table], dtype=np.int64)[codes]
    counts = np.bincount(kind, minlength=len(kinds))
    messages = _concat(failed.texts("error_message", np.ones(len(failed), dtype=bool)))
    said = pc.fill_null(pc.greater(pc.binary_length(messages), 0), False).to_numpy(zero_copy_only=False)
    samples = {}
    for i, name in enumerate(kinds):
        first = np.flatnonzero(said & (kind == i))
        if first.size:
            samples[name] = str(messages[int(first[0])].as_py())
    return {name: int(counts[i]) for i, name in enumerate(kinds) if counts[i]}, samples


def _concat(batches: Iterator[Any]) -> Any:
    import pyarrow as pa

    return pa.concat_arrays(list(batches) or [pa.array([], type=pa.string())])


def server_phase_stats(ok: Columns) -> dict[str, Stats]:
    """Where the time went: each of SERVER_PHASES that some request has, over those that have it."""
    out = {}
    for name in SERVER_PHASES:
        values = column_stat(ok, name)
        if values.size:
            out[name] = Stats.of(values)
    return out


def meets_slo(cols: Columns, slo: Slo | None) -> np.ndarray:
    """Which requests meet the SLO's per-request thresholds: a mask (a request without the phase does not)."""
    good = np.ones(len(cols), dtype=bool)
    if slo is None:
        return good
    for phase, limit in slo.per_request_limits().items():
        with np.errstate(invalid="ignore"):
            good &= cols.floats(phase) <= limit
    return good


def evaluate_slo(
    summary: Summary, slo: Slo, end_to_end: dict[str, tuple[np.ndarray, int]] | None = None
) -> list[SloCheck]:
    """One check per threshold set in `slo`; a missing actual value fails the check. `end_to_end`: phase ->
    (sorted ok values, failed sent count), failures ranked slower than any bound."""
    checks: list[SloCheck] = []
    for name, threshold in slo.thresholds().items():
        actual, note = slo_actual(summary, name)[0], None
        stat, _, phase = name.partition("_")
        if end_to_end is not None and phase in end_to_end:
            actual, note = _percentile_with_failures(*end_to_end[phase], stat)
        checks.append(judge_bound(name, threshold, actual, note))
    return checks


END_TO_END = ("latency_s", "latency_from_send_s")


def _end_to_end_with_failures(measured: Columns, sent: np.ndarray, ok: np.ndarray,
                              slo: Slo) -> dict[str, tuple[np.ndarray, int]]:
    """Per end-to-end phase `slo` judges: the sent ok requests' sorted values, and the failed sent count."""
    phases = {name.partition("_")[2] for name in slo.thresholds()} & set(END_TO_END)
    failed = _count(sent & ~ok)
    return {name: (np.sort(column_stat(measured, name, sent & ok)), failed) for name in END_TO_END
            if name in phases}


def _percentile_with_failures(
    ok_sorted: np.ndarray, failed: int, stat: str
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
    low, high = float(ok_sorted[lo]), float(ok_sorted[hi])
    value = low + (high - low) * (rank - lo)
    return value, (f"over all {n} sent requests, the {failed} failed ones ranked slowest" if failed else None)


def slo_actual(summary: Summary, name: str) -> tuple[float | None, str]:
    """The summary's figure an SLO threshold `name` is judged on, and whether it is a "min" or "max"."""
    if name == "error_rate":  # none sent after the warm-up: nothing measured, not "0 errors"
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


@dataclass(frozen=True)
class GapColumns:
    """A record's columns for one kind of gap: count, mean, max, histogram, and stand-in statistics."""

    count: str
    mean: str
    max: str
    hist: str
    stand_in: tuple[tuple[str, float], ...]  # (column, share of the record's gaps at or below it)
    uncounted: str | None = None  # older records: this statistic alone, one gap, where count is 0


ITL = GapColumns("itl_count", "itl_mean_s", "itl_max_s", "itl_hist",
                 (("itl_p50_s", 0.5), ("itl_p99_s", 0.49), ("itl_max_s", 0.01)))
CHUNK_LATENCY = GapColumns(
    "chunk_latency_count", "chunk_latency_mean_s", "chunk_latency_max_s", "chunk_latency_hist",
    (("chunk_latency_p50_s", 0.5), ("chunk_latency_p95_s", 0.45), ("chunk_latency_max_s", 0.05)))
OUTPUT_GAP = GapColumns("output_gap_count", "output_gap_mean_s", "output_gap_max_s", "output_gap_hist",
                        (("output_gap_p95_s", 1.0),), uncounted="output_gap_p95_s")


def gap_stats(ok: Columns, columns: GapColumns) -> Stats:
    """Every gap of the ok records, one kind: count, mean and max exact, percentiles from the records'
    histograms added together (a record without one standing in with its statistics: an upper bound)."""
    counts, means, tops = ok.ints(columns.count), ok.floats(columns.mean), ok.floats(columns.max)
    if columns.uncounted is not None:  # older records: one statistic, taken as one gap
        alone = ok.floats(columns.uncounted)
        old = (counts == 0) & ~np.isnan(alone)
        counts = np.where(old, 1, counts)
        means, tops = np.where(old, alone, means), np.where(old, alone, tops)
    gaps = (counts != 0) & ~np.isnan(means)
    if not gaps.any():
        return Stats()
    weights = counts[gaps]
    count = int(weights.sum())
    mean = _sum_in_order(weights * means[gaps]) / count
    top = float(np.nan_to_num(tops[gaps], nan=0.0).max())
    merged, present = gap_histogram.merge_present(ok.texts(columns.hist, gaps))
    if not present.all():
        missing = np.flatnonzero(gaps)[~present]
        merged.update(gap_histogram.stand_in(
            counts[missing], [ok.floats(name)[missing] for name, _ in columns.stand_in],
            [share for _, share in columns.stand_in]))
    qs = gap_histogram.percentiles(merged, [0.0, 0.5, 0.9, 0.95, 0.99])
    if not qs:
        return Stats(count=count, mean=mean, max=top)
    low, p50, p90, p95, p99 = (min(q, top) for q in qs)  # a bucket's value may pass the longest gap
    return Stats(count=count, mean=mean, min=low, p50=p50, p90=p90, p95=p95, p99=p99, max=top)


def itl_stats(ok: Columns) -> Stats:
    """The run's inter-token gaps: every gap (gap_stats)."""
    return gap_stats(ok, ITL)


def stream_stats(summary: Summary, ok: Columns) -> None:
    """Chunks, chunk latency and output gaps of streamed inputs onto `summary`: every chunk, every gap."""
    summary.chunks_sent = _total(ok, "chunks_sent")
    summary.chunks_answered = _total(ok, "chunks_answered")
    chunks = gap_stats(ok, CHUNK_LATENCY)
    if chunks.count:
        summary.latency["chunk_latency_s"] = chunks
    summary.latency["output_gap_s"] = gap_stats(ok, OUTPUT_GAP)


def _sum_in_order(values: np.ndarray) -> float:
    """The sum added left to right, as Python's sum() over the records did (numpy's sum() is pairwise)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def _total(cols: Columns, name: str) -> int:
    """The sum of an integer column, None as 0."""
    return int(np.nan_to_num(cols.floats(name), nan=0.0).astype(np.int64).sum())


def _count(mask: np.ndarray) -> int:
    return int(np.count_nonzero(mask))


def _window(measured: Columns, ok: np.ndarray) -> float:
    """First intended send -> the later of the last OK completion and the last send, in seconds."""
    if not len(measured):
        return 0.0
    start = float(measured.floats("intended_at_s").min())
    ends = [column_stat(measured, "completed_at_s", ok), column_stat(measured, "sent_at_s")]
    end = max((float(e.max()) for e in ends if e.size), default=start)
    return max(end - start, 0.0)


def _offered(measured: Columns, window: float) -> float:
    n = len(measured)
    if not n:
        return 0.0
    times = measured.floats("intended_at_s")
    span = float(times.max()) - float(times.min())
    if n > 1 and span > 0:
        return (n - 1) / span
    return _per_s(n, window)


def _per_s(count: int, window: float) -> float:
    return count / window if window > 0 else 0.0
