"""How close to its intended time does the open-loop dispatcher wake, and at what CPU cost?

No network. Three waits over one Poisson schedule per rate (run one after the other, each over the
same schedule): the dispatcher's (`qbench.run.load.waker.make_waker()`: a timerfd on Linux), the spin
waker it falls back to elsewhere (sleep until 1.5 ms before, then poll the loop), and a plain
`asyncio.sleep(intended - now)` loop (epoll rounds its timeout up to whole milliseconds). Prints
wake-up lag p50/p99/max and the process CPU (% of a core) per method.

    .venv/bin/python bench/dispatcher_wakeup.py [--rates 20 200 2000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.run.load.waker import SpinWaker, Waker, make_waker  # noqa: E402


class PlainSleep:
    name = "plain sleep"

    async def until(self, when: float) -> None:
        while (delay := when - time.perf_counter()) > 0:
            await asyncio.sleep(delay)

    def close(self) -> None:
        pass


async def measure(waker: Waker, rate: float, seconds: float) -> np.ndarray:
    lags = []
    when = time.perf_counter() + 0.05
    for gap in np.random.default_rng(1).exponential(1 / rate, int(rate * seconds)):
        when += float(gap)
        await waker.until(when)
        lags.append(time.perf_counter() - when)
    return np.array(lags) * 1000


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rates", type=float, nargs="+", default=[20.0, 200.0, 2000.0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(f"{'rate/s':>7} {'method':<12} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU %':>6}")
    for rate in args.rates:
        for waker in (make_waker(), SpinWaker(), PlainSleep()):
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                lag = asyncio.run(measure(waker, rate, args.seconds))
            finally:
                waker.close()
            share = (time.process_time() - cpu) / (time.perf_counter() - wall) * 100
            p50, p99 = np.percentile(lag, [50, 99])
            print(f"{rate:>7g} {waker.name:<12} {p50:>8.3f} {p99:>8.3f} {lag.max():>8.3f} {share:>6.1f}")


if __name__ == "__main__":
    main()
