"""`Prober`: runs the probes of one scenario against one server (judged by qbench.tune.capacity.probe),
numbering their run folders: the estimate, the open-loop probes, the sustained runs, the run past it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qbench.run import Framework, RequestRecord, Scenario, split_sessions, steadiness
from qbench.tune.capacity.probe import (
    ProbeLength,
    judge,
    latency_bound_s,
    own_bounds,
    rate_overrides,
    seed_overrides,
)
from qbench.tune.points.measure import PointRun, RunawayDetector, run_measured
from qbench.tune.values.ceiling import Probe
from qbench.tune.values.constraints import Constraints
from qbench.tune.verdicts.overload import OVERLOAD_FACTOR, Overload, analyse

DEFAULT_CONFIRM_S = 60.0
ESTIMATE_TRIES, ESTIMATE_STRETCH = 3, 4.0  # the estimate's windows when none measured a request: x1, x4, x16
DEFAULT_MAX_PROBE_S = 30.0
ProbeObserver = Callable[[Probe], None]
SUSTAINED = ("confirm", "now")  # sustained runs: stopped early only by an overload beyond the tolerance


@dataclass
class Prober:
    """Runs probes of one scenario against one server, numbering their run folders under `probes_dir`."""

    scenario: Scenario
    base_url: str
    constraints: Constraints
    probes_dir: Path
    root: Path  # run folders are recorded relative to this folder
    base_overrides: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 5.0  # the bracket's probes (and the estimate)
    stop_runaway: bool = True
    observer: ProbeObserver | None = None
    count: int = 0
    tolerance: float = 0.1  # the search's: sets the bisection's probe length and the steadiness margin
    max_duration_s: float = DEFAULT_MAX_PROBE_S
    confirm_duration_s: float = DEFAULT_CONFIRM_S
    server: dict[str, Any] | None = None  # the last probe's run.json `server` (a balancer in front?)
    confirmed_at: dict[float, int] = field(default_factory=dict)  # sustained runs so far, by rate
    uncapped: Framework | None = None  # the framework of a server without Gradio's queue cap, for the advice
    restart: Callable[[], str] | None = None  # the app qbench started (--app): start it again (its URL)
    own_cap_now: str = ""  # that app's own queue cap as it ran ("max_queued_requests=57"; "": none set)

    @property
    def margin(self) -> float:
        """Relative overload a steady-state test counts (a quarter of the tolerance)."""
        return self.tolerance / 4

    @property
    def length(self) -> ProbeLength:
        return ProbeLength(self.tolerance, self.duration_s, max(self.max_duration_s, self.duration_s),
                           latency_bound_s(self.constraints))

    def _run(self, name: str, overrides: dict[str, Any], detector: RunawayDetector | None
             ) -> tuple[PointRun, Path, float]:
        run_dir = self.probes_dir / f"{self.count:02d}-{name}"
        self.count += 1
        started = time.monotonic()
        measured = run_measured(self.scenario, self.constraints.slo, self.base_url, run_dir, overrides,
                                detector)
        self.server = measured.server
        return measured, run_dir, time.monotonic() - started

    def _done(self, probe: Probe, run_dir: Path, elapsed_s: float) -> Probe:
        probe.run_dir = run_dir.relative_to(self.root).as_posix()
        probe.elapsed_s = elapsed_s
        if self.observer:
            self.observer(probe)
        return probe

    def open_loop(self, rate: float, duration_s: float, kind: str = "rate", stop: bool = True,
                  seed_offset: int = 0) -> tuple[Probe, list[RequestRecord]]:
        """An open-loop probe at `rate` req/s for `duration_s`; `seed_offset`: another Poisson draw."""
        overrides = rate_overrides(self.base_overrides, rate, duration_s)
        if seed_offset:
            overrides.update(seed_overrides(self.scenario, seed_offset))
        margin = self.tolerance if kind in SUSTAINED else self.margin
        detector = RunawayDetector(margin=margin) if self.stop_runaway and stop else None
        measured, run_dir, elapsed = self._run(f"{kind}-{rate:.4g}", overrides, detector)
        steady = steadiness(measured.records, self.margin, bound_s=latency_bound_s(self.constraints))
        probe = judge(kind, rate, measured.summary, measured.stopped, self.constraints, steady,
                      own_bounds(self.scenario))
        probe.duration_s = duration_s
        fail_split_sessions(probe, measured)
        return self._done(probe, run_dir, elapsed), measured.records

    def fresh_start(self, collapsed: Probe, restarts: list[str], after: str) -> bool:
        """Restart the app qbench started, noting it in `restarts`; False for one it did not start."""
        if self.restart is None:
            return False
        self.base_url = self.restart()
        restarts.append(f"after {after} (at {collapsed.rate_rps:.3g} req/s it served "
                        f"{collapsed.throughput_rps:.3g} ok/s)")
        return True

    def rate(self, rate: float) -> Probe:
        """A short open-loop probe (the bracket's)."""
        return self.open_loop(rate, self.duration_s)[0]

    def refine(self, rate: float) -> Probe:
        """A bisection probe: long enough for an overload of the tolerance to show (`ProbeLength`)."""
        return self.open_loop(rate, self.length.seconds(rate))[0]

    def confirm(self, rate: float) -> Probe:
        """The sustained run at the answer; a repeat at the same rate draws other Poisson arrivals."""
        runs = self.confirmed_at.get(rate, 0)
        self.confirmed_at[rate] = runs + 1
        return self.open_loop(rate, self.confirm_duration_s, "confirm", seed_offset=runs)[0]

    def now(self, rate: float) -> Probe:
        """A sustained run at `rate` after qbench's other runs (an ageing app's rate now), own seed."""
        return self.open_loop(rate, self.confirm_duration_s, "now", seed_offset=1000 + self.count)[0]

    def overload(self, capacity: float) -> tuple[Probe, Overload | None]:
        """One run at OVERLOAD_FACTOR x the capacity, not stopped early, and what it showed."""
        rate = capacity * OVERLOAD_FACTOR
        seconds = max(min(2 * self.length.seconds(capacity), self.max_duration_s), 10.0)
        probe, records = self.open_loop(rate, seconds, "overload", stop=False)
        return probe, analyse(records, rate, capacity, latency_bound_s(self.constraints),
                              *((self.uncapped.name, self.uncapped.queue_cap, self.own_cap_now)
                                if self.uncapped else ()))

    def after_burst(self, capacity: float) -> Probe:
        """A short run at the answer once the run past it is over: did the server come back?"""
        return self.open_loop(capacity, self.duration_s, "after")[0]

    def estimate(self, users: int) -> tuple[Probe, list[RequestRecord]]:
        """A closed-loop probe with `users` users and no think time; its rate (users / mean latency) is
        the first guess. A window that measured no request is run again, longer."""
        overrides = {k: v for k, v in self.base_overrides.items() if k != "load.rate"}
        overrides.update({"load.users": users, "load.think_time": 0, "load.ramp_up": 0,
                          "load.requests": None, "load.interval": None})
        for attempt in range(ESTIMATE_TRIES):
            window = self.duration_s * ESTIMATE_STRETCH**attempt
            overrides["load.duration"] = window
            name = f"estimate-u{users}" + (f"-{window:g}s" if attempt else "")
            measured, run_dir, elapsed = self._run(name, overrides, None)
            if measured.summary.requests > 0:  # measured (a window of errors is not run again)
                break
        probe = judge("estimate", 0.0, measured.summary, None, self.constraints,
                      own=own_bounds(self.scenario))
        probe.users = users
        probe.duration_s = window
        probe.rate_rps = users / probe.mean_latency_s if probe.mean_latency_s else probe.throughput_rps
        fail_split_sessions(probe, measured)
        return self._done(probe, run_dir, elapsed), measured.records


def fail_split_sessions(probe: Probe, measured: PointRun) -> None:
    """Fail a probe whose sessions reached two replicas of a balancer without affinity, saying so."""
    split = split_sessions(measured.records, measured.server, short=True)
    if split:
        probe.violations.append(split)
        probe.passed = False
