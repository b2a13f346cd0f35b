"""The soak sampler's parts (qbench.run.soak.health): the stuck-queue test on a fake clock, the process tree's
usage, the cache folder's bytes, health.jsonl read back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from qbench.run.load.generator import LiveStats
from qbench.run.soak import health
from qbench.run.soak.health import (
    HealthSample,
    HealthSampler,
    StuckWatch,
    folder_bytes,
    read_health,
    tree_usage,
)


def test_stuck_after_no_completion_while_requests_go_out() -> None:
    now = [0.0]
    watch = StuckWatch(10.0, clock=lambda: now[0])
    assert watch.check(LiveStats(sent=10, completed=8, ok=8, in_flight=2)) is None
    now[0] = 9.0
    assert watch.check(LiveStats(sent=20, completed=8, ok=8, in_flight=12)) is None  # not yet 10 s
    now[0] = 11.0
    reason = watch.check(LiveStats(sent=25, completed=8, ok=8, in_flight=17))
    assert reason is not None and reason.startswith("stuck queue: 15 requests sent")


def test_not_stuck_when_completions_go_on_or_nothing_is_sent() -> None:
    now = [0.0]
    watch = StuckWatch(5.0, clock=lambda: now[0])
    for k in range(1, 20):  # slow, but completing
        now[0] = 4.0 * k
        assert watch.check(LiveStats(sent=10 * k, completed=k, ok=k, in_flight=9 * k)) is None
    idle = StuckWatch(5.0, clock=lambda: now[0])
    idle.check(LiveStats(sent=5, completed=5, ok=5))
    now[0] += 60
    assert idle.check(LiveStats(sent=5, completed=5, ok=5)) is None  # the load ended: idle, not stuck


def test_tree_usage_counts_this_process_and_a_gone_pid_is_none() -> None:
    usage = tree_usage(os.getpid())
    assert usage is not None and usage["rss_bytes"] > 0 and usage["threads"] >= 1 and usage["open_files"] >= 1
    assert tree_usage(2**22 + 12345) is None


def test_folder_bytes_and_health_lines_read_back(tmp_path: Path) -> None:
    (tmp_path / "cache" / "a").mkdir(parents=True)
    (tmp_path / "cache" / "a" / "f").write_bytes(b"x" * 1000)
    assert folder_bytes(tmp_path / "cache") == 1000 and folder_bytes(tmp_path / "none") is None
    sample = HealthSample(t_s=1.0, at=2.0, sent=3, completed=2, ok=2, in_flight=1, rss_bytes=10)
    path = tmp_path / "health.jsonl"
    path.write_bytes(orjson.dumps(sample.to_dict()) + b"\n" + b'{"t_s": 2.0, "cu')  # a killed run's last line
    assert read_health(path) == [sample] and read_health(tmp_path / "absent.jsonl") == []


def test_a_server_without_status_is_asked_three_times_then_left_alone(tmp_path: Path) -> None:
    asked: list[str] = []

    def no_status(url: str) -> None:
        asked.append(url)

    sampler = HealthSampler(tmp_path / "health.jsonl", status_url="http://x", status_reader=no_status)
    samples = [sampler.sample() for _ in range(6)]
    assert len(asked) == 3 and all(s.status_rss_bytes is None for s in samples)
    answers = iter([None, {"rss_bytes": 5, "events_waiting": 2}, None, None, None, {"rss_bytes": 6}])
    flaky = HealthSampler(tmp_path / "h2.jsonl", status_url="u", status_reader=lambda url: next(answers))
    seen = [flaky.sample().status_rss_bytes for _ in range(6)]
    assert seen == [None, 5, None, None, None, 6]  # once it answered, a slow answer is only a gap


def test_samples_keep_their_cadence_however_long_each_takes(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock: each sample's /status takes 0.15 of the 0.25 s interval, and one takes 0.4 s.
    Samples still start every 0.25 s (the wait is what is left of it), the late one's successor at once,
    and the cadence goes on from there without a burst (the sample's cost once stretched every interval:
    30 samples where 48 were due on a busy host, too few to see a leak stop)."""
    now = [100.0]
    costs = iter([0.15, 0.15, 0.4, 0.15, 0.15, 0.15, 0.15])
    waits: list[float] = []

    def slow_status(url: str) -> dict[str, int]:
        now[0] += next(costs)
        return {"rss_bytes": 1}

    def wait(timeout: float) -> bool:
        waits.append(round(timeout, 6))
        now[0] += timeout
        return len(waits) == 6

    monkeypatch.setattr(health, "time", SimpleNamespace(perf_counter=lambda: now[0], time=time.time))
    sampler = HealthSampler(tmp_path / "health.jsonl", interval_s=0.25, status_url="u",
                            status_reader=slow_status)
    monkeypatch.setattr(sampler, "_stop", SimpleNamespace(wait=wait, set=lambda: None))
    sampler._loop()
    assert waits == [0.1, 0.1, 0.0, 0.1, 0.1, 0.1]
    starts = [round(s.t_s, 6) for s in sampler.samples]
    assert starts == [0.0, 0.25, 0.5, 0.9, 1.15, 1.4]


def test_a_cache_folder_costly_to_walk_is_walked_less_often(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock, samples 0.25 s apart: a walk of 0.1 s is not repeated for 1 s (CACHE_WALK_SHARE
    times its cost), so every fourth sample has the cache's bytes and the others None (the sampler
    keeps its cadence); a walk that costs nothing goes at every sample."""
    now = [100.0]
    walk = [0.1]

    def folder(path: Path) -> int:
        now[0] += walk[0]
        return 7

    monkeypatch.setattr(health, "time", SimpleNamespace(perf_counter=lambda: now[0], time=time.time))
    monkeypatch.setattr(health, "folder_bytes", folder)
    sampler = HealthSampler(tmp_path / "health.jsonl", interval_s=0.25, cache_folder=tmp_path)
    seen = []
    for _ in range(9):
        seen.append(sampler.sample().cache_bytes)
        now[0] += 0.25
    assert seen == [7, None, None, None, 7, None, None, None, 7]
    walk[0], now[0] = 0.0, now[0] + 1.0  # past the last walk's 1 s
    assert [sampler.sample().cache_bytes for _ in range(3)] == [7, 7, 7]


def test_every_request_failing_is_told_from_a_stuck_queue() -> None:
    now = [0.0]
    watch = StuckWatch(10.0, clock=lambda: now[0])
    watch.check(LiveStats(sent=100, completed=90, ok=90, in_flight=10))
    now[0] = 12.0
    reason = watch.check(LiveStats(sent=220, completed=150, ok=90, in_flight=70,
                                   errors_by_kind={"timeout": 60}))
    assert reason is not None and reason.startswith("every request failing: 120 requests sent")
    assert "60 timeout" in reason and "far behind its load" in reason
