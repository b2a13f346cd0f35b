"""What a run's failures say about the app: records -> sentences a user can act on.

    the app raised   most sent requests of an endpoint ended in `server_error` (the function raised,
                     or Gradio could not read the inputs into it). Gradio sends only "Error" unless the
                     app sets `show_error=True`, so the sentence says that, shows the first input sent
                     (regenerated from the payload: the same seed gives the same request) and the
                     next step (`qbench run --show-inputs`, or show_error); an endpoint that reads
                     gr.State gets a sentence saying that a new session sends it empty
    still running    requests the end of the run closed (`deadline`): the event was still running,
                     its age when the run ended says how much longer it takes than the run; not a
                     timeout, which fires only after `load.timeout`
    cut download     an output file's download ended short of its length: Gradio rewrote the cached
                     file under the reader (two requests made the same output at once)
    split sessions   behind a proxy or balancer (discovery's `front`: its Server header, qbench's nginx's
                     X-Qbench-Upstream), streams that found no session ("session not found") while far
                     fewer sessions were open than Gradio keeps (SESSIONS_KEPT): the join and its stream
                     reached different replicas; and uploads that the replica running the event did not
                     receive ("file ... was not uploaded to this server"): the balancer does not keep a
                     session on one replica (`split_sessions`, naming it); these requests are not
                     counted as the app raising
    lost sessions    the same "session not found" with no balancer in front (one server): the app lost
                     sessions it had accepted; they stay app errors (the error-rate SLO counts them)

`explain(records, scenario)` returns the sentences; `input_lines(scenario, count)` the first input sets
as `--show-inputs` prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson

from qbench.run.diagnose.app_errors import balances, describe_front, front, lost_where
from qbench.run.records import RequestRecord
from qbench.run.scenario.scenario import Scenario

SESSIONS_KEPT = 2000  # sessions whose message queues Gradio keeps (an LRU): more may evict one
SPLIT_SESSIONS = "the join and its stream reached different servers"
SPLIT_UPLOADS = "uploads reached another replica than their join"
#: what a replica answers for a file it did not receive: the reference server's, Gradio's (show_error)
MISSED_UPLOAD = ("was not uploaded to this server", "it was not uploaded by a user")
MOST = 0.5  # the share of an endpoint's requests that must have raised for "the app raised"
SHOWN_CHARS = 160  # of one input set, in a sentence
HIDDEN = ("Error", "None", "", "the function raised (no detail shown)")  # Gradio without show_error


def explain(records: Sequence[RequestRecord], scenario: Scenario | None = None,
            server: dict[str, Any] | None = None) -> list[str]:
    """Sentences about the app's own errors and the events still running at the end, per endpoint.
    `server`: what discovery read (run.json's `server`: a Gradio app's /config says which inputs are
    the session's State)."""
    notes: list[str] = []
    sent = [r for r in records if r.sent_at_s is not None and not r.warmup]
    split = split_sessions(sent, server)
    if split:
        notes.append(split)
        sent = [r for r in sent if not (_lost_session(r) or _missed_upload(r))]
    elif any(_lost_session(r) for r in sent):
        notes += _lost_sessions(sent, front(server))  # one server's: the app's errors, said once
        sent = [r for r in sent if not _lost_session(r)]
    config = (server or {}).get("config")
    for endpoint in sorted({r.endpoint for r in sent}):
        mine = [r for r in sent if r.endpoint == endpoint]
        notes += _raised(endpoint, mine, scenario, _state_inputs(config, endpoint))
        notes += _still_running(endpoint, mine, scenario)
        notes += _cut_downloads(endpoint, mine)
    return notes


def _lost_session(record: RequestRecord) -> bool:
    return record.error_kind == "server_error" and "session not found" in (record.error_message or "")


def _missed_upload(record: RequestRecord) -> bool:
    message = record.error_message or ""
    return record.error_kind == "server_error" and any(m in message for m in MISSED_UPLOAD)


# Changed on purpose (issue 54): who is a balancer, and how it is named, are today's
# (qbench.run.diagnose.app_errors.front, balances, describe_front: rules on discovery's dict, not on records).


def split_sessions(records: Sequence[RequestRecord], server: dict[str, Any] | None = None,
                   short: bool = False) -> str:
    """'' unless a balancer stands in front of the app (`server`: run.json's, its `front`) and a
    session's requests reached different replicas: streams that found no session while fewer than
    SESSIONS_KEPT requests were open at once (so no session can have been evicted: SPLIT_SESSIONS), or
    uploads the replica running the event did not receive (SPLIT_UPLOADS). Then the sentence naming
    the balancer and what to configure (`short`: the cause alone, for a capacity probe's verdict).
    With no balancer in front, a lost session is the app's own error (`_lost_sessions`)."""
    found = front(server)
    if not balances(found):
        return ""
    assert found is not None
    sent = [r for r in records if r.sent_at_s is not None]  # the warm-up's too (as the columns' code)
    lost = [r for r in sent if _lost_session(r)]
    most = most_open(sent) if lost else 0
    lost = lost if most < SESSIONS_KEPT else []
    missed = [r for r in sent if _missed_upload(r)]
    if not lost and not missed:
        return ""
    where = describe_front(found)
    if short:
        causes = ([f"{len(lost)}/{len(sent)} streams found no session: {SPLIT_SESSIONS}"] if lost else []) + (
            [f"{len(missed)}/{len(sent)} requests' {SPLIT_UPLOADS}"] if missed else [])
        return f"{'; '.join(causes)}: {where} keeps no session affinity"
    causes = ([f"{len(lost)}/{len(sent)} requests' streams (/queue/data) found no session ('session not "
               f"found') while at most {most} requests were open, far below the {SESSIONS_KEPT} sessions "
               f"Gradio keeps: {SPLIT_SESSIONS}"] if lost else []) + (
        [f"{len(missed)}/{len(sent)} requests' {SPLIT_UPLOADS} ('file ... was not uploaded to this "
         "server': the replica that ran the event never received the file)"] if missed else [])
    return (f"{'; '.join(causes)}. {where[0].upper()}{where[1:]} does not keep a session on one replica "
            "(no session affinity): route every request of a session to one replica by its session_hash, "
            "which qbench sends in the join's JSON body (/queue/join), the query of the stream "
            "(/queue/data?session_hash=) and of the uploads (/upload?session_hash=), and the heartbeat's "
            "path (/heartbeat/{session_hash}); nginx: `hash $session consistent` over a map of all of "
            "them, as `qbench serve --replicas` and `qbench balance --affinity session` configure it (see "
            "docs/capacity-plan.md#session-affinity), or a sticky cookie, or give each session its own "
            "replica")


def _lost_sessions(records: Sequence[RequestRecord], found: dict[str, Any] | None = None) -> list[str]:
    """Streams that found no session on a server with no balancer in front: the app's own errors (behind
    a proxy that showed one server, said so: changed on purpose, issue 54)."""
    lost = [r for r in records if _lost_session(r)]
    if not lost:
        return []
    where = lost_where(found)  # today's sentence part (a rule on discovery's dict, not on records)
    return [f"{len(lost)}/{len(records)} requests' streams (/queue/data) found no session ('session not "
            f"found') {where}: the app lost sessions it had accepted (it restarted, or dropped them); they "
            "count as the app's errors"]


def most_open(records: Sequence[RequestRecord]) -> int:
    """The most requests open (sent, not yet done) at once."""
    edges = sorted([(r.sent_at_s or 0.0, 1) for r in records]
                   + [(r.completed_at_s if r.completed_at_s is not None else float("inf"), -1)
                      for r in records], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _cut_downloads(endpoint: str, records: list[RequestRecord]) -> list[str]:
    """Output files whose download ended short of its Content-Length: Gradio writes a cached output
    file again when another request makes the same one (the same inputs at once), under the reader."""
    cut = [r for r in records if r.error_kind == "stream_broken" and "download" in (r.error_message or "")
           and "content length" in (r.error_message or "").lower()]
    if not cut:
        return []
    return [f"/{endpoint}: {len(cut)} output file download(s) ended short of their length: Gradio writes a "
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


def _raised(endpoint: str, records: list[RequestRecord], scenario: Scenario | None,
            states: int = 0) -> list[str]:
    raised = [r for r in records if r.error_kind == "server_error"]
    if not raised or len(raised) < MOST * len(records):
        return []
    messages = Counter((r.error_message or "").strip() for r in raised)
    message, _ = messages.most_common(1)[0]
    head = f"/{endpoint}: the app raised on {len(raised)}/{len(records)} requests"
    first = _first_input(scenario, endpoint, raised[0].request_id)
    shown = f"; the first input sent was {first}" if first else ""
    state = (f". It reads {states} gr.State input(s), which a new session sends empty: it may need an "
             "earlier event of the same session first (a journey, see docs/traffic-mixes-and-journeys.md)"
             if states else "")
    if message in HIDDEN:
        return [f"{head}; Gradio hides the reason unless the app sets show_error=True (it said only "
                f"{message or 'nothing'!r}){shown}{state}. Run once with --show-inputs, or launch the app "
                "with show_error=True to record its message"]
    return [f"{head}: {message[:300]}{shown}{state}"]


def _still_running(endpoint: str, records: list[RequestRecord], scenario: Scenario | None) -> list[str]:
    closed = [r for r in records if r.error_kind == "deadline" and r.completed_at_s is not None]
    if not closed:
        return []
    ages = sorted((r.completed_at_s or 0.0) - (r.sent_at_s or 0.0) for r in closed)
    streaming = sum(r.outputs > 0 for r in closed)
    timeout = scenario.load.timeout if scenario is not None else None
    within = f", within the {timeout:g} s timeout" if timeout is not None else ""
    outputs = f"; {streaming} had streamed outputs" if streaming else ""
    return [f"/{endpoint}: {len(closed)} event(s) still running at the end of the run, "
            f"{_span(ages)} old{within}{outputs}: they take longer than the run, they did not time out "
            "(a longer load.duration or load.drain lets them finish)"]


def _span(ages: list[float]) -> str:
    same = f"{ages[0]:.1f}" == f"{ages[-1]:.1f}"
    return f"{ages[0]:.1f} s" if same else f"{ages[0]:.1f} to {ages[-1]:.1f} s"


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
