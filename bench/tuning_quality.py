"""How good are the searches (`qbench sweep --search smart | model | sim`) on real servers, for capacity?

For each workload - a reference server config and an open-loop scenario with a p95 SLO - run the
exhaustive grid (`--search grid`, every point measured with its capacity search: the highest arrival rate
meeting the SLO), then each search from scratch (a fresh sweep folder: nothing reused), and print per
workload and search: trials used / grid size, the chosen point's capacity / the exhaustive optimum's, and
wall time. The chosen point's capacity is read from the exhaustive sweep (the same point measured under
the same conditions as the optimum; the search's own measurement of it is in brackets), so the ratio
compares choices, not two noisy measurements. The optimum is the point with the highest capacity in the
exhaustive sweep (its recommendation may prefer a point tied with it). A last line per workload says how
far one point's capacity moves between the sweeps of the table (points measured in two or more): the
noise the ratios sit in.

Workloads (grids of 48 points; --quick: 6-8 points, shorter probes):
    gpu-like   a batched sleep l(b) = 40 ms + 6 ms x b with 10 % lognormal jitter; the p95 SLO caps the
               batch size, concurrency helps until the SLO binds
    cpu        real CPU work (torch matmuls) on this machine's cores: concurrency barely helps on two
               cores, batching not at all (the workload runs a batch item by item)
    bert-small the `text-classification` model at size `small` (BERT-small, 4 layers x 512, random init:
               real forward passes on CPU, ~6 ms for one short text, ~3 ms per text in a batch of 8,
               ~4 in a batch of 32 on two cores). Not size `tiny`: its 1 ms forward pass is cheaper than
               the HTTP and queue work around it, so its grid measured the load generator (saturated at
               ~1,500 req/s on two cores), not the model
    shared     two functions sharing one concurrency_id, a batched `fast` one (swept, under load) and a
               `slow` one with limit 2 that the load never calls: by Gradio's rule a group's limit is
               the lowest among the functions called so far, so `slow` must NOT cap `fast` (a search
               or simulator that took the lowest configured limit would stop at concurrency 2)

Runs the reference server in `live` mode (one server per sweep, reconfigured per point). Long: about
1.5-2 hours in full on two cores (16 minutes per exhaustive grid, 2-11 per search); `--quick` takes a
few minutes.

    .venv/bin/python bench/tuning_quality.py --quick
    .venv/bin/python bench/tuning_quality.py --workloads gpu-like,cpu
    .venv/bin/python bench/tuning_quality.py --out DIR --reuse-grid --searches sim   # searches again
    .venv/bin/python bench/tuning_quality.py --out DIR --table                       # print, run nothing
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.tune.sweep.command import run_sweep
from qbench.tune.sweep.config import CapacityOptions, SweepOptions, build_config

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
        slo_s=0.3, rate=20,
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
        "bert-small",
        {"functions": [_fn("predict", "text-classification",
                           {"size": "small", "labels": ["negative", "positive"], "max_length": 32},
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


def sweep(path: Path, out: Path, grid: list[str], search: str, quick: bool) -> Kept:
    options = SweepOptions(
        str(path), grid=grid, search=search, live=True, objective="capacity",
        duration=0.8 if quick else 3.0,
        capacity=CapacityOptions(
            trials=3 if quick else 5, tolerance=0.2 if quick else 0.1, duration=1.0 if quick else 3.0,
            confirm_duration=0,  # every point's capacity from the same probes: the winner's is not confirmed
        ),
        out_root=str(out),
    )
    started = time.monotonic()
    result = run_sweep(build_config(options))
    (result.sweep_dir / WALL_FILE).write_text(json.dumps({"wall_s": time.monotonic() - started}))
    return Kept.read(result.sweep_dir)


WALL_FILE = "bench-wall.json"


@dataclass(frozen=True)
class Kept:
    """What the table needs from one kept sweep folder (its recommendation.json)."""

    mode: str
    trials: int
    chosen: str | None  # the recommendation's winner
    capacities: dict[str, float | None]  # every measured point's capacity (None: not feasible)
    wall_s: float

    @classmethod
    def read(cls, folder: Path) -> Kept:
        rec = json.loads((folder / "recommendation.json").read_text())
        feasible = ("winner", "tied", "feasible")
        capacities = {r["point_id"]: r.get("capacity_rps") if r["verdict"] in feasible else None
                      for r in rec["ranked"]}
        winner = (rec.get("winner") or {}).get("point_id")
        return cls(rec["search"]["mode"], int(rec["search"]["trials"]), winner, capacities, _wall(folder))

    @property
    def best(self) -> str | None:
        """The point with the highest measured capacity (the recommendation may prefer a tied one)."""
        found = [(c, p) for p, c in self.capacities.items() if c is not None]
        return max(found)[1] if found else None

    def capacity(self, point_id: str | None) -> float | None:
        return self.capacities.get(point_id) if point_id else None


def _wall(folder: Path) -> float:
    """The bench's own wall time, else (older folders) first point file to recommendation.json."""
    if (folder / WALL_FILE).exists():
        return float(json.loads((folder / WALL_FILE).read_text())["wall_s"])
    started = min((p.stat().st_mtime for p in folder.glob("points/*/point.json")), default=math.nan)
    return (folder / "recommendation.json").stat().st_mtime - started


def kept_sweep(folder: Path, mode: str) -> Kept | None:
    """The newest sweep of `mode` kept under `folder`."""
    for found in sorted(folder.glob("sweep-*/recommendation.json"), reverse=True):
        kept = Kept.read(found.parent)
        if kept.mode == mode:
            return kept
    return None


def run_workload(workload: Workload, out: Path, quick: bool, reuse: str, searches: list[str]) -> list[str]:
    """`reuse`: "" (run everything), "grid" (read the exhaustive grid, run the searches) or "all"."""
    folder = out / workload.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{workload.name}.yaml" if reuse else workload.files(folder)
    grid = workload.quick_grid if quick else workload.grid
    reports = folder / "reports"
    full = kept_sweep(reports, "grid") if reuse else sweep(path, reports, grid, "grid", quick)
    if full is None:
        raise SystemExit(f"no exhaustive (grid) sweep kept under {reports}")
    optimum = full.capacity(full.best)
    size = len(full.capacities)
    lines = [f"{workload.name:<11} {'grid':<6} {size:>3}/{size:<3} {full.best or '-':<16} "
             f"{_f(optimum):>7} {'1.00':>6} {'':>8} {full.wall_s:>7.0f}"]
    sweeps = [full]
    for search in searches:
        found = kept_sweep(reports, search) if reuse == "all" else sweep(path, reports, grid, search, quick)
        if found is None:
            lines.append(f"{'':<11} {search:<6} not run")
            continue
        sweeps.append(found)
        in_grid = full.capacity(found.chosen)
        ratio = in_grid / optimum if in_grid is not None and optimum else None
        lines.append(f"{'':<11} {search:<6} {found.trials:>3}/{size:<3} {found.chosen or '-':<16} "
                     f"{_f(in_grid):>7} {_ratio(ratio):>6} {'(' + _f(found.capacity(found.chosen)) + ')':>8} "
                     f"{found.wall_s:>7.0f}")
    return [*lines, repeatability(sweeps)]


def repeatability(sweeps: list[Kept]) -> str:
    """How far one point's capacity moves between the sweeps of this table (the noise the ratios sit in):
    for every point measured in two or more of them, max / min - 1."""
    seen: dict[str, list[float]] = {}
    for kept in sweeps:
        for point_id, capacity in kept.capacities.items():
            if capacity:
                seen.setdefault(point_id, []).append(capacity)
    spreads = sorted(max(c) / min(c) - 1 for c in seen.values() if len(c) >= 2)
    if not spreads:
        return f"{'':<11} repeatability: no point was measured in two sweeps"
    p90 = spreads[int(0.9 * (len(spreads) - 1))]
    return (f"{'':<11} repeatability: {len(spreads)} points measured in 2+ sweeps; capacity max/min - 1: "
            f"median {statistics.median(spreads):.0%}, 90th percentile {p90:.0%}")


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
    parser.add_argument("--reuse-grid", action="store_const", const="grid", dest="reuse", default="",
                        help="read the exhaustive grid from the newest grid sweep kept under --out (run the "
                             "searches only)")
    parser.add_argument("--table", action="store_const", const="all", dest="reuse",
                        help="run nothing: print the table from the newest sweeps kept under --out")
    parser.add_argument("--searches", default=",".join(SEARCHES),
                        help="comma-separated subset of: " + ", ".join(SEARCHES))
    args = parser.parse_args(argv)
    names = [w.name for w in WORKLOADS]
    lists = (("--workloads", args.workloads, names), ("--searches", args.searches, SEARCHES))
    for flag, given, known in lists:
        unknown = [n for n in given.split(",") if n not in known]
        if unknown:
            parser.error(f"{flag} {given}: unknown {', '.join(unknown)} (choose from {', '.join(known)})")
    chosen = [w for w in WORKLOADS if w.name in args.workloads.split(",")]
    searches = [s for s in SEARCHES if s in args.searches.split(",")]
    if args.reuse and args.out is None:
        parser.error("--reuse-grid and --table need --out (the folder of an earlier run)")
    out = args.out or Path(tempfile.mkdtemp(prefix="qbench-tuning-quality-"))
    kind = "quick" if args.quick else "full"
    print(f"{kind} run; sweeps under {out}; capacity objective (req/s meeting the p95 SLO)")
    print(f"{'workload':<11} {'search':<6} {'trials':>7} {'chosen point':<16} {'cap/s':>7} {'/opt':>6} "
          f"{'(own)':>8} {'wall s':>7}")
    for workload in chosen:
        for line in run_workload(workload, out, args.quick, args.reuse, searches):
            print(line, flush=True)


if __name__ == "__main__":
    main()
