"""What a run's failures say about the app: records -> sentences a user can act on (the app raised, events
still running at the end, cut downloads, sessions split by a balancer or lost by the app). `explain` gives
them, `input_lines` the first input sets as `--show-inputs` prints them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from qbench.run.records.columns import Columns, Held
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import Scenario

SESSIONS_KEPT = 2000  # sessions whose message queues Gradio keeps (an LRU): more may evict one
SPLIT_SESSIONS = "the join and its stream reached different servers"
SPLIT_UPLOADS = "uploads reached another replica than their join"
#: what a replica answers for a file it did not receive: the reference server's, Gradio's (show_error)
MISSED_UPLOAD = ("was not uploaded to this server", "it was not uploaded by a user")
MOST = 0.5  # the share of an endpoint's requests that must have raised for "the app raised"
SHOWN_CHARS = 160  # of one input set, in a sentence
HIDDEN = ("Error", "None", "", "the function raised (no detail shown)")  # Gradio without show_error


def explain(records: Columns | Sequence[RequestRecord], scenario: Scenario | None = None,
            server: dict[str, Any] | None = None) -> list[str]:
    """Sentences per endpoint on the app's errors and unfinished events (`server`: run.json's `server`)."""
    notes: list[str] = []
    sent: Columns = Held(_sent(Held(Columns.of(records))))  # each endpoint's error kinds: the sent's, once
    split = split_sessions(sent, server)
    lost = _lost_session(sent)
    if split:
        notes.append(split)
        sent = sent.where(~(lost | _missed_upload(sent)))
    elif lost.any():
        notes += _lost_sessions(sent, lost, front(server))  # one server's: the app's own errors
        sent = sent.where(~lost)
    config = (server or {}).get("config")
    codes, endpoints = sent.labels("endpoint")
    for endpoint in sorted(endpoints):
        mine = sent.where(codes == endpoints.index(endpoint))
        notes += _raised(endpoint, mine, scenario, _state_inputs(config, endpoint))
        notes += _still_running(endpoint, mine, scenario)
        notes += _cut_downloads(endpoint, mine)
    return notes


def _sent(cols: Columns, warmup: bool = False) -> Columns:
    """The measured requests that were sent (`warmup`: and the warm-up's)."""
    sent = ~np.isnan(cols.floats("sent_at_s"))
    return cols.where(sent if warmup else cols.measured() & sent)


def _kind(cols: Columns, kind: str) -> np.ndarray:
    codes, kinds = cols.labels("error_kind")
    return codes == kinds.index(kind) if kind in kinds else np.zeros(len(cols), dtype=bool)


def _message_is(cols: Columns, rows: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """Rows among `rows` whose error message (None as '') passes `test`, tried once per distinct message."""
    out = np.zeros(len(cols), dtype=bool)
    if rows.any():
        codes, messages = cols.where(rows).labels("error_message")
        passed = np.array([test(m) for m in messages] + [test("")], dtype=bool)  # code -1 (None): the last
        out[rows] = passed[codes]
    return out


def _lost_session(cols: Columns) -> np.ndarray:
    return _message_is(cols, _kind(cols, "server_error"), lambda m: "session not found" in m)


def _missed_upload(cols: Columns) -> np.ndarray:
    return _message_is(cols, _kind(cols, "server_error"), lambda m: any(s in m for s in MISSED_UPLOAD))


def front(server: dict[str, Any] | None) -> dict[str, Any] | None:
    """The proxy or balancer discovery saw in front of the app; None when none showed."""
    found = (server or {}).get("front")
    return found if isinstance(found, dict) and found.get("url") else None


def balances(found: dict[str, Any] | None) -> bool:
    """Whether the front showed two or more servers behind it: the evidence needed to blame a balancer."""
    return found is not None and len(found.get("upstreams") or []) > 1


def describe_front(found: dict[str, Any]) -> str:
    """'the balancer at URL (Server: nginx/1.22.1, qbench's nginx, 2 servers behind it: A, B)'."""
    upstreams = [str(u) for u in found.get("upstreams") or []]
    said = [f"Server: {found['server']}" if found.get("server") else "",
            f"Via: {found['via']}" if found.get("via") else "",
            "qbench's nginx" if found.get("qbench") else "",
            f"{len(upstreams)} servers behind it: {', '.join(upstreams)}" if len(upstreams) > 1 else ""]
    shown = ", ".join(s for s in said if s)
    kind = "balancer" if balances(found) else "proxy"
    return f"the {kind} at {found['url']}" + (f" ({shown})" if shown else "")


def split_sessions(records: Columns | Sequence[RequestRecord], server: dict[str, Any] | None = None,
                   short: bool = False) -> str:
    """`''` unless a balancer in front (`balances`) split a session's requests across replicas (streams that
    found no session though too few were open to evict one, or uploads the event's replica lacked); else the
    sentence naming it (`short`: the cause alone, for a capacity probe's verdict)."""
    found = front(server)
    if not balances(found):
        return ""
    assert found is not None
    # the warm-up's too: a session lost there, with few requests open, is the balancer's as much (a busy
    # box's closed-loop estimate lost 17 of its 61 in the warm-up and none of the 28 measured after it)
    sent = _sent(Columns.of(records), warmup=True)
    lost = int(_lost_session(sent).sum())
    most = most_open(sent) if lost else 0
    lost = lost if most < SESSIONS_KEPT else 0
    missed = int(_missed_upload(sent).sum())
    if not lost and not missed:
        return ""
    n = len(sent)
    where = describe_front(found)
    if short:
        causes = ([f"{lost}/{n} streams found no session: {SPLIT_SESSIONS}"] if lost else []) + (
            [f"{missed}/{n} requests' {SPLIT_UPLOADS}"] if missed else [])
        return f"{'; '.join(causes)}: {where} keeps no session affinity"
    causes = ([f"{lost}/{n} requests' streams (/queue/data) found no session ('session not "
               f"found') while at most {most} requests were open, far below the {SESSIONS_KEPT} sessions "
               f"Gradio keeps: {SPLIT_SESSIONS}"] if lost else []) + (
        [f"{missed}/{n} requests' {SPLIT_UPLOADS} ('file ... was not uploaded to this "
         "server': the replica that ran the event never received the file)"] if missed else [])
    return (f"{'; '.join(causes)}. {where[0].upper()}{where[1:]} does not keep a session on one replica "
            "(no session affinity): route every request of a session to one replica by its session_hash, "
            "which qbench sends in the join's JSON body (/queue/join), the query of the stream "
            "(/queue/data?session_hash=) and of the uploads (/upload?session_hash=), and the heartbeat's "
            "path (/heartbeat/{session_hash}); nginx: `hash $session consistent` over a map of all of "
            "them, as `qbench serve --replicas` and `qbench balance --affinity session` configure it (see "
            "docs/capacity-plan.md#session-affinity), or a sticky cookie, or give each session its own "
            "replica")


def _lost_sessions(records: Columns, lost: np.ndarray, found: dict[str, Any] | None = None) -> list[str]:
    """Streams that found no session with no balancer in front: the app's own errors, and where."""
    if not lost.any():
        return []
    where = lost_where(found)
    return [f"{int(lost.sum())}/{len(records)} requests' streams (/queue/data) found no session ('session "
            f"not found') {where}: the app lost sessions it had accepted (it restarted, or dropped them); "
            "they count as the app's errors"]


def lost_where(found: dict[str, Any] | None) -> str:
    """Where sessions were lost with no balancer to blame, and what would make it the proxy's."""
    if found is None:
        return "on a server with no balancer in front of it"
    upstreams = found.get("upstreams") or []
    seen = f"only {upstreams[0]} behind it" if upstreams else "nothing that tells the servers behind it apart"
    return (f"behind {describe_front(found)}, which showed {seen} (if it spreads requests over several "
            "replicas, it keeps no session affinity: see docs/capacity-plan.md#session-affinity)")


def most_open(records: Columns | Sequence[RequestRecord]) -> int:
    """The most requests open (sent, not yet done) at once (at one instant, ends before sends)."""
    cols = Columns.of(records)
    completed = cols.floats("completed_at_s")
    times = np.concatenate([np.nan_to_num(cols.floats("sent_at_s"), nan=0.0),
                            np.where(np.isnan(completed), np.inf, completed)])
    steps = np.concatenate([np.ones(len(cols), dtype=np.int64), np.full(len(cols), -1, dtype=np.int64)])
    now = np.cumsum(steps[np.lexsort((steps, times))])
    return max(int(now.max()), 0) if now.size else 0


def _cut_downloads(endpoint: str, records: Columns) -> list[str]:
    """Output files whose download ended short of Content-Length (cached file rewritten under the reader)."""
    cut = int(_message_is(records, _kind(records, "stream_broken"),
                          lambda m: "download" in m and "content length" in m.lower()).sum())
    if not cut:
        return []
    return [f"/{endpoint}: {cut} output file download(s) ended short of their length: Gradio writes a "
            "cached output file again when another request makes the same one (the same inputs at the same "
            "time) while it is being read; more distinct inputs (payload.variants) make it rarer"]


def _state_inputs(config: Any, endpoint: str) -> int:
    """How many of the endpoint's inputs are gr.State (the session's, sent empty by a new session)."""
    if not isinstance(config, dict):
        return 0
    kinds = {c.get("id"): c.get("type") for c in config.get("components", []) if isinstance(c, dict)}
    for dep in config.get("dependencies", []):
        if isinstance(dep, dict) and dep.get("api_name") == endpoint:
            return sum(kinds.get(cid) == "state" for cid in dep.get("inputs", []))
    return 0


def _raised(endpoint: str, records: Columns, scenario: Scenario | None, states: int = 0) -> list[str]:
    raised = _kind(records, "server_error")
    count = int(raised.sum())
    if not count or count < MOST * len(records):
        return []
    mine = records.where(raised)
    message = _most_common_message(mine)
    head = f"/{endpoint}: the app raised on {count}/{len(records)} requests"
    first = _first_input(scenario, endpoint, int(mine.ints("request_id")[0]))
    shown = f"; the first input sent was {first}" if first else ""
    state = (f". It reads {states} gr.State input(s), which a new session sends empty: it may need an "
             "earlier event of the same session first (a journey, see docs/traffic-mixes-and-journeys.md)"
             if states else "")
    if message in HIDDEN:
        return [f"{head}; Gradio hides the reason unless the app sets show_error=True (it said only "
                f"{message or 'nothing'!r}){shown}{state}. Run once with --show-inputs, or launch the app "
                "with show_error=True to record its message"]
    return [f"{head}: {message[:300]}{shown}{state}"]


def _most_common_message(records: Columns) -> str:
    """The most common error message, stripped (None as ''); of equally common ones, the first seen."""
    codes, messages = records.labels("error_message")
    distinct, first, counts = np.unique(codes, return_index=True, return_counts=True)
    seen: dict[str, list[int]] = {}  # stripped message -> [count, first row]
    for code, at, count in sorted(zip(distinct.tolist(), first.tolist(), counts.tolist(), strict=True),
                                  key=lambda c: c[1]):
        entry = seen.setdefault(("" if code < 0 else messages[code]).strip(), [0, at])
        entry[0] += count
    return max(seen, key=lambda m: seen[m][0])  # the first of the most common, in order of first sight


def _still_running(endpoint: str, records: Columns, scenario: Scenario | None) -> list[str]:
    closed = records.where(_kind(records, "deadline") & ~np.isnan(records.floats("completed_at_s")))
    if not len(closed):
        return []
    ages = np.nan_to_num(closed.floats("completed_at_s")) - np.nan_to_num(closed.floats("sent_at_s"))
    streaming = int((closed.ints("outputs") > 0).sum())
    timeout = scenario.load.timeout if scenario is not None else None
    within = f", within the {timeout:g} s timeout" if timeout is not None else ""
    outputs = f"; {streaming} had streamed outputs" if streaming else ""
    return [f"/{endpoint}: {len(closed)} event(s) still running at the end of the run, "
            f"{_span(float(ages.min()), float(ages.max()))} old{within}{outputs}: they take longer than "
            "the run, they did not time out (a longer load.duration or load.drain lets them finish)"]


def _span(first: float, last: float) -> str:
    same = f"{first:.1f}" == f"{last:.1f}"
    return f"{first:.1f} s" if same else f"{first:.1f} to {last:.1f} s"


def _first_input(scenario: Scenario | None, endpoint: str, request_id: int) -> str:
    """The inputs request `request_id` sent to `endpoint`, in short ("" when it cannot be had)."""
    payload = _payload(scenario, endpoint)
    if payload is None:
        return ""
    from qbench.errors import QbenchError
    from qbench.run.scenario.payloads import PayloadGenerator

    try:
        values = PayloadGenerator(payload).inputs(request_id)
    except (QbenchError, OSError, ValueError):
        return ""
    return short(values)


def _payload(scenario: Scenario | None, endpoint: str) -> Any:
    if scenario is None or scenario.load.trace is not None:
        return None
    from qbench.run.load.mix import branches

    found = [b.scenario.payload for b in branches(scenario) if b.label == endpoint]
    return found[0] if len(found) == 1 else None


def input_lines(scenario: Scenario, count: int = 3) -> list[str]:
    """The first `count` input sets of each endpoint (`qbench run --show-inputs`)."""
    from qbench.run.load.mix import branches
    from qbench.run.scenario.payloads import PayloadGenerator

    lines = []
    for branch in branches(scenario):
        generator = PayloadGenerator(branch.scenario.payload)
        for request_id in range(min(count, branch.scenario.payload.variants)):
            lines.append(f"/{branch.label} request {request_id}: {short(generator.inputs(request_id), 400)}")
    return lines


def short(values: Any, limit: int = SHOWN_CHARS) -> str:
    """A JSON-ish line for inputs: a file as `<file NAME, N KiB>`, long text cut."""
    text = orjson.dumps(_plain(values), default=str).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(value: Any) -> Any:
    from qbench.run.scenario.payloads import FileValue

    if isinstance(value, FileValue):
        return f"<file {value.name}, {len(value.data) / 1024:.1f} KiB>"
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
