"""Did a point's knobs take effect? The hook's record and the records' running(t) against the knobs ->
KnobCheck, and what the framework checks share. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from qbench.errors import ScenarioError
from qbench.run import Columns, RequestRecord, Scenario, json_int, json_number
from qbench.tune.knobs.grid import flag
from qbench.tune.servers.apphook import HookRecord

Verdict = Literal["applied", "unverified", "not_applied", "not_checked"]

HOLD_MIN_S = 0.02
DISPATCH_S = 0.02  # a queue wait up to this long is the dispatcher's own latency (free slots or not)
SATURATED_MIN_S = 0.25  # saturation: requests waited at least this long in all (and 2 service times)
SATURATED_WAITERS = 3  # ... and at least this many requests waited (and WAITER_SHARE of those started)
WAITER_SHARE = 0.1
REACHED_SHARE = 0.15


@dataclass
class Parallelism:
    """How many requests the server ran at once, from the records' own timestamps."""

    peak_running: int = 0  # the most requests running at once, held for hold_s
    typical_while_waiting: int = 0  # running(t) while requests waited: its time-weighted median
    reached_while_waiting: int = 0  # the highest level running(t) held for REACHED_SHARE of that time
    saturated: bool = False  # requests waited for 2 service times (and SATURATED_MIN_S) or more, in all,
    # and SATURATED_WAITERS (and WAITER_SHARE of those started) or more of them waited
    waiting_s: float = 0.0  # total time with at least one request waiting in the queue
    waiters: int = 0  # requests that waited past the dispatch allowance while another ran
    hold_s: float = HOLD_MIN_S  # half the median service time (at least 20 ms, and twice the client lag)
    started: int = 0  # records with a process_starts time

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def observed_parallelism(records: Columns | Sequence[RequestRecord], lag_s: float = 0.0) -> Parallelism:
    """running(t) and waiting(t) from every sent record; `lag_s`: the generator's p99 loop lag."""
    cols = Columns.of(records)
    sent, done = cols.floats("sent_at_s"), cols.floats("completed_at_s")
    spans = ~np.isnan(sent) & ~np.isnan(done)
    joined, started = cols.floats("joined_at_s")[spans], cols.floats("started_at_s")[spans]
    sent, done = sent[spans], done[spans]
    ran = ~np.isnan(started)
    if not ran.any():
        return Parallelism()
    service = float(np.median(done[ran] - started[ran]))
    hold = max(HOLD_MIN_S, 0.5 * service, 2 * lag_s)
    dispatch = max(DISPATCH_S, lag_s)
    queued = np.where(np.isnan(joined), sent, joined) + dispatch
    begin = np.where(ran, started, done)
    waited = begin > queued  # a shorter wait is the dispatcher's latency, not a full queue
    # per record, in this order: wait start, wait end, run start, run end (those it has)
    times = np.stack([queued, begin, started, done], axis=1)
    d_run = np.broadcast_to(np.array([0, 0, 1, -1]), times.shape)
    d_wait = np.broadcast_to(np.array([1, -1, 0, 0]), times.shape)
    has = np.stack([waited, waited, ran, ran], axis=1)
    times, d_run, d_wait = times[has], d_run[has], d_wait[has]
    order = np.lexsort((d_run + d_wait, times))  # by time, ends first; stable
    times, running, waiting = times[order], np.cumsum(d_run[order]), np.cumsum(d_wait[order])
    durations = times[1:] - times[:-1]
    kept = durations > 0
    durations, running, waiting = durations[kept], running[:-1][kept], waiting[:-1][kept]
    # while requests waited and something ran: nothing running at all is a server still starting
    # (a first request's imports), not a limit
    busy = (waiting >= 1) & (running >= 1)
    wait_d, wait_level = durations[busy], running[busy]
    waiting_s = float(np.cumsum(wait_d)[-1]) if wait_d.size else 0.0
    waiters = _waiters_beside_work(queued[waited], begin[waited], started[ran], done[ran])
    saturated = (waiting_s >= max(2 * service, SATURATED_MIN_S)
                 and waiters >= max(SATURATED_WAITERS, WAITER_SHARE * int(ran.sum())))
    return Parallelism(_held_peak(durations, running, hold), _weighted_median(wait_d, wait_level),
                       _reached(wait_d, wait_level), saturated, waiting_s, waiters, hold, int(ran.sum()))


def _waiters_beside_work(wait_from: np.ndarray, wait_to: np.ndarray, run_from: np.ndarray,
                         run_to: np.ndarray) -> int:
    """How many waits overlapped another request's run (a stall makes a few, a limit a share of all)."""
    order = np.lexsort((run_to, run_from))
    starts, latest_end = run_from[order], np.maximum.accumulate(run_to[order])
    i = np.searchsorted(starts, wait_to, side="left")  # runs that started before the wait ended ...
    before = latest_end[np.maximum(i - 1, 0)]
    return int(np.count_nonzero((i > 0) & (before > wait_from)))  # ... one of them after it began


def _held_peak(durations: np.ndarray, running: np.ndarray, hold: float) -> int:
    """The highest running level held without a break for `hold` seconds."""
    top = int(running.max()) if running.size else 0
    for k in range(top, 0, -1):
        at = running >= k
        total = np.cumsum(np.where(at, durations, 0.0))
        since = np.maximum.accumulate(np.where(at, 0.0, total))  # the total at the last break
        if np.any(total - since >= hold):
            return k
    return 0


def _reached(durations: np.ndarray, levels: np.ndarray) -> int:
    """The highest level running(t) was at or above for REACHED_SHARE of the time."""
    if not durations.size:
        return 0
    total = float(np.cumsum(durations)[-1])
    for k in range(int(levels.max()), 0, -1):
        if float(durations[levels >= k].sum()) >= REACHED_SHARE * total:
            return k
    return 0


def _weighted_median(durations: np.ndarray, levels: np.ndarray) -> int:
    """The level running(t) sits at for half the time or more (0 without samples)."""
    if not durations.size:
        return 0
    total = float(np.cumsum(durations)[-1])
    order = np.argsort(levels, kind="stable")
    seen = np.cumsum(durations[order])
    return int(levels[order][int(np.argmax(seen >= total / 2))])


class AppKnobError(ScenarioError):
    """The grid cannot apply to this app at all (found at its first launch): the sweep ends before load."""


class BatchKnobError(AppKnobError):
    """max_batch_size asked for on an event that is not batch=True: no setting can batch it."""


EVENT_KNOBS = ("concurrency_limit", "concurrency_id", "max_batch_size")


Evidence = Callable[[Mapping[str, Any], HookRecord], tuple[list[str], list[str]]]


def hook_problems(knobs: Mapping[str, Any], hook: HookRecord) -> tuple[list[str], list[str]]:
    """What the startup hook could not set (a knob the framework lacks, arguments it could not read)."""
    return list(hook.problems), []


def framework_verdict(framework: str, knobs: Mapping[str, Any], hook: HookRecord | None, unseen: str,
                      evidence: Sequence[Evidence]) -> KnobCheck:
    """A framework app's verdict from the hook's record: each `evidence` gives (contradictions,
    confirmations); `unseen`: why unverified when `framework` never started."""
    if not knobs:
        return KnobCheck("not_checked", ["no server knob at this point"])
    batch = json_int(knobs.get("max_batch_size")) or 1
    if hook is None or not hook.launched or hook.framework != framework:
        return KnobCheck("unverified", [unseen], max_batch_size=batch, hook=hook)
    wrong: list[str] = []
    right: list[str] = []
    for found in evidence:
        against, agree = found(knobs, hook)
        wrong, right = wrong + against, right + agree
    if wrong:
        return KnobCheck("not_applied", wrong, max_batch_size=batch, hook=hook)
    return KnobCheck("applied", right, max_batch_size=batch, hook=hook)


def handed_batches(who: str, hook: HookRecord, knob: str, limit: int | None, unqueued: str = ""
                   ) -> tuple[list[str], list[str]]:
    """(contradictions, observations) from the batch sizes `who` handed each route: none above `knob`'s
    `limit`; batches of one where more are allowed say `unqueued`."""
    wrong: list[str] = []
    seen: list[str] = []
    for route, sizes in sorted(hook.batch_sizes.items()):
        summary = batch_summary(who, route, sizes)
        if summary is None:
            continue
        top, said = summary
        if limit is not None and top > limit:
            wrong.append(f"{said}: above {knob} {limit}")
        elif unqueued and limit is not None and limit > 1 and top == 1:
            seen.append(f"{said}: {unqueued}")
        else:
            seen.append(said)
    return wrong, seen


def batch_summary(who: str, route: str, sizes: Mapping[int, int]) -> tuple[int, str] | None:
    """(the largest batch, "<who> handed <route> N batches of a to b (mean m)"); None when it handed none."""
    batches = sum(sizes.values())
    if not batches:
        return None
    mean = sum(size * n for size, n in sizes.items()) / batches
    said = f"{who} handed {route} {batches} batches of {min(sizes)} to {max(sizes)} (mean {mean:.1f})"
    return max(sizes), said


#: framework knobs in seconds: compared as numbers, not as whole counts
SECONDS_KNOBS = ("batch_timeout", "batch_wait_timeout_s")


def same_setting(name: str, effective: Any, wanted: Any) -> bool:
    """A framework's effective setting is the knob's value (seconds within a microsecond's rounding)."""
    if name in SECONDS_KNOBS:
        a, b = json_number(effective), json_number(wanted)
        return a is not None and b is not None and abs(a - b) <= 1e-9 + 1e-6 * abs(b)
    return json_int(effective) == json_int(wanted) and json_int(wanted) is not None


def kept_by_command(name: str, hook: HookRecord, who: str) -> str:
    """The evidence's note for a knob the launch command passes itself (left to the app), else ""."""
    if name in hook.observed:
        return f" (the command passes {{{name}}} itself, and it did not reach {who})"
    return ""


def batches_and_processes(who: str, knobs: Mapping[str, Any], hook: HookRecord, processes_knob: str,
                          process: str, batch_knob: str = "max_batch_size", unqueued: str = ""
                          ) -> tuple[list[str], list[str]]:
    """handed_batches, plus how many `process` processes ran batches (no more than `processes_knob`)."""
    wrong, seen = handed_batches(who, hook, batch_knob, json_int(knobs.get(batch_knob)), unqueued)
    most = json_int(knobs.get(processes_knob))
    if hook.batch_processes:
        plural = "es" if hook.batch_processes != 1 else ""
        said = f"{hook.batch_processes} {process} process{plural} ran batches"
        if most is not None and hook.batch_processes > most:
            wrong.append(f"{said}: more than {processes_knob}={most}")
        else:
            seen.append(said + (f" ({processes_knob} {most})" if most is not None else ""))
    return wrong, seen


def check_events(knobs: Mapping[str, Any], hook: HookRecord | None) -> None:
    """Raise AppKnobError: the point sets event knobs, but the app has no queued event the scenario drives."""
    if hook is None or not hook.launched or hook.chosen or not any(k in knobs for k in EVENT_KNOBS):
        return
    names = ", ".join(f"`{e.name}`" for e in hook.events if e.queued) or "none"
    raise AppKnobError(
        f"the scenario drives {', '.join(f'`{d}`' for d in hook.driven) or 'no event'}, but the app has no "
        f"queued event of that api_name or fn_index (its queued events: {names}); set the scenario's "
        "endpoint.api_name to one of them, or --knob-scope all"
    )




def check_batching(knobs: Mapping[str, Any], hook: HookRecord | None, grid_sizes: Sequence[Any] = ()) -> None:
    """Raise BatchKnobError when max_batch_size > 1 (at the first point, any of `grid_sizes` unless the app
    reads QBENCH_MAX_BATCH_SIZE) falls on a driven event that is not batch=True."""
    size = json_int(knobs.get("max_batch_size"))
    if hook is not None and "QBENCH_MAX_BATCH_SIZE" not in hook.app_reads:
        size = max([s for s in (size, *map(json_int, grid_sizes)) if s is not None], default=None)
    if hook is None or size is None or size <= 1:
        return
    plain = [e.name for e in hook.chosen if not e.effective.get("batch")]
    if hook.scope == "all" and len(plain) < len(hook.chosen):
        return  # --knob-scope all: the batch functions among them take it
    if plain:
        names = ", ".join(f"`{n}`" for n in plain)
        raise BatchKnobError(
            f"max_batch_size={size}: {names} is not a batch function, so there is nothing to batch. "
            "Batching needs a function that takes lists (one list per input) and returns lists, declared "
            f"in the app as btn.click(fn, inputs, outputs, batch=True, max_batch_size={size}); declare it "
            "so, or drop the max_batch_size axis"
        )


@dataclass
class KnobCheck:
    """The verdict on one point's knobs and the evidence for it (saved in point.json)."""

    verdict: Verdict
    evidence: list[str] = field(default_factory=list)
    expected_limit: int | None = None  # the concurrency limit the knobs ask for on the driven event
    max_batch_size: int = 1
    parallelism: Parallelism | None = None
    hook: HookRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hook"] = self.hook.to_dict() if self.hook else None
        return out

    @property
    def summary(self) -> str:
        return "; ".join(self.evidence)



def expected_limit(knobs: Mapping[str, Any]) -> int | None:
    """The concurrency limit a point's knobs ask for (None: no such knob, or unlimited)."""
    for name in ("concurrency_limit", "concurrency_count", "default_concurrency_limit"):
        if name in knobs:
            return json_int(knobs[name])
    return None


def _threads(server: Mapping[str, Any], hook: HookRecord | None) -> int | None:
    """max_threads of the point's server: the knob, else what the hook saw launch() get, else None."""
    if "max_threads" in server:
        return json_int(server["max_threads"])
    if hook is not None and hook.launched:
        launch = {**(hook.launch.get("app") or {}), **(hook.launch.get("set") or {})}
        return json_int(launch.get("max_threads", 40))
    return None


def hook_evidence(knobs: Mapping[str, Any], hook: HookRecord | None, launched_by_hook: bool) -> list[str]:
    """What the hook's record says against the knobs (empty: it agrees, or there is no hook)."""
    if not launched_by_hook:
        return []
    if hook is None or not hook.launched:
        return ["the hook saw no Blocks.launch() in the app's process (an app served by uvicorn or "
                "mount_gradio_app, or started by another interpreter), so it set nothing"]
    problems = list(hook.problems)
    chosen = hook.chosen
    if not chosen:
        return [*problems, f"no queued event of the app matches the scenario's ({hook.scope})"]
    limit = expected_limit(knobs)
    for event in chosen:
        effective = event.effective.get("concurrency_limit")
        if limit is not None and json_int(effective) != limit:
            own = ", ".join(f"{k}={v}" for k, v in hook.app_settings(event).items())
            shared = event.effective.get("shared_with")
            why = f"; it shares a concurrency_id with {shared}, whose lowest limit holds" if shared else ""
            problems.append(f"`{event.name}` runs with concurrency limit {effective}, not {limit} "
                            f"(the app's own settings: {own}{why})")
    return problems


def launch_evidence(knobs: Mapping[str, Any], hook: HookRecord | None) -> tuple[list[str], list[str]]:
    """(contradictions, confirmations) for num_workers and ssr_mode, from what the hook saw Gradio start."""
    if hook is None or not hook.launched:
        return [], []
    effective = hook.launch.get("effective") or {}
    wrong: list[str] = []
    right: list[str] = []
    if "ssr_mode" in knobs:
        wanted = flag(knobs["ssr_mode"])
        started = bool(effective.get("ssr"))
        if wanted and not started:
            wrong.append("ssr_mode true, but Gradio served without its Node proxy (is Node on PATH or in "
                         "GRADIO_NODE_PATH? the app's log says why)")
        elif started and not wanted:
            wrong.append("ssr_mode false, but Gradio's Node proxy started")
        else:
            right.append(f"SSR on: Gradio's Node proxy serves port {effective.get('ssr_proxy_port')}"
                         if started else "SSR off")
    if "num_workers" in knobs:
        wanted_n = json_int(knobs["num_workers"]) or 0
        started_n = int(effective.get("static_workers") or 0)
        healthy = int(effective.get("static_workers_healthy") or 0)
        if started_n != wanted_n or healthy != started_n:
            why = " (Gradio starts none for an app behind a login)" if wanted_n and not started_n else ""
            wrong.append(f"num_workers {wanted_n}, but Gradio started {started_n} static-file workers "
                         f"({healthy} answered /health){why}")
        elif not wanted_n:
            right.append("num_workers 0: no static-file workers")
        else:
            behind = (" behind SSR's Node proxy" if effective.get("ssr")
                      else ": without SSR's Node proxy nothing is routed to them")
            right.append(f"{started_n} static-file workers answered /health{behind}")
    return wrong, right


def records_evidence(limit: int | None, batch: int, par: Parallelism) -> tuple[list[str], bool]:
    """(contradictions, confirmed) from running(t) vs limit x batch; confirmed: saturated at the limit."""
    if limit is None or par.started == 0:
        return [], False
    slots = limit * max(batch, 1)
    times = f" x batch {batch}" if batch > 1 else ""
    if par.saturated and par.typical_while_waiting > slots:
        return [f"while requests waited, {par.typical_while_waiting} ran at once (the median over "
                f"{par.waiting_s:.1f} s), above the limit {limit}{times}"], False
    if not par.saturated and par.peak_running > slots:
        return [f"{par.peak_running} requests ran at once for {par.hold_s * 1000:.0f} ms or more, above "
                f"the limit {limit}{times}"], False
    if par.saturated and batch <= 1 and par.reached_while_waiting < limit:
        return [f"requests waited in the queue while at most {par.reached_while_waiting} ran at once "
                f"(over {par.waiting_s:.1f} s): the server's limit is below {limit}"], False
    return [], par.saturated and batch <= 1 and par.reached_while_waiting >= limit


def check_point(
    knobs: Mapping[str, Any],
    records: Columns | Sequence[RequestRecord],
    *,
    hook: HookRecord | None = None,
    launched_by_hook: bool = False,
    effective: Mapping[str, Any] | None = None,
    lag_s: float = 0.0,
) -> KnobCheck:
    """The verdict for one point. `effective`: the server's settings where qbench set them itself; `hook`: the
    hook's record (launch mode); `lag_s`: the generator's p99 loop lag."""
    if not knobs:
        return KnobCheck("not_checked", ["no server knob at this point"])
    server = {**(effective or {}), **knobs}
    limit = expected_limit(server)
    batch = json_int(server.get("max_batch_size")) or 1
    if hook is not None and hook.chosen and "max_batch_size" not in knobs:
        batch = max((json_int(e.effective.get("max_batch_size")) or 1) if e.effective.get("batch") else 1
                    for e in hook.chosen)
    threads = _threads(server, hook)
    if limit is not None and threads is not None and threads < limit:
        limit = threads  # Gradio's queue runs at most max_threads jobs at once, whatever the limits
    par = observed_parallelism(records, lag_s)
    evidence = hook_evidence(knobs, hook, launched_by_hook)
    launch_wrong, launch_right = launch_evidence(knobs, hook) if launched_by_hook else ([], [])
    evidence += launch_wrong
    contradictions, confirmed = records_evidence(limit, batch, par)
    missed = launched_by_hook and (hook is None or not hook.launched)
    if missed and confirmed and not contradictions:  # an app that reads QBENCH_* and serves itself
        return KnobCheck("applied", [f"the hook did not reach the app, but {par.reached_while_waiting} "
                                     f"ran at once while requests waited: the app set limit {limit} itself"],
                         limit, batch, par, hook)
    evidence += contradictions
    check = KnobCheck("applied", evidence, limit, batch, par, hook)
    if evidence:
        check.verdict = "not_applied"
    elif limit is None:
        check.verdict, check.evidence = ("applied", launch_right) if launch_right else ("not_checked", [])
    elif not confirmed and not (launched_by_hook and hook is not None) and effective is None:
        check.verdict = "unverified"
        check.evidence = [f"the load never kept {limit} requests waiting and running, and no hook "
                          "confirmed the setting"]
    if check.verdict == "applied" and par.started and limit is not None:
        slots = f"limit {limit}" + (f" x batch {batch}" if batch > 1 else "")
        typical = (f"typically {par.typical_while_waiting}, "
                   if par.typical_while_waiting < par.reached_while_waiting else "")
        check.evidence = [f"{par.reached_while_waiting} ran at once while requests waited ({typical}{slots})"
                          if confirmed else f"peak {par.peak_running} running at once ({slots})"]
    if check.verdict in ("applied", "unverified") and limit is not None:
        check.evidence += launch_right
    return check


def expected_settings(scenario: Scenario) -> dict[str, Any]:
    """The scenario's `expect:` settings (empty when it states none)."""
    return scenario.expect.model_dump(exclude_none=True) if scenario.expect else {}


def expectation_warnings(scenario: Scenario, records: Columns | Sequence[RequestRecord]) -> list[str]:
    """`qbench run`: why the server disagrees with the scenario's `expect:` (empty: agrees, or none)."""
    expect = expected_settings(scenario)
    if not expect or scenario.protocol != "gradio":
        return []
    check = check_point(expect, records)
    if check.verdict != "not_applied":
        return []
    stated = ", ".join(f"{k}={v}" for k, v in expect.items())
    return [f"the scenario expects {stated}, but {e}" for e in check.evidence]
