"""Differential: real Gradio 3.50.2 and 4.44.1 against the reference server in `gradio: 3` / `gradio: 4`
mode, driven alike (tests/gradio_versions/app.py from each release's env, the `release` fixture's
servers; the same functions and queue in the reference server's settings, `reference_settings`).

Both get the same plans, staggered so that their order does not depend on a dispatcher's polling
interval, and must show the same message sequences and fields, peak concurrency (3.x: one worker pool
shared by every function; 4.x: a limit per function), batch groups, queue-full answers and estimation
shapes; the estimation values follow each release's formula with each server's own averages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from reference_server.settings import ServerSettings, parse_settings
from reference_server.testing import serve_in_thread

from .conftest import Release
from .wire import After, Seen, Step, calls

DIFFERENTIAL = {"3.50.2": 3, "4.44.1": 4}  # the releases the reference server emulates
ONLY_RELEASES = tuple(DIFFERENTIAL)  # the others are skipped at collection (conftest)
ECHO, SLEEP, STREAM, FAIL, BATCH, SLOW_WORK = 0, 1, 3, 4, 5, 8  # fn_index in app.py


def reference_settings(major: int, max_size: int | None) -> ServerSettings:
    """app.py's functions, in its order and with its queue, as reference-server settings for `major`."""
    one = {"concurrency_limit": 1} if major >= 4 else {}
    functions = [
        {"api_name": "echo", "workload": "echo"},
        {"api_name": "sleep", "workload": "sleep", "params": {"base_ms": 300}, **one},
        {"api_name": "long", "workload": "stream", "params": {"chunks": 100, "interval_ms": 100}, **one},
        {"api_name": "stream", "workload": "stream", "params": {"chunks": 4, "interval_ms": 50}},
        {"api_name": "fail", "workload": "fail"},
        {"api_name": "batch", "workload": "sleep", "params": {"base_ms": 300}, "batch": True,
         "max_batch_size": 4, **one},
        {"api_name": "image", "workload": "imageop"},
        {"api_name": "work", "workload": "sleep", "params": {"base_ms": 200}},
        {"api_name": "slow_work", "workload": "sleep", "params": {"base_ms": 600}},
    ]
    queue: dict[str, Any] = {"max_size": max_size}
    if major == 3:
        queue["concurrency_count"] = 1
    else:
        queue["default_concurrency_limit"] = 4
    return parse_settings({"gradio": major, "functions": functions, "queue": queue,
                           "launch": {"port": 0}}, "tests/gradio_versions differential")


@dataclass(frozen=True)
class Pair:
    major: int
    family: str
    urls: dict[str, tuple[str, str]]  # "gradio" | "reference" -> (open queue, max_size=1)

    def both(self, plan: Sequence[Step], tight: bool = False) -> dict[str, list[Seen]]:
        """Run `plan` on real Gradio, then on the reference server."""
        return {name: asyncio.run(calls(urls[int(tight)], self.family, plan))
                for name, urls in self.urls.items()}


@pytest.fixture(scope="module")
def pair(release: Release) -> Iterator[Pair]:
    major = DIFFERENTIAL[release.version]
    with serve_in_thread(reference_settings(major, None)) as main, \
            serve_in_thread(reference_settings(major, 1)) as tight:
        urls = {"gradio": (release.url, release.tight_url), "reference": (main.url, tight.url)}
        yield Pair(major, "ws" if major == 3 else "sse", urls)


def fields(seen: Seen) -> list[tuple[str, list[str]]]:
    """Each message's kind and keys (and an output's keys): what must match exactly."""
    out = []
    for m in seen.messages:
        keys = sorted(m)
        if isinstance(m.get("output"), dict):
            keys += [f"output.{k}" for k in sorted(m["output"])]
        out.append((m["msg"], keys))
    return out


@pytest.mark.parametrize("fn_index", [ECHO, STREAM, FAIL])
def test_message_sequences_and_fields_agree(pair: Pair, fn_index: int) -> None:
    seen = pair.both([(0, fn_index, "hi")])
    (gradio,), (reference,) = seen["gradio"], seen["reference"]
    assert fields(reference) == fields(gradio)
    if fn_index == FAIL:
        assert reference.first("process_completed")["output"] == gradio.first("process_completed")["output"]


def test_config_keys_agree(pair: Pair) -> None:
    """/config: the same top-level keys and dependency keys (3.x: no protocol, no api_prefix)."""
    configs = {name: httpx.get(urls[0] + "/config").json() for name, urls in pair.urls.items()}
    assert sorted(configs["reference"]) == sorted(configs["gradio"])
    deps = {name: sorted(c["dependencies"][0]) for name, c in configs.items()}
    assert deps["reference"] == deps["gradio"]
    assert configs["reference"]["version"] == configs["gradio"]["version"]
    assert ("protocol" in configs["gradio"]) is (pair.major >= 4) and "api_prefix" not in configs["gradio"]


def intervals(seen: list[Seen]) -> list[tuple[float, float]]:
    return [(s.time_of("process_starts"), s.time_of("process_completed")) for s in seen]


def peak(spans: list[tuple[float, float]], slack_s: float = 0.08) -> int:
    """Most intervals overlapping by more than `slack_s` at once (Gradio 4.x's streams deliver a message
    up to ~50 ms late, so a job can seem to start before the one it waited for has ended)."""
    edges = sorted([(a + slack_s, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def test_peak_concurrency_agrees(pair: Pair) -> None:
    """3 slow_work (0.6 s) + 3 sleep (0.3 s) at once: 3.x runs one at a time (its one pool of 1 serves
    every function), 4.x all 3 slow_work (default limit 4) and one sleep (limit 1) for ~0.5 s: a
    dispatcher that starts a job 100 ms late on a busy machine does not hide the peak."""
    plan = [(0.01 * i, SLOW_WORK if i % 2 else SLEEP, f"p{i}") for i in range(6)]
    seen = pair.both(plan)
    expected = 1 if pair.major == 3 else 4
    assert peak(intervals(seen["gradio"])) == peak(intervals(seen["reference"])) == expected


def groups(seen: list[Seen], gap_s: float = 0.1) -> list[int]:
    """Batch sizes: events completed within `gap_s` of each other ran as one batch (a batch takes 0.3 s)."""
    done = sorted(s.time_of("process_completed") for s in seen)
    sizes = [1]
    for before, after in zip(done, done[1:], strict=False):
        if after - before > gap_s:
            sizes.append(1)
        else:
            sizes[-1] += 1
    return sizes


def test_batch_groups_agree(pair: Pair) -> None:
    """A blocker holds the worker (3.x: a sleep in the one pool; 4.x: a batch of one in batch's group,
    limit 1), 6 batch events queue behind it: they run as a batch of 4 (max_batch_size), then of 2."""
    blocker = SLEEP if pair.major == 3 else BATCH
    plan: list[Step] = [(0.0, blocker, "block")]
    plan += [(After(0, "process_starts"), BATCH, f"b{i}") for i in range(6)]
    seen = pair.both(plan)
    for name in ("gradio", "reference"):
        assert all(s.kinds[-2:] == (["process_completed", "closed"] if pair.major == 3 else
                                    ["process_completed", "close_stream"]) for s in seen[name]), name
        assert groups(seen[name][1:]) == [4, 2], (name, groups(seen[name][1:]))


def test_queue_full_agrees(pair: Pair) -> None:
    """max_size=1, sleep (0.3 s, one at a time): the first runs; once it started a second waits; once
    that one joined, two more are refused."""
    joined = "estimation"
    plan: list[Step] = [(0.0, SLEEP, "q0"), (After(0, "process_starts"), SLEEP, "q1"),
                        (After(1, joined), SLEEP, "q2"), (After(1, joined), SLEEP, "q3")]
    seen = pair.both(plan, tight=True)
    verdicts = {name: [s.kinds[-2] if pair.major == 3 else s.kinds[-1] for s in runs]
                for name, runs in seen.items()}
    full = "queue_full" if pair.major == 3 else "http_503"
    done = "process_completed" if pair.major == 3 else "close_stream"
    assert verdicts["gradio"] == verdicts["reference"] == [done, done, full, full]
    if pair.major == 3:
        assert seen["gradio"][2].kinds == seen["reference"][2].kinds == ["send_hash", "queue_full", "closed"]


def test_estimations_agree(pair: Pair) -> None:
    """After a warm-up (every function has an average), a sleep holds the worker and 3 echoes queue
    behind it (3.x; 4.x runs echo in its own group): the same ranks and queue sizes in every
    estimation, null ETAs at the same places, and 3.x's formula with each server's own averages."""
    pair.both([(0, SLEEP, "warm"), (0.35, ECHO, "warm")])
    plan: list[Step] = [(0.0, SLEEP, "hold")]
    for i in range(3):  # 3.x: each once the one before joined; 4.x: once the one before started
        previous, kind = (i, "estimation") if pair.major == 3 else (i, "process_starts")
        plan.append((After(previous, "process_starts") if i == 0 else After(previous, kind), ECHO, f"e{i}"))
    seen = pair.both(plan)
    shape = {name: [[(m["rank"], m["queue_size"], m["rank_eta"] is None) for m in s.messages
                     if m["msg"] == "estimation"] for s in runs] for name, runs in seen.items()}
    assert shape["reference"] == shape["gradio"]
    if pair.major != 3:
        return
    assert [rank for rank, _, _ in (events[0] for events in shape["gradio"][1:])] == [0, 1, 2]
    for name, runs in seen.items():
        for s in runs[1:]:
            m = s.first("estimation")
            assert set(m) == {"msg", "rank", "queue_size", "avg_event_process_time",
                              "avg_event_concurrent_process_time", "rank_eta", "queue_eta"}
            conc, avg = m["avg_event_concurrent_process_time"], m["avg_event_process_time"]
            assert conc == pytest.approx(avg)  # one worker: concurrent time = mean time
            busy = conc  # the only worker runs the sleep: 3.x adds one concurrent time
            assert m["rank_eta"] == pytest.approx(m["rank"] * conc + avg + busy), (name, m)
