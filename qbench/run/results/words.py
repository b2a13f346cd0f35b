"""The run's summary in words, said alike by the console and the report: phase labels, the one-line
sentences (tokens, input chunks, journeys), where the time went, and the signs of a saturated client."""

from __future__ import annotations

from qbench.run.results.summary import JourneyStats, Summary

#: Generator-bottleneck thresholds (see `bottleneck_warnings`).
SEND_LAG_P99_WARN_S = 0.005
LOOP_LAG_WARN_S = 0.02
CPU_WARN_PERCENT = 90.0

PHASE_LABELS = {
    "latency_s": "latency from intended send",
    "latency_from_send_s": "latency from actual send",
    "queue_wait_s": "queue wait",
    "service_s": "service time",
    "ttfo_s": "time to first output",
    "send_lag_s": "send lag",
    "ttft_s": "time to first token (from send)",
    "tpot_s": "time per output token",
    "itl_s": "inter-token gap (every gap)",
    "download_s": "output files download",
    "chunk_latency_s": "input chunk -> its output (every chunk)",
    "output_gap_s": "gap between outputs (every gap)",
}

#: Where the time went (Summary.server_phases), in the order shown.
SERVER_PHASE_LABELS = {
    "client_only_s": "client-only (network, protocol)",
    "server_queue_wait_s": "server: queue wait",
    "server_upload_s": "server: upload",
    "server_preprocess_s": "server: preprocess",
    "server_fn_s": "server: function",
    "server_postprocess_s": "server: postprocess",
    "server_streaming_diff_s": "server: streaming diff",
    "server_total_s": "server: processing in all",
    "server_prepare_s": "server: request's prepare",
    "server_batch_prepare_s": "server: batch's prepare",
    "server_h2d_s": "server: batch's host->device",
    "server_forward_s": "server: batch's forward pass",
    "server_batch_size": "batch size (requests)",
}


def time_split(s: Summary) -> list[tuple[str, Summary]]:
    """(endpoint, its summary) for each endpoint with the server's phases; a run of one endpoint: ("", s)."""
    parts = list(s.endpoints.items()) if s.endpoints else [("", s)]
    return [(label, part) for label, part in parts if part.server_phases]


def token_line(s: Summary) -> str:
    """Output tokens in total and per request (token streams only)."""
    per_request = s.request_output_tps.p50
    each = "" if per_request is None else f", {per_request:.1f} tok/s per request (p50)"
    return f"{s.output_tokens:,} out, {s.input_tokens:,} in; {s.output_tps:.1f} tok/s in total{each}"


def chunk_line(s: Summary) -> str:
    """Streamed inputs: chunks sent and the share an output answered."""
    share = s.chunks_answered / s.chunks_sent if s.chunks_sent else 0.0
    return f"{s.chunks_sent:,} sent, {s.chunks_answered:,} answered ({share:.0%}; others were replaced)"


def journey_line(j: JourneyStats) -> str:
    """Journeys started, completed, failed and cut off, and how long one took."""
    d = j.duration
    took = (f"; time to finish one: p50 {seconds(d.p50)}, p95 {seconds(d.p95)}, max {seconds(d.max)}"
            if d.count else "")
    return (f"journeys: {j.started} started, {j.completed} completed, {j.failed} ended by an error, "
            f"{j.unfinished} cut off by the end of the run{took}")


def bottleneck_warnings(s: Summary, *, burst: bool = False) -> list[str]:
    """Signs that the generator (or its host), not the server, limited the run."""
    out: list[str] = []
    g = s.generator
    busy = g.cpu_percent is not None and g.cpu_percent > CPU_WARN_PERCENT * g.processes
    idle = g.cpu_percent is not None and g.cpu_percent < 50 * g.processes
    cause = (
        ("the generator was saturated: use more workers (--workers)" if g.executor == "ray"
         else "the generator was saturated: use --processes")
        if busy
        else "the generator itself was mostly idle, so the host is busy (other processes?)"
        if idle
        else "the generator (or an in-flight cap) could not keep up"
    )
    lag = s.phase("send_lag_s").p99
    if lag is not None and lag > SEND_LAG_P99_WARN_S and not burst:
        out.append(f"send lag p99 {lag * 1000:.1f} ms: requests left late; {cause}.")
    if g.max_loop_lag_s is not None and g.max_loop_lag_s > LOOP_LAG_WARN_S:
        out.append(f"event-loop lag up to {g.max_loop_lag_s * 1000:.0f} ms: timings include it; {cause}.")
    if busy:
        out.append(f"generator CPU {g.cpu_percent:.0f}% of a core: it may be the bottleneck, not the server")
    for w in g.workers:
        if w.cpu_percent is not None and w.cpu_percent > CPU_WARN_PERCENT and len(g.workers) > 1:
            out.append(f"generator {w.index} ({w.where}) at {w.cpu_percent:.0f}% of a core: that worker "
                       "may hold the run back; add workers or nodes")
        if w.lost:
            out.append(f"generator {w.index} was lost mid-run ({w.lost}): its unreported requests are "
                       "generator_lost records")
    return out


#: (below this many seconds, scale, unit) for `seconds`
_UNITS = ((1e-3, 1e6, "µs"), (1.0, 1e3, "ms"), (100.0, 1.0, "s"))


def seconds(value: float | None) -> str:
    """Seconds with 3 significant digits in the unit that keeps them short, at most 7 characters with
    a sign: 0.01234 -> '12.3ms', 42.43 -> '42.4s', -0.0000456 -> '-45.6µs', 1234.5 -> '1234s'."""
    if value is None:
        return "-"
    size = abs(value)
    if size == 0:
        return "0ms"
    if size < 1e-6:
        return f"{value * 1e6:.2f}µs"
    for limit, scale, unit in _UNITS:
        text = f"{value * scale:.3g}"
        if size < limit and "e" not in text:  # 0.9996 s rounds to 1e+03 ms: say 1 s instead
            return text + unit
    return f"{value:.0f}s"
