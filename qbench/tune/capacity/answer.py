"""`qbench capacity`'s answer in words, as (label, text) lines: for capacity.json, console, report."""

from __future__ import annotations

from qbench.tune.values.ceiling import Capacity, Probe, RateNow, held_sentence
from qbench.tune.values.constraints import Constraints, bounds_text


def describe(capacity: Capacity, constraints: Constraints, think_time_s: float, length_why: str = "",
             *, streams: bool = False) -> list[tuple[str, str]]:
    """The answer in words, as (label, text): capacity, how it held, bracket, users, what is past it."""
    slo = bounds_text(constraints.slo)
    slo += f"{', ' if slo else ''}error_rate <= {constraints.max_error_rate:.1%}"
    state = "converged" if capacity.converged else "NOT converged: probe budget spent"
    rate, failing = capacity.capacity_rps, capacity.failing_rate_rps
    if rate is None:
        low = f"{failing:.3g} req/s" if failing is not None else "the lowest rate"
        return [("no capacity", f"the SLO ({slo}) or the steady state fails even at {low}, the lowest "
                                "rate tried")]
    meta, overload, after = capacity.metastability, capacity.overload, capacity.after_burst
    grown = capacity.degradation
    ageing = (None if grown is None else grown.use_text(rate, capacity.confirmed) if capacity.now is None
              else grown.growth_text() + " (the rate it holds now: below)" if grown.growth_text() else None)
    lines = [("capacity", _headline(capacity, rate, slo, ageing))]
    off = ("no sustained confirmation was run: qbench's runs left the server collapsed (over the search, "
           "below)" if capacity.collapsed else "no sustained confirmation was run (--no-confirm)")
    lines.append(held_sentence(capacity, off))
    lines += _restarted(capacity)
    if capacity.host_busy is not None:
        lines.append(("host", _host_text(capacity.host_busy)))
    if meta is not None:
        lines.append(("metastable" if meta.metastable else "with the queue", meta.text(rate)))
    over = capacity.over_the_search
    if over is not None:
        lines.append(("over the search", over))
    if ageing:
        lines.append(("with use", ageing))
    if capacity.now is not None:
        lines.append(("now", _now_text(capacity, capacity.now)))
    if failing is None:
        lines.append(("bracket", f"the SLO held at every rate tried ({state}): the capacity is at least "
                                 f"{rate:.3g} req/s"))
    else:
        lines.append(("bracket", f"[{rate:.3g}, {failing:.3g}) req/s, last passing to first failing "
                                 f"(tolerance {capacity.tolerance:.0%}, {state})"))
        probe = capacity.first_failing
        why = probe.why if probe and probe.why else "failed"
        lines.append(("SLO first fails", f"at {failing:.3g} req/s: {why}"))
    at = capacity.at_capacity
    users = capacity.users(think_time_s)
    if users is not None and at is not None:
        lines.append(("users", f"~{users:.0f} users clicking every {think_time_s:g} s (N = {rate:.3g} req/s "
                               f"x ({think_time_s:g} s think + {at.mean_latency_s or 0:.3g} s mean latency "
                               "at capacity))"))
    held = capacity.users(0.0)
    if streams and held is not None and at is not None:
        lines.append(("streams", f"~{held:.1f} concurrent streams (N = {rate:.3g} streams/s x "
                                 f"{at.mean_latency_s or 0:.3g} s mean stream length at capacity)"))
    if length_why:
        lines.append(("probe length", length_why))
    if overload is not None:
        lines.append((f"past it (x{overload.rate_rps / overload.capacity_rps:.2g})", overload.advice))
        if overload.eta_finding:
            lines.append(("server ETA", overload.eta_finding))
    if after is not None:
        lines.append(("after the burst", _after_text(after, rate) + _burst_text(capacity, rate)))
    return lines


def _host_text(waited: float) -> str:
    return (f"busy: qbench's load generator waited for a core {waited:.0%} of a probe (other work on "
            "this machine held its cores), and the server very likely waited too: the answer is what it "
            "sustained on this machine as it was; measure on a quiet host, or send the load from another "
            "machine, for the rate it sustains alone")


def _burst_text(capacity: Capacity, rate: float) -> str:
    """How much the run past it moved the service time, against the confirmation ('' without both)."""
    change = capacity.burst_change
    if change is None:
        return ""
    moved = f"; its {change.service.text(change.metric)} against the confirmation"
    if not change.service.degraded:
        return moved
    if capacity.now is not None:
        return f"{moved}: the burst aged the app (now, below)"
    now = rate * change.start_s / change.end_s
    return (f"{moved}: the burst aged the app; right after it the answer's load is about {now:.3g} req/s "
            f"({rate:.3g} x {change.start_s * 1000:.3g} / {change.end_s * 1000:.3g} ms, not measured): "
            "restart the app, or check that rate with `qbench run`, before you rely on it")


def _restarted(capacity: Capacity) -> list[tuple[str, str]]:
    """The restarts of an app qbench started that its runs left collapsed, as a line ([] none)."""
    if not capacity.restarts:
        return []
    times = f"{len(capacity.restarts)} time{'s' if len(capacity.restarts) != 1 else ''}"
    return [("restarted", f"qbench's runs left the app collapsed {times} (a metastable server: past its "
             "capacity it does not come back while load goes on); qbench started it (--app), so it restarted "
             "it each time and ran what followed on a fresh start: " + "; ".join(capacity.restarts))]


def _headline(capacity: Capacity, rate: float, slo: str, ageing: str | None) -> str:
    """The capacity line: the rate, and the conditions it holds under (a cap, a burst, use)."""
    meta, lowered, overload = capacity.metastability, capacity.lowered_from_rps, capacity.overload
    head = f"{rate:.3g} req/s of open-loop arrivals meeting {slo}, the server keeping up"
    server = overload.cap_server if overload is not None else ""  # its cap is not Gradio's max_size
    if meta is not None and meta.metastable:
        cap = meta.max_size(rate)
        keep = (f"keep its queue at {cap} waiting or less" if server or meta.departures
                else f"keep max_size at {cap} or less")
        head += (f", lowered from the search's {lowered:.3g} req/s, where a burst tips it over"
                 if lowered is not None else "") + f"; {keep} (metastable, below)"
    elif overload is not None and overload.tips_at_waiting is not None and overload.max_size is not None:
        setting = (f"cap its queue at {overload.max_size} waiting (how, on {server}: past it, below)"
                   if server else f"set max_size={overload.max_size}")
        head += (f"; held without a cap, but a burst past about {overload.tips_at_waiting} waiting tips it "
                 f"over (it then serves fewer than {rate:.3g} req/s: past it, below): {setting} and run "
                 "`qbench capacity` again to check that it sheds the burst")
    if capacity.collapsed:
        head += ("; BUT qbench's runs left the server collapsed: restart it, cap its queue and check it "
                 "(over the search, below)")
    elif capacity.restarts:
        head += ("; on a fresh start: a run past it left the app collapsed until qbench restarted it "
                 "(restarted, below)")
    after, now = capacity.after_burst, capacity.now
    if now is not None:
        return head + _now_head(now)
    if after is not None and not after.passed:
        head += "; BUT a burst past it leaves the server collapsed (after the burst, below)"
    if ageing:
        head += "; now: the app ages with use (with use, below)"
    return head


def _now_head(now: RateNow) -> str:
    served = f"once qbench's {now.requests:,} requests were served"
    if now.rate_rps is None:
        return f"; BUT the app ages with use, and {served} no rate tried held: restart it (now, below)"
    return f"; BUT the app ages with use: {served} it held {now.rate_rps:.3g} req/s (now, below)"


def _now_text(capacity: Capacity, now: RateNow) -> str:
    """The rate an ageing app held once qbench's runs were over, how it aged, and where it heads."""
    runs = [p for p in capacity.probes if p.kind == "now"]
    failed = "".join(f"; failed at {p.rate_rps:.3g} req/s ({p.why})" for p in runs if not p.passed)
    projected = "" if now.start_at == "the confirmation" else " (projected)"
    aged = (f"its {now.metric} p50 {now.start_s * 1000:.3g} ms at {now.start_at}, "
            f"{now.now_s * 1000:.3g} ms{projected} once qbench's {now.requests:,} requests were served "
            f"(+{now.slope_s * 1e6:.3g} us per request)")
    held = next((p for p in runs if p.passed), None)
    if now.rate_rps is None or held is None:
        return (f"{aged}: no sustained run held{failed}: restart the app before you rely on a rate, and "
                "run `qbench soak` to see how fast it ages")
    rate = now.rate_rps
    base_s = now.now_s + now.slope_s * held.completed_ok  # where this run left it
    later = [f"after {label} more ({rate * seconds:,.0f} requests) about "
             f"{rate * base_s / (base_s + now.slope_s * rate * seconds):.2g} req/s"
             for label, seconds in (("10 minutes", 600.0), ("an hour", 3600.0), ("a day", 86400.0))]
    return (f"{aged}: {rate:.3g} req/s held the whole {held.duration_s:g} s run right after it (p95 "
            f"{held.p95_latency_s or 0:.3g} s), the rate for this moment (first tried {now.first_rps:.3g}: "
            f"the answer x {now.start_s * 1000:.3g} / {now.now_s * 1000:.3g} ms, less the ageing of two "
            f"more such runs){failed}; if it keeps ageing so at that rate: {'; '.join(later)}. Restart "
            "it, or run `qbench soak`, before you provision for one number")


def _after_text(after: Probe, rate: float) -> str:
    """Whether the server served the answer again right after the run past it."""
    if after.passed:
        p95 = f": p95 {after.p95_latency_s:.3g} s" if after.p95_latency_s is not None else ""
        return f"served {rate:.3g} req/s again right after it{p95}, steady: the server came back"
    return (f"did NOT serve {rate:.3g} req/s again right after it ({after.why or 'failed'}): the burst left "
            "the server collapsed; cap its queue (max_size, so a burst is turned away) or restart it after "
            "one, and check with `qbench run` at this rate")
