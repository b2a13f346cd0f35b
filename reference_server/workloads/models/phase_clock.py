"""Timing the phases inside one batch call: the host's clock on a CPU, CUDA events on a GPU.

    clock = PhaseClock(device)
    ... host work ...;  clock.lap("batch_prepare")
    ... copy ...;       clock.lap("h2d")
    ... forward ...;    clock.lap("forward")
    clock.report()      # after the results are on the host (a sync point); adds to BATCH_PHASES

On CUDA a lap records an event on the current stream, so each phase is the device's time between two
laps (kernels queue asynchronously: a host clock would time the launches, not the work); `report()`
synchronises on the last event before reading them. The host time before the first lap (stacking
arrays, pinning) is added to the first phase.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from reference_server.observe.profiling import BATCH_PHASES, batch_phase

if TYPE_CHECKING:
    import torch


class PhaseClock:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.active = BATCH_PHASES.get() is not None  # nobody reads the phases: time nothing
        self.last_s = time.perf_counter()
        self.last_event: Any = self._event() if self.active and self.cuda else None
        self.device_laps: list[tuple[str, Any, Any]] = []  # (phase, start event, end event)

    @staticmethod
    def _event() -> Any:
        import torch

        event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event

    def lap(self, name: str) -> None:
        """The phase `name` ends now (on the device's timeline on CUDA)."""
        if not self.active:
            return
        if self.cuda:
            event = self._event()
            self.device_laps.append((name, self.last_event, event))
            self.last_event = event
            return
        now = time.perf_counter()
        batch_phase(name, now - self.last_s)
        self.last_s = now

    def host_lap(self, name: str) -> None:
        """A phase of host work (stacking arrays, pinning memory): timed on the host clock."""
        if not self.active:
            return
        now = time.perf_counter()
        batch_phase(name, now - self.last_s)
        self.last_s = now
        if self.cuda:
            self.last_event = self._event()

    def report(self) -> None:
        """Add the device laps to BATCH_PHASES (after the results reached the host: a sync point)."""
        if not self.device_laps:
            return
        self.device_laps[-1][2].synchronize()
        for name, start, end in self.device_laps:
            batch_phase(name, start.elapsed_time(end) / 1000)
        self.device_laps.clear()
