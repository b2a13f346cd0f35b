"""How many requests does a comparison need to see a 5% slowdown: paired (same schedule) vs unpaired?

Two reference servers (subprocesses) run the same `sleep` function with lognormal jitter, B 5% slower
than A (40 ms vs 42 ms median, 2 workers; each server has its own jitter seed, so per-request service
noise is NOT shared between runs: what pairing cancels is the arrival pattern alone). Per repeat:

    A    open-loop Poisson on server A
    B    A's schedule (`load.replay`) on server B         paired, 5% slower: should be found
    C    a fresh seed on server B                         unpaired, 5% slower: should be found
    A2   A's schedule on server A again                   paired, no change: a false alarm if "found"
    A3   a fresh seed on server A                         unpaired, no change: a false alarm if "found"

For each request count n the first n requests are compared on end-to-end latency: paired with
qbench.run.results.paired.pair_runs (Wilcoxon signed-rank + bootstrap CI of the median of B - A),
unpaired with unpaired_phase (Mann-Whitney + bootstrap CI of the difference of medians). "Found" is
the verdict "slower" against B/C; a false alarm is any verdict but "no clear difference" against
A2/A3. Latencies in one run are autocorrelated (a queue remembers), which both tests' p-values ignore:
the false-alarm columns show what that costs each of them.

    .venv/bin/python bench/paired_vs_unpaired.py              # 5 repeats, up to 400 requests (~4 min)
    .venv/bin/python bench/paired_vs_unpaired.py --repeats 2 --requests 200   # quick
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.run.pipeline import run_scenario  # noqa: E402
from qbench.run.records.columns import Columns  # noqa: E402
from qbench.run.records.schema import RequestRecord  # noqa: E402
from qbench.run.results.paired import pair_runs, unpaired_phase  # noqa: E402
from qbench.run.scenario.schema import parse_scenario  # noqa: E402
from qbench.tune.servers.server_process import start_reference_server


def server(base_ms: float, jitter_seed: int) -> dict[str, Any]:
    fn = {"api_name": "predict", "workload": "sleep", "concurrency_limit": 2,
          "params": {"base_ms": base_ms, "jitter": {"dist": "lognormal", "sigma": 0.05, "seed": jitter_seed}}}
    return {"functions": [fn], "launch": {"max_threads": 8}}


def run(url: str, out: Path, seed: int, rate: float, requests: int, replay: Path | None = None) -> list[Any]:
    """One run of `requests` requests (Poisson with `seed`, or `replay`'s schedule)."""
    load: dict[str, Any] = {"replay": str(replay)} if replay else {"rate": rate, "arrival": "poisson"}
    spec = parse_scenario({
        "name": out.name, "endpoint": {"api_name": "predict"},
        "payload": {"seed": seed, "inputs": [{"text": {"words": [2, 4]}}]},
        "load": {**load, "requests": requests, "timeout": 30},
    })
    records = run_scenario(spec, target=url, out_dir=out, live=False).records
    return sorted(records, key=lambda r: r.request_id)


def verdict(a: list[RequestRecord], b: list[RequestRecord], paired: bool) -> str:
    if paired:
        phases = {p.phase: p for p in pair_runs(Columns.of(a), Columns.of(b)).phases}
        return phases["latency_s"].verdict if "latency_s" in phases else "no clear difference"
    phase = unpaired_phase(Columns.of(a), Columns.of(b), "latency_s")
    return phase.verdict if phase is not None else "no clear difference"


COLUMNS = ("paired found", "paired false alarm", "unpaired found", "unpaired false alarm")


def tally(runs: dict[str, list[RequestRecord]], n: int) -> tuple[bool, bool, bool, bool]:
    a = runs["A"][:n]
    return (
        verdict(a, runs["B"][:n], paired=True) == "slower",
        verdict(a, runs["A2"][:n], paired=True) != "no clear difference",
        verdict(a, runs["C"][:n], paired=False) == "slower",
        verdict(a, runs["A3"][:n], paired=False) != "no clear difference",
    )


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400, help="requests per run (the largest n)")
    parser.add_argument("--rate", type=float, default=40.0, help="Poisson arrivals/s (40 -> A 80%% busy)")
    args = parser.parse_args()
    counts = [n for n in (50, 100, 200, 400, 800, 1600) if n <= args.requests]
    hits = {n: [0, 0, 0, 0] for n in counts}
    with tempfile.TemporaryDirectory() as tmp, start_reference_server(server(40.0, 1)) as url_a, \
            start_reference_server(server(42.0, 2)) as url_b:
        for r in range(args.repeats):
            root = Path(tmp) / f"r{r}"
            common = {"rate": args.rate, "requests": args.requests}
            runs = {"A": run(url_a, root / "A", seed=r, **common)}
            runs["B"] = run(url_b, root / "B", seed=r, replay=root / "A", **common)
            runs["C"] = run(url_b, root / "C", seed=1000 + r, **common)
            runs["A2"] = run(url_a, root / "A2", seed=r, replay=root / "A", **common)
            runs["A3"] = run(url_a, root / "A3", seed=2000 + r, **common)
            for n in counts:
                for i, hit in enumerate(tally(runs, n)):
                    hits[n][i] += hit
            print(f"repeat {r + 1}/{args.repeats} done", file=sys.stderr)
    print(f"5% slower service (40 -> 42 ms, 2 workers), Poisson {args.rate:g} req/s, {args.repeats} repeats; "
          "share of repeats:")
    print(f"{'requests':>9} " + " ".join(f"{c:>20}" for c in COLUMNS))
    for n in counts:
        print(f"{n:>9} " + " ".join(f"{h / args.repeats:>20.0%}" for h in hits[n]))


if __name__ == "__main__":
    main()
