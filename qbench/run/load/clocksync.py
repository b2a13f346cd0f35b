"""A remote clock's offset to ours, measured as NTP does: of several round trips, the one with the smallest
round-trip time, whose half bounds the offset's error."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ROUNDS = 8


@dataclass(frozen=True)
class ClockOffset:
    offset_s: float  # remote clock minus local clock (s)
    rtt_s: float  # the kept (smallest) round-trip time (s)
    rounds: int  # round trips made

    @property
    def uncertainty_s(self) -> float:
        """The true offset lies within +- this of `offset_s`."""
        return self.rtt_s / 2


def estimate(samples: Sequence[tuple[float, float, float]]) -> ClockOffset:
    """(t0 local send, t1 remote reading, t2 local receive) samples -> the min-RTT estimate."""
    if not samples:
        raise ValueError("no clock samples")
    t0, t1, t2 = min(samples, key=lambda s: s[2] - s[0])
    return ClockOffset(offset_s=t1 - (t0 + t2) / 2, rtt_s=t2 - t0, rounds=len(samples))


def measure(
    remote_now: Callable[[], float], rounds: int = ROUNDS, now: Callable[[], float] = time.time
) -> ClockOffset:
    """Make `rounds` round trips to `remote_now` (which returns the remote's clock reading)."""
    samples = []
    for _ in range(rounds):
        t0 = now()
        t1 = remote_now()
        samples.append((t0, t1, now()))
    return estimate(samples)
