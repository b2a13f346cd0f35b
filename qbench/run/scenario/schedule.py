"""A load section -> Plan: intended send offsets (s from run start) for open loop (burst, rate, stages,
trace, replay), or `UserPlan` loops for closed loop (users). No clock, no I/O but a recorded schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from qbench.errors import ScenarioError
from qbench.run.scenario.schema import Load, Stage
from qbench.run.scenario.trace import replay_schedule, trace_schedule

#: Upper bound on scheduled requests (and on users), so a typo (rate: 1e9) fails clearly, before any
#: array is allocated, instead of eating memory.
MAX_REQUESTS = 5_000_000


def _check_size(expected: float, what: str = "requests") -> None:
    if not expected <= MAX_REQUESTS:  # NaN too
        raise ScenarioError(
            f"key 'load': the load would schedule about {expected:.3g} {what} (limit {MAX_REQUESTS:,})"
        )


@dataclass(frozen=True)
class OpenPlan:
    """Open loop: intended send offsets in seconds, sorted, one per request."""

    offsets: np.ndarray  # float64, seconds from run start
    ids: np.ndarray | None = None  # request ids (None: 0..n-1); set on a part of a split plan

    def __len__(self) -> int:
        return int(self.offsets.size)

    def request_ids(self) -> list[int]:
        return list(range(len(self))) if self.ids is None else [int(i) for i in self.ids]

    def part(self, index: int, parts: int) -> OpenPlan:
        """Every `parts`-th request starting at `index` (for one of several generator processes)."""
        ids = np.arange(len(self))[index::parts] if self.ids is None else self.ids[index::parts]
        return OpenPlan(self.offsets[index::parts], ids)


@dataclass(frozen=True)
class UserPlan:
    """Closed loop: `users` loops, each starting at its offset, waiting `think_time` between requests."""

    users: int
    start_offsets: np.ndarray  # per user, seconds from run start
    think_time: float
    exponential_think: bool
    duration: float | None
    requests: int | None
    user_ids: np.ndarray | None = None  # None: 0..users-1; set on a part of a split plan

    def user_id(self, index: int) -> int:
        return index if self.user_ids is None else int(self.user_ids[index])

    def part(self, index: int, parts: int) -> UserPlan:
        """Every `parts`-th user starting at `index`; a `requests` budget is shared out evenly."""
        ids = np.arange(self.users)[index::parts]
        requests = None
        if self.requests is not None:
            requests = self.requests // parts + (1 if index < self.requests % parts else 0)
        return replace(
            self,
            users=int(ids.size),
            start_offsets=self.start_offsets[index::parts],
            requests=requests,
            user_ids=ids,
        )


Plan = OpenPlan | UserPlan


def plan(load: Load, seed: int = 0) -> Plan:
    """The plan for a load section (the scenario has already been validated)."""
    rng = np.random.default_rng(seed)
    if load.users is not None:
        _check_size(load.users, "users")
        starts = np.arange(load.users, dtype=np.float64) * (load.ramp_up / load.users)
        return UserPlan(
            users=load.users,
            start_offsets=starts,
            think_time=load.think_time,
            exponential_think=load.think == "exponential",
            duration=load.duration,
            requests=load.requests,
        )
    if load.burst is not None:
        return OpenPlan(burst_offsets(load.burst, load.interval, load.duration, load.requests))
    if load.trace is not None:
        return OpenPlan(trace_schedule(load.trace, load).offsets)
    if load.replay is not None:
        replayed = replay_schedule(load.replay, load)
        return OpenPlan(replayed.offsets, replayed.ids)
    stages = list(load.stages) if load.stages is not None else [_rate_stage(load)]
    poisson = load.arrival == "poisson"
    return OpenPlan(
        stage_offsets(stages, poisson=poisson, rng=rng, duration=load.duration, requests=load.requests)
    )


def burst_offsets(
    size: int, interval: float | None, duration: float | None, requests: int | None
) -> np.ndarray:
    """`size` requests at 0, repeated every `interval` seconds while < duration (first `requests`)."""
    repeats = np.ceil(duration / interval) if interval is not None and duration is not None else 1.0
    total = min(size * float(repeats), math.inf if requests is None else requests)
    _check_size(total)
    # request i belongs to burst i // size; only the `total` requests kept are ever allocated
    index = np.arange(int(total)) // size
    return index * (interval or 0.0)


def _rate_stage(load: Load) -> Stage:
    assert load.rate is not None
    if load.duration is not None:
        return Stage(duration=load.duration, rate=load.rate, to=None)
    assert load.requests is not None  # validated: a rate has duration and/or requests
    return Stage(duration=load.requests / load.rate + 1.0, rate=load.rate, to=None)


def stage_offsets(
    stages: list[Stage],
    *,
    poisson: bool,
    rng: np.random.Generator,
    duration: float | None = None,
    requests: int | None = None,
) -> np.ndarray:
    """Arrival offsets for piecewise-linear rate stages (constant, or Poisson conditioned on its count)."""
    starts, lam_starts, a, slope = _intensity(stages)
    total_time = float(starts[-1])
    if duration is not None:
        total_time = min(total_time, duration)
    total_lam = float(_cumulative(np.array([total_time]), starts, lam_starts, a, slope)[0])
    expected = total_lam if requests is None else min(total_lam, float(requests))
    _check_size(expected)
    targets = _targets(total_lam, poisson, rng, limit=math.inf if requests is None else requests)
    times = _invert(targets, starts, lam_starts, a, slope)
    times = times[times < total_time]
    return times[:requests] if requests is not None else times


def _targets(total_lam: float, poisson: bool, rng: np.random.Generator, limit: float) -> np.ndarray:
    """The first `limit` targets below `total_lam` (without allocating the full sequence)."""
    if not poisson:
        return np.arange(0.0, min(total_lam - 1e-9, limit), 1.0)  # tolerance: rate*duration is inexact
    count = int(round(total_lam))
    kept = int(min(count, limit))
    if kept <= 0:
        return np.zeros(0)
    # the first `kept` of `count` sorted uniforms, without drawing the rest: exponential spacings
    # normalised by their total (S_count+1 = S_kept + a Gamma(count + 1 - kept) draw)
    spacings = np.cumsum(rng.exponential(1.0, kept))
    total = spacings[-1] + rng.gamma(count + 1 - kept)
    return np.asarray(spacings / total * total_lam)


def _intensity(stages: list[Stage]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stage start times (plus the end), Lambda at each start, start rate and slope per stage."""
    durations = np.array([s.duration for s in stages], dtype=np.float64)
    a = np.array([s.rate for s in stages], dtype=np.float64)
    b = np.array([s.rate if s.to is None else s.to for s in stages], dtype=np.float64)
    slope = (b - a) / durations
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    lam = 0.5 * (a + b) * durations  # the trapezoid: no overflow from squaring a huge duration
    lam_starts = np.concatenate([[0.0], np.cumsum(lam)])
    return starts, lam_starts, a, slope


def _cumulative(
    t: np.ndarray, starts: np.ndarray, lam_starts: np.ndarray, a: np.ndarray, slope: np.ndarray
) -> np.ndarray:
    i = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, a.size - 1)
    u = t - starts[i]
    return np.asarray(lam_starts[i] + u * (a[i] + 0.5 * slope[i] * u))


def _invert(
    targets: np.ndarray, starts: np.ndarray, lam_starts: np.ndarray, a: np.ndarray, slope: np.ndarray
) -> np.ndarray:
    """Solve Lambda(t) = target per target: a*u + slope/2*u^2 = target - Lambda(stage start)."""
    # side="right" skips zero-intensity stages whose Lambda does not grow
    i = np.clip(np.searchsorted(lam_starts, targets, side="right") - 1, 0, a.size - 1)
    rem = targets - lam_starts[i]
    ai, si = a[i], slope[i]
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = rem / ai
        disc = np.sqrt(np.maximum(ai**2 + 2.0 * si * rem, 0.0))
        quadratic = 2.0 * rem / (ai + disc)  # = (disc - a) / slope, stable when slope -> 0 and a = 0
    u = np.where(rem <= 0, 0.0, np.where(np.abs(si) < 1e-12, linear, quadratic))
    return np.asarray(starts[i] + u, dtype=np.float64)
