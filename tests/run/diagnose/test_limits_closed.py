"""Closed loops: the offered load follows the server, so saturation is judged against the protocol's round
trip (never a percentile of the loaded wait) and "it kept up" is no evidence."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from qbench.run.diagnose.limits import closed_loop_users, diagnose, host_cpus
from qbench.run.diagnose.phases import KINDS as PHASE_KINDS
from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import summarize
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]


def closed_loop(users: int = 8, slots: int = 2, service_s: float = 0.1, rtt_s: float = 0.003,
                duration_s: float = 6.0, warmup_s: float = 1.0, seed: int = 0) -> list[RequestRecord]:
    """`users` closed-loop users (no think time) on a FIFO queue of `slots`: each request joins after the
    round trip `rtt_s`, starts when a slot is free (its start message 0.5 ms later) and runs about
    `service_s`."""
    rng = np.random.default_rng(seed)
    free = [0.0] * slots
    next_send = [0.0001 * u for u in range(users)]
    records: list[RequestRecord] = []
    while min(next_send) < duration_s:
        user = int(np.argmin(next_send))
        sent = next_send[user]
        joined = sent + rtt_s
        slot = int(np.argmin(free))
        started = max(joined, free[slot]) + 0.0005
        done = started + service_s * float(rng.uniform(0.95, 1.05))
        free[slot] = done - 0.0005
        rank = sum(1 for r in records if (r.started_at_s or 0.0) > joined)
        records.append(RequestRecord(
            request_id=len(records), user_id=user, session_id=f"s{len(records)}", endpoint="predict",
            warmup=sent < warmup_s, intended_at_s=sent, sent_at_s=sent, joined_at_s=joined, rank=rank,
            started_at_s=started, completed_at_s=done, outcome="ok", http_status=200))
        next_send[user] = done + 0.0002
    return records


def test_eight_users_on_a_limit_of_two_are_at_the_queues_limit() -> None:
    """The blind spot as a new user met it: a Gradio 6.31 app, concurrency_limit=2, 100 ms, `qbench
    init`'s closed loop of 8 users: 19 req/s, every request waits ~300 ms for ~100 ms of service. It once
    read "headroom: the server kept up ... of which 331 ms every request pays" (the wait's 10th
    percentile, which under this load is the queue itself)."""
    records = closed_loop(users=8, slots=2)
    assert closed_loop_users(records) == 8
    (finding,) = diagnose(records, summarize(records, None))
    assert finding.kind == "queue_limit", finding
    assert finding.message.startswith("at its limit for 8 users (they waited ")
    assert "the queue ran about 2 request(s) at a time while the rest waited" in finding.message
    assert "caps throughput near 19.9 req/s (the 8 users got 18.7 req/s)" in finding.message
    assert "in the server's queue" in finding.message  # the server's own rank: 5 ahead of each


def test_users_that_fill_the_slots_twice_are_at_the_limit_and_fewer_are_not() -> None:
    """8 users on 4 slots wait about one service time each: at the limit (the old rule wanted a wait
    longer than the service). 8 users on 8 slots never wait: not at its limit for 8 users."""
    full, room = closed_loop(slots=4), closed_loop(slots=8)
    assert [f.kind for f in diagnose(full, summarize(full, None))] == ["queue_limit"]
    (finding,) = diagnose(room, summarize(room, None))
    assert finding.kind == "headroom" and finding.message.startswith("not at its limit for 8 users")
    assert "kept up" not in finding.message and "add users to find its limit" in finding.message
    assert "the protocol's round trip 3.5 ms (upload, join and the start message)" in finding.message


def test_an_open_loop_is_not_taken_for_a_closed_one() -> None:
    records = closed_loop()
    shifted = [RequestRecord(**{**_fields(r), "intended_at_s": r.intended_at_s - 0.001}) for r in records]
    assert closed_loop_users(shifted) is None  # sent late against a plan: an open loop's lag
    overlapping = [RequestRecord(**{**_fields(r), "user_id": 0}) for r in records]
    assert closed_loop_users(overlapping) is None  # one "user" with requests in flight together
    assert closed_loop_users(records[:1]) is None


def _fields(r: RequestRecord) -> dict[str, object]:
    return {name: getattr(r, name) for name in r.__dataclass_fields__}


def test_the_servers_cores_are_known_only_when_it_ran_on_qbenchs_host() -> None:
    host = {"hostname": "vm", "cpus": 16}
    assert host_cpus(host, "http://127.0.0.1:7860") == 16
    assert host_cpus(host, "http://localhost:7860/") == 16
    assert host_cpus(host, "http://vm:7860") == 16
    assert host_cpus(host, "https://example.org") is None
    assert host_cpus({}, "http://127.0.0.1:7860") is None
    assert host_cpus(host, None) is None


def test_a_real_closed_loop_on_a_limit_of_two_names_it(server_factory: Factory, tmp_path: Path) -> None:
    """The reference server emulating Gradio 6 (concurrency_limit 2, 100 ms) and 8 closed-loop users."""
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 100}, "concurrency_limit": 2}
    spec = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"users": 8, "duration": 3, "warmup": 0.5, "timeout": 20})
    with server_factory(functions=[work]) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    found = [f for f in result.diagnosis if f.kind not in ("usage", *PHASE_KINDS)]
    assert [f.kind for f in found] == ["queue_limit"], result.diagnosis
    assert "at its limit for 8 users" in found[0].message
    assert "about 2 request(s) at a time (its configured limit: 2)" in found[0].message
