"""Past the capacity: throughput that holds or falls as the queue grows, the max_size advice, the ETA."""

from __future__ import annotations

import numpy as np
import pytest

from qbench.run.records.schema import RequestRecord
from qbench.run.target.frameworks import BENTOML_CAP, RAYSERVE_CAP
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
    assert found.tips_at_waiting is not None and found.tips_at_waiting >= found.fell_at_waiting
    assert found.max_size is not None and found.max_size == int(found.tips_at_waiting * 0.8)
    assert f"past about {found.fell_at_waiting} waiting, throughput fell" in found.advice
    tipped = f"past about {found.tips_at_waiting} waiting it served fewer than the capacity's 40"
    assert tipped in found.advice
    assert Overload.from_dict(found.to_dict()) == found


@pytest.mark.parametrize("slowdown", [0.0, 0.0002])
def test_a_server_without_a_queue_cap_is_advised_one_in_front(slowdown: float) -> None:
    gradio = analyse(overloaded(52, 20, slowdown), 52, 40, 1.0)
    found = analyse(overloaded(52, 20, slowdown), 52, 40, 1.0, uncapped="LitServe")
    assert gradio is not None and found is not None and found.max_size == gradio.max_size
    assert "max_size=" not in found.advice and found.advice.startswith(gradio.advice.split(": set")[0])
    assert (f"LitServe has no queue cap (Gradio's max_size), so put one in front of it: a proxy that queues "
            f"at most {found.max_size} requests") in found.advice


def test_a_server_with_its_own_cap_is_advised_it_in_its_own_terms() -> None:
    """BentoML queues without a cap unless traffic's max_concurrency is set: the same cap, said as that."""
    gradio = analyse(overloaded(52, 20, 0.0), 52, 40, 1.0)
    found = analyse(overloaded(52, 20, 0.0), 52, 40, 1.0, uncapped="BentoML", own_cap=BENTOML_CAP)
    assert gradio is not None and found is not None and found.max_size == gradio.max_size
    assert "max_size=" not in found.advice and "proxy" not in found.advice
    assert (f'BentoML queues without a cap unless its own is set: traffic={{"max_concurrency": N}} in '
            f"@bentoml.service, N = {found.max_size} plus the requests it runs at once") in found.advice
    own = "max_queued_requests=57"
    capped = analyse(overloaded(52, 20, 0.0), 52, 40, 1.0, "Ray Serve", RAYSERVE_CAP, own)
    assert capped is not None and capped.max_size == gradio.max_size
    assert (f"Ray Serve caps its queue with your app's own max_queued_requests=57 now; advised instead: "
            f"max_queued_requests={capped.max_size} in @serve.deployment") in capped.advice


def test_the_tipping_point_is_read_at_the_answered_rate() -> None:
    """One run of a server of 40 req/s slowing 0.04 ms per request waiting, answered at 40, 30 or 20 req/s:
    throughput falls 10% past the same queue, but a queue drains at the answered rate until throughput is
    under it: further out at 30 req/s, never in this run at 20; the cap follows the answered rate."""
    records = overloaded(52, 20, 0.00004)
    found = {rate: analyse(records, 52, rate, 1.0) for rate in (40, 30, 20)}
    fell = {f.fell_at_waiting for f in found.values() if f is not None}
    tips = {rate: f.tips_at_waiting for rate, f in found.items() if f is not None}
    assert len(tips) == 3 and len(fell) == 1 and tips[40] in fell
    assert tips[40] is not None and tips[30] is not None and tips[30] > tips[40] and tips[20] is None
    at_20 = found[20]
    assert at_20 is not None and at_20.max_size == 20
    assert "stayed above the capacity's 20 req/s" in at_20.advice


@pytest.mark.parametrize("factor", [1.0, 6.0, 0.5])
def test_the_eta_finding_says_how_far_the_shown_eta_is_from_the_real_wait(factor: float) -> None:
    ratio, count, text = eta_accuracy(overloaded(52, 10, 0.0, eta_factor=factor))
    assert ratio == pytest.approx(factor, rel=0.01) and count > 100
    assert ("longer" if factor >= 1 else "shorter") in text


def test_too_few_requests_say_nothing() -> None:
    assert analyse(overloaded(5, 2, 0.0), 5, 4, 1.0) is None
    assert eta_accuracy([]) == (None, 0, "")


def test_requests_a_capped_queue_refused_are_not_counted_as_waiting() -> None:
    """Ray Serve with max_queued_requests=57 (docs/rayserve.md): past the cap it answers 503 at once.
    Those requests left its queue when refused; counted as waiting for ever they made '281 waiting' of a
    queue capped at 57, and the advice a cap of 224 above the one set."""
    records = overloaded(52, 20, 0.0)
    refused = [RequestRecord(
        request_id=10_000 + i, user_id=0, session_id="s", endpoint="e", warmup=False, intended_at_s=at,
        sent_at_s=at, completed_at_s=at + 0.002, outcome="error", error_kind="http_5xx")
        for i, at in enumerate(np.arange(2.0, 20.0, 0.02).tolist())]  # 50 refusals a second
    found = analyse(records + refused, 102, 40, 1.0)
    alone = analyse(records, 52, 40, 1.0)
    assert found is not None and alone is not None
    # the queue the served requests saw: a refusal waits its 2 ms at most (one at a slice's middle), not
    # for ever (900 of them did before)
    assert alone.max_waiting <= found.max_waiting <= alone.max_waiting + 1
    timed_out = [RequestRecord(
        request_id=20_000, user_id=0, session_id="s", endpoint="e", warmup=False, intended_at_s=1.0,
        sent_at_s=1.0, completed_at_s=31.0, outcome="error", error_kind="timeout")]
    waiting = analyse(records + timed_out, 52, 40, 1.0)
    assert waiting is not None and waiting.max_waiting == alone.max_waiting + 1  # may still be queued
