"""NTP-style clock offsets: the smallest round trip wins; the true offset lies within +- rtt/2."""

from __future__ import annotations

import pytest

from qbench.run.load.clocksync import estimate, measure


@pytest.mark.parametrize(
    ("samples", "offset", "rtt"),
    [
        ([(10.0, 15.001, 10.002)], 5.0, 0.002),  # remote 5 s ahead, symmetric 1 ms each way
        ([(0.0, -2.0, 0.010), (1.0, -0.999, 1.002)], -2.0, 0.002),  # the 2 ms trip is kept
        ([(0.0, 0.009, 0.010)], 0.004, 0.010),  # asymmetric: 9 ms there, 1 ms back -> +-5 ms
    ],
)
def test_min_rtt_sample_gives_the_offset(samples: list[tuple[float, float, float]], offset: float,
                                         rtt: float) -> None:
    found = estimate(samples)
    assert found.offset_s == pytest.approx(offset) and found.rtt_s == pytest.approx(rtt)
    assert found.uncertainty_s == pytest.approx(rtt / 2) and found.rounds == len(samples)


def test_measure_against_a_simulated_remote_clock() -> None:
    """The remote clock is 3 s ahead; trips take (out, back) seconds. The slow, asymmetric trips are
    off by up to 2 ms; the fast symmetric one is kept and gives the offset exactly."""
    trips = iter([(0.005, 0.001), (0.0005, 0.0005), (0.001, 0.004)])
    clock = {"t": 100.0}
    back = {"s": 0.0}

    def now() -> float:
        clock["t"] += back["s"]  # the reply's travel time passes before we read our clock again
        back["s"] = 0.0
        return clock["t"]

    def remote() -> float:
        out, back["s"] = next(trips)
        clock["t"] += out
        return clock["t"] + 3.0

    found = measure(remote, rounds=3, now=now)
    assert found.rtt_s == pytest.approx(0.001) and found.offset_s == pytest.approx(3.0)
    assert abs(found.offset_s - 3.0) <= found.uncertainty_s


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError):
        estimate([])
