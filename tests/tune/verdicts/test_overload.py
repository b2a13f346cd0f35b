"""Past the capacity: throughput that holds or falls as the queue grows, the max_size advice, the ETA."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.records import RequestRecord
from qbench.tune.verdicts.overload import Overload, analyse, eta_accuracy


def overloaded(rate: float, seconds: float, slowdown_s_per_waiting: float, eta_factor: float = 1.0
               ) -> list[RequestRecord]:
    """Arrivals at `rate` into one FIFO server of 25 ms (40 req/s) whose service time grows by
    `slowdown_s_per_waiting` per request waiting behind it; the server's ETA is `eta_factor` x the truth."""
    arrivals = np.arange(int(rate * seconds)) / rate
    records: list[RequestRecord] = []
    free = 0.0
    for i, at in enumerate(arrivals):
        start = max(float(at), free)
        waiting = int(np.searchsorted(arrivals, start) - i)
        free = start + 0.025 + slowdown_s_per_waiting * max(waiting, 0)
        wait = start - at
        records.append(RequestRecord(
            request_id=i, user_id=0, session_id="s", endpoint="e", warmup=False, intended_at_s=float(at),
            sent_at_s=float(at), estimation_at_s=float(at), rank_eta_s=wait * eta_factor, started_at_s=start,
            completed_at_s=free, outcome="ok"))
    return records


def test_throughput_that_holds_advises_capacity_times_the_bound() -> None:
    found = analyse(overloaded(52, 20, 0.0), 52, 40, 1.0)
    assert found is not None and found.fell_at_waiting is None and abs(found.fall) < 0.1
    assert found.max_size == 40 and "held" in found.advice and "max_size=40" in found.advice


def test_throughput_that_falls_names_where_and_advises_below_it() -> None:
    found = analyse(overloaded(52, 20, 0.0002), 52, 40, 1.0)
    assert found is not None and found.fall > 0.1 and found.fell_at_waiting is not None
    assert found.max_size is not None and found.max_size < found.fell_at_waiting
    assert f"past about {found.fell_at_waiting} waiting, throughput fell" in found.advice
    assert Overload.from_dict(found.to_dict()) == found


@pytest.mark.parametrize("factor", [1.0, 6.0, 0.5])
def test_the_eta_finding_says_how_far_the_shown_eta_is_from_the_real_wait(factor: float) -> None:
    ratio, count, text = eta_accuracy(overloaded(52, 10, 0.0, eta_factor=factor))
    assert ratio == pytest.approx(factor, rel=0.01) and count > 100
    assert ("longer" if factor >= 1 else "shorter") in text


def test_too_few_requests_say_nothing() -> None:
    assert analyse(overloaded(5, 2, 0.0), 5, 4, 1.0) is None
    assert eta_accuracy([]) == (None, 0, "")
