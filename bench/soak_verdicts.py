"""How often is a soak verdict wrong? False alarms and misses of qbench.run.soak.drift over generated series.

Each series is a server's RSS sampled every 5 s at 20 requests/s on an 8 GiB server (the level does not
enter the rule; memory's ceiling is a 64 GiB host, so a change of 1 GiB a day matters), with noise that
is independent or AR(1) (phi 0.5, 0.9: a process's memory is autocorrelated), for runs of 3, 10 and 60
minutes (the first 20% cut as warm-up). The truths:

    flat      no trend
    leak      12 KiB kept a request (20 GiB a day at 20 req/s): should be growing
    slow      1 KiB a request (1.6 GiB a day, just over what matters): growing, or can't tell on short runs
    bound     40 KiB a request for the first 40% of the run, then nothing: should be bounded

Printed per case: the share of each verdict. A false alarm is flat called growing, falling or
bounded; a miss is a leak called flat or bounded. Exit 1 when false alarms on flat noise pass 5% or a
12 KiB leak is missed more than 5% of the time at 10 minutes or more.

    .venv/bin/python bench/soak_verdicts.py               # 300 series a case (~2 min)
    .venv/bin/python bench/soak_verdicts.py --series 40   # quick
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np

from qbench.run.soak.command import HEALTH_SIGNALS
from qbench.run.soak.drift import judge

MIB, GIB, KIB = 2**20, 2**30, 2**10
RSS = next(s for s in HEALTH_SIGNALS if s.key == "rss_bytes")
EVERY_S, RATE, LEVEL, HOST, NOISE = 5.0, 20.0, 8 * GIB, 64 * GIB, 4 * MIB
KINDS = ("flat", "growing", "falling", "bounded", "unsure", "short")


def noise(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    out = np.empty(n)
    out[0] = rng.normal(0, NOISE)
    shocks = rng.normal(0, NOISE * math.sqrt(1 - phi * phi), n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def truth(name: str, x: np.ndarray) -> np.ndarray:
    if name == "flat":
        return np.zeros(x.size)
    if name == "leak":
        return 12 * KIB * x
    if name == "slow":
        return 1 * KIB * x
    stop = 0.4 * x[-1]
    return 40_000 * np.minimum(x, stop)


def shares(name: str, phi: float, minutes: float, series: int, seed: int) -> Counter[str]:
    rng = np.random.default_rng(seed)
    n = int(minutes * 60 / EVERY_S)
    t = np.arange(n) * EVERY_S
    x = t * RATE
    kinds: Counter[str] = Counter()
    for _ in range(series):
        values = LEVEL + truth(name, x) + noise(rng, n, phi)
        verdict = judge(RSS, list(t), list(x), list(values), steady_from_s=0.2 * t[-1], limit=HOST,
                        rate_rps=RATE, limit_source="the host's memory")
        kinds[verdict.kind] += 1
    return kinds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=300, help="generated series per case")
    parser.add_argument("--minutes", default="3,10,60", help="run lengths, comma-separated")
    args = parser.parse_args(argv)
    minutes = [float(m) for m in args.minutes.split(",")]
    print(f"{args.series} series a case; RSS every {EVERY_S:.0f} s at {RATE:.0f} req/s on 8 GiB, "
          "noise sd 4 MiB, ceiling 64 GiB (1 GiB a day matters)")
    print(f"{'truth':6} {'noise':8} {'run':>6}  " + "  ".join(f"{k:>8}" for k in KINDS[:-1]))
    failures = []
    for name in ("flat", "leak", "slow", "bound"):
        for phi in (0.0, 0.5, 0.9):
            for m in minutes:
                kinds = shares(name, phi, m, args.series, seed=int(phi * 10) * 1000 + int(m) * 10 + len(name))
                row = [kinds[k] / args.series for k in KINDS[:-1]]
                label = "iid" if phi == 0 else f"AR {phi}"
                print(f"{name:6} {label:8} {m:>4g} m  " + "  ".join(f"{share:8.1%}" for share in row))
                alarms = (kinds["growing"] + kinds["falling"] + kinds["bounded"]) / args.series
                if name == "flat" and alarms > 0.05:
                    failures.append(f"flat {label} {m:g} min: false alarms {alarms:.1%}")
                missed = (kinds["flat"] + kinds["bounded"]) / args.series
                if name == "leak" and m >= 10 and missed > 0.05:
                    failures.append(f"leak {label} {m:g} min: missed {missed:.1%}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
