"""How good are the searches (`qbench sweep --search smart | model | sim`) on real servers, for capacity?

For each workload - a reference server config and an open-loop scenario with a p95 SLO - run the
exhaustive grid (`--search grid`, every point measured with its capacity search: the highest arrival rate
meeting the SLO), then each search from scratch (a fresh sweep folder: nothing reused), and print per
workload and search: trials used / grid size, the chosen point's capacity / the exhaustive optimum's, and
wall time. The chosen point's capacity is read from the exhaustive sweep (the same point measured under
the same conditions as the optimum; the search's own measurement of it is in brackets), so the ratio
compares choices, not two noisy measurements.

Workloads (grids of 48 points; --quick: 6-8 points, shorter probes):
    gpu-like   a batched sleep l(b) = 40 ms + 6 ms x b with 10 % lognormal jitter; the p95 SLO caps the
               batch size, concurrency helps until the SLO binds
    cpu        real CPU work (torch matmuls) on this machine's cores: concurrency barely helps on two
               cores, batching not at all (the workload runs a batch item by item)
    tiny-model the `text-classification` model at size `tiny` (random init, real forward passes on CPU)
    shared     two functions sharing one concurrency_id, a batched `fast` one (swept, under load) and a
               `slow` one with limit 2 that the load never calls: by Gradio's rule a group's limit is
               the lowest among the functions called so far, so `slow` must NOT cap `fast` (a search
               or simulator that took the lowest configured limit would stop at concurrency 2)

Runs the reference server in `live` mode (one server per sweep, reconfigured per point). Long: about
an hour in full on two cores; `--quick` takes a few minutes.

    .venv/bin/python bench/tuning_quality.py --quick
    .venv/bin/python bench/tuning_quality.py --workloads gpu-like,cpu
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.tune.config import SweepOptions, build_config  # noqa: E402
from qbench.tune.sweep import SweepResult, run_sweep  # noqa: E402

SEARCHES = ("smart", "model", "sim")


@dataclass(frozen=True)
class Workload:
    name: str
    server: dict[str, Any]
    grid: list[str]
    quick_grid: list[str]
    slo_s: float
    rate: float  # the scenario's own rate (the point run before each capacity search)

    def files(self, folder: Path) -> Path:
        (folder / "server.yaml").write_text(yaml.safe_dump(self.server))
        scenario = {
            "name": self.name,
            "protocol": "gradio",
            "endpoint": {"api_name": self.server["functions"][0]["api_name"]},
            "payload": {"inputs": [{"text": {"words": [3, 6]}}]},
            "load": {"rate": self.rate, "arrival": "poisson", "duration": 3, "timeout": 10},
            "slo": {"p95_latency_s": self.slo_s},
            "sweep": {"server": {"config": "server.yaml"}, "warmup": 0.3},
        }
        path = folder / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        return path


def _fn(api: str, workload: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"api_name": api, "workload": workload, "params": params, **extra}


WORKLOADS = [
    Workload(
        "gpu-like",
        {"functions": [_fn("predict", "sleep", {"base_ms": 40, "per_item_ms": 6,
                                                "jitter": {"dist": "lognormal", "sigma": 0.1, "seed": 1}},
                           batch=True, max_batch_size=8, concurrency_limit=1)]},
        ["concurrency_limit=1,2,3,4", "max_batch_size=1,2,4,8,16,32", "max_threads=2,40"],
        ["concurrency_limit=1,2", "max_batch_size=1,4,16,32"],
        slo_s=0.4, rate=20,
    ),
    Workload(
        "cpu",
        {"functions": [_fn("predict", "cpu", {"n": 512, "repeats": 2}, batch=True, max_batch_size=4,
                           concurrency_limit=1)]},
        ["concurrency_limit=1,2,3,4", "max_batch_size=1,2,4,8", "max_threads=1,2,40"],
        ["concurrency_limit=1,2", "max_batch_size=1,2,4,8"],
        slo_s=0.25, rate=20,
    ),
    Workload(
        "tiny-model",
        {"functions": [_fn("predict", "text-classification",
                           {"size": "tiny", "labels": ["negative", "positive"], "max_length": 32},
                           batch=True, max_batch_size=8, concurrency_limit=1)]},
        ["concurrency_limit=1,2,3,4", "max_batch_size=1,2,4,8,16,32", "max_threads=2,40"],
        ["concurrency_limit=1,2", "max_batch_size=1,4,16,32"],
        slo_s=0.3, rate=20,
    ),
    Workload(
        "shared",
        {"functions": [
            _fn("fast", "sleep", {"base_ms": 20, "per_item_ms": 4}, batch=True, max_batch_size=4,
                concurrency_id="shared", concurrency_limit=4),
            _fn("slow", "sleep", {"base_ms": 200, "sync": True}, concurrency_id="shared",
                concurrency_limit=2),
        ]},
        ["concurrency_limit=1,2,3,4", "max_batch_size=1,2,4,8,16,32", "max_threads=1,40"],
        ["concurrency_limit=1,2,4", "max_batch_size=1,8"],
        slo_s=0.2, rate=30,
    ),
]


def sweep(path: Path, out: Path, grid: list[str], search: str, quick: bool) -> tuple[SweepResult, float]:
    options = SweepOptions(
        str(path), grid=grid, search=search, live=True, objective="capacity",
        duration=0.8 if quick else 3.0, capacity_trials=3 if quick else 5,
        capacity_duration=1.0 if quick else 3.0, capacity_tolerance=0.2 if quick else 0.1,
        out_root=str(out),
    )
    started = time.monotonic()
    result = run_sweep(build_config(options))
    return result, time.monotonic() - started


def capacity_of(result: SweepResult, point_id: str) -> float | None:
    return next((r.capacity_rps for r in result.results if r.point_id == point_id), None)


def run_workload(workload: Workload, out: Path, quick: bool) -> list[str]:
    folder = out / workload.name
    folder.mkdir(parents=True, exist_ok=True)
    path = workload.files(folder)
    grid = workload.quick_grid if quick else workload.grid
    full, full_s = sweep(path, folder / "reports", grid, "grid", quick)
    best = full.recommendation.winner
    optimum = best.capacity_rps if best and best.capacity_rps else None
    size = len(full.results)
    lines = [f"{workload.name:<11} {'grid':<6} {size:>3}/{size:<3} {best.point_id if best else '-':<16} "
             f"{_f(optimum):>7} {'1.00':>6} {'':>8} {full_s:>7.0f}"]
    for search in SEARCHES:
        found, wall = sweep(path, folder / "reports", grid, search, quick)
        chosen = found.recommendation.winner
        own = chosen.capacity_rps if chosen else None
        in_grid = capacity_of(full, chosen.point_id) if chosen else None
        ratio = in_grid / optimum if in_grid is not None and optimum else None
        lines.append(f"{'':<11} {search:<6} {found.search.trials:>3}/{size:<3} "
                     f"{chosen.point_id if chosen else '-':<16} {_f(in_grid):>7} {_ratio(ratio):>6} "
                     f"{'(' + _f(own) + ')':>8} {wall:>7.0f}")
    return lines


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> None:
    raw_help = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw_help)
    parser.add_argument("--quick", action="store_true", help="8-point grids, short probes (a few minutes)")
    parser.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS),
                        help="comma-separated subset of: " + ", ".join(w.name for w in WORKLOADS))
    parser.add_argument("--out", type=Path, default=None, help="keep the sweep folders here")
    args = parser.parse_args(argv)
    chosen = [w for w in WORKLOADS if w.name in args.workloads.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="qbench-tuning-quality-"))
    kind = "quick" if args.quick else "full"
    print(f"{kind} run; sweeps under {out}; capacity objective (req/s meeting the p95 SLO)")
    print(f"{'workload':<11} {'search':<6} {'trials':>7} {'chosen point':<16} {'cap/s':>7} {'/opt':>6} "
          f"{'(own)':>8} {'wall s':>7}")
    for workload in chosen:
        for line in run_workload(workload, out, args.quick):
            print(line, flush=True)


if __name__ == "__main__":
    main()
