"""qbench.run.results.words: the run's summary in words (figures, the generator's warnings)."""

from __future__ import annotations

import pytest

from qbench.run.records.schema import RequestRecord
from qbench.run.results import words
from qbench.run.results.summary import GeneratorStats, JourneyStats, Stats, summarize


def records(lag: float) -> list[RequestRecord]:
    """Ten requests 0.1 s apart, each sent `lag` late and 0.2 s in service."""
    out = []
    for i in range(10):
        r = RequestRecord(request_id=i, user_id=i, session_id="s", endpoint="e", warmup=False,
                          intended_at_s=i * 0.1)
        r.sent_at_s, r.started_at_s = r.intended_at_s + lag, i * 0.1 + 0.1
        r.completed_at_s, r.outcome = i * 0.1 + 0.3, "ok"
        out.append(r)
    return out


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.01234, "12.3ms"),
        (42.43, "42.4s"),
        (-0.0000456, "-45.6µs"),
        (0.9996, "1s"),  # not '1e+03ms'
        (0.0009996, "1ms"),
        (1234.5, "1234s"),
        (0.0, "0ms"),
        (None, "-"),
    ],
)
def test_figures_stay_short(value: float | None, text: str) -> None:
    assert words.seconds(value) == text


def test_warnings_tell_a_saturated_generator_from_a_busy_host() -> None:
    busy = summarize(records(0.02), generator=GeneratorStats(cpu_percent=97.0, max_loop_lag_s=0.05))
    warnings = words.bottleneck_warnings(busy)
    assert len(warnings) == 3 and "--processes" in warnings[0] and "97%" in warnings[2]
    idle = summarize(records(0.02), generator=GeneratorStats(cpu_percent=5.0))
    assert "host is busy" in words.bottleneck_warnings(idle)[0]


def test_a_burst_does_not_warn_of_send_lag() -> None:
    late = summarize(records(0.02), generator=GeneratorStats(cpu_percent=50.0))
    assert any("send lag p99 20.0 ms" in w for w in words.bottleneck_warnings(late))
    assert not words.bottleneck_warnings(late, burst=True)


def test_journeys_in_a_line() -> None:
    done = JourneyStats(started=5, completed=3, failed=1, unfinished=1,
                        duration=Stats(count=3, p50=1.5, p95=2.0, max=2.5))
    assert words.journey_line(done) == (
        "journeys: 5 started, 3 completed, 1 ended by an error, 1 cut off by the end of the run; "
        "time to finish one: p50 1.5s, p95 2s, max 2.5s")
    assert words.journey_line(JourneyStats(started=2, unfinished=2)).endswith("cut off by the end of the run")
