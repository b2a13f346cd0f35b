"""How close to its intended time does the open-loop dispatcher wake, against a plain asyncio.sleep loop?

No network: the dispatcher's own wait (`LoadGenerator._until`: sleep until 1.5 ms before, then poll
the loop) and the plain loop qbench used before (`asyncio.sleep(intended - now)` until due; epoll
rounds its timeout up to whole milliseconds) alternate over one Poisson schedule per rate, so both
see the same host noise. Prints wake-up lag p50/p99/max per method and the process CPU.

    .venv/bin/python bench/dispatcher_wakeup.py [--rates 20 200 2000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.run.loadgen import LoadGenerator  # noqa: E402
from qbench.run.protocols.base import Clock  # noqa: E402


async def plain(clock: Clock, when: float) -> None:
    while (delay := when - clock.now()) > 0:
        await asyncio.sleep(delay)


async def measure(rate: float, seconds: float) -> dict[str, np.ndarray]:
    clock = Clock()
    owner = SimpleNamespace(clock=clock)
    lags: dict[str, list[float]] = {"dispatcher": [], "plain sleep": []}
    when = clock.now() + 0.05
    for i, gap in enumerate(np.random.default_rng(1).exponential(1 / rate, int(rate * seconds))):
        when += float(gap)
        if i % 2:
            await plain(clock, when)
            lags["plain sleep"].append(clock.now() - when)
        else:
            await LoadGenerator._until(owner, when)  # type: ignore[arg-type]
            lags["dispatcher"].append(clock.now() - when)
    return {k: np.array(v) * 1000 for k, v in lags.items()}


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rates", type=float, nargs="+", default=[20.0, 200.0, 2000.0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(f"{'rate/s':>7} {'method':<12} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU %':>6}")
    for rate in args.rates:
        cpu, wall = time.process_time(), time.perf_counter()
        lags = asyncio.run(measure(rate, args.seconds))
        share = (time.process_time() - cpu) / (time.perf_counter() - wall) * 100
        for name, lag in lags.items():
            print(f"{rate:>7g} {name:<12} {np.percentile(lag, 50):>8.3f} {np.percentile(lag, 99):>8.3f} "
                  f"{lag.max():>8.3f} {share:>6.1f}")


if __name__ == "__main__":
    main()
