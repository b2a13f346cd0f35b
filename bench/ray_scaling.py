"""Does the load scale from 1 to 2 Ray actors, and what does Ray cost over `load.processes`?

Against the reference server (a subprocess, `echo` preset, Gradio protocol), the same closed-loop load
(`--users` users, no think time, `--duration` s; or open loop at `--rate` req/s) runs under four
executors, alternating within each round (`--repeats` rounds; medians shown):

    local      one process (the default executor)
    processes  load.processes: 2 (two processes of this machine)
    ray x1     load.executor: ray, workers: 1
    ray x2     load.executor: ray, workers: 2 (one actor per node, SPREAD)

Ray runs on a local 2-node cluster (ray.cluster_utils.Cluster, one CPU per node), so "nodes" share this
machine's cores with the server: on a small host the server, not the generators, may set the req/s.
Columns: ok req/s; the generators' own CPU per request (every worker process summed, from
process_time); their CPU in % of one core; start-up, the run's wall time minus its measured window
(discovery, spawning workers, agreeing on the start); send lag p99 (open loop: how late requests
left; closed loop: ~0, a user sends when it is ready); and for Ray the worst clock-offset bound.

Usage: .venv/bin/python bench/ray_scaling.py [--users 16] [--duration 4] [--repeats 3] [--rate R]
Needs Ray: pip install -e '.[ray]' (exits non-zero naming it when missing).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STORE = 80 * 1024 * 1024  # object store bytes per Ray node
CONFIGS = {
    "local": {},
    "processes x2": {"processes": 2},
    "ray x1": {"executor": "ray", "workers": 1},
    "ray x2": {"executor": "ray", "workers": 2},
}


@dataclass
class Sample:
    rps: float
    cpu_ms_per_request: float
    cpu_percent: float
    startup_s: float
    send_lag_p99_ms: float
    clock_s: float | None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=16, help="closed-loop users (default 16)")
    parser.add_argument("--rate", type=float, default=None, help="open loop at this rate instead")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of load per run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the four executors")
    return parser.parse_args(argv)


def require_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        raise SystemExit("bench/ray_scaling.py needs Ray, which is not installed: pip install -e '.[ray]'")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    require_ray()
    import ray
    from ray.cluster_utils import Cluster

    from qbench.tune.servers.server_process import reference_server_process

    os.environ.setdefault("RAY_worker_niceness", "0")  # as qbench's --ray local: generators at nice 0
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "object_store_memory": STORE})
    try:
        with reference_server_process("echo", cwd=ROOT) as server:
            cluster.add_node(num_cpus=1, object_store_memory=STORE)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
            samples = run_rounds(args, server.base_url)
    finally:
        ray.shutdown()
        cluster.shutdown()
    report(args, samples)


def run_rounds(args: argparse.Namespace, target: str) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for name, extra in CONFIGS.items():
                samples[name].append(measure(args, target, extra, Path(tmp) / f"{k}-{name.replace(' ', '')}"))
                print(f"round {k + 1}/{args.repeats} {name}: {samples[name][-1]}", file=sys.stderr)
    return samples


def measure(args: argparse.Namespace, target: str, extra: dict[str, Any], out: Path) -> Sample:
    from qbench.run.pipeline import run_scenario
    from qbench.run.scenario.schema import parse_scenario

    shape: dict[str, Any] = {"rate": args.rate} if args.rate else {"users": args.users}
    spec = parse_scenario({
        "name": "ray-scaling", "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"text": {"words": [4, 8]}}]},
        "load": {**shape, "duration": args.duration, "timeout": 10, **extra},
    })
    started = time.perf_counter()
    result = run_scenario(spec, target=target, out_dir=out, live=False)
    wall = time.perf_counter() - started
    s, g = result.summary, result.summary.generator
    if s.completed_ok == 0:
        raise SystemExit(f"{out.name}: no request succeeded ({s.errors_by_kind}); is the server up?")
    return Sample(
        rps=s.throughput_rps,
        cpu_ms_per_request=1000 * (g.cpu_s or 0.0) / max(s.sent, 1),
        cpu_percent=g.cpu_percent or 0.0,
        startup_s=wall - s.duration_s,
        send_lag_p99_ms=1000 * (s.phase("send_lag_s").p99 or 0.0),
        clock_s=g.clock_uncertainty_s,
    )


def report(args: argparse.Namespace, samples: dict[str, list[Sample]]) -> None:
    load = f"open loop {args.rate:g} req/s" if args.rate else f"{args.users} closed-loop users"
    print(f"\n{load}, {args.duration:g} s per run, median of {args.repeats} alternating rounds\n")
    print(f"{'executor':<13} {'ok req/s':>9} {'CPU ms/req':>11} {'gen CPU %':>10} {'start-up s':>11} "
          f"{'lag p99 ms':>10} {'clock +-':>9}")
    medians = {}
    for name, runs in samples.items():
        m = {f: statistics.median(getattr(r, f) for r in runs)
             for f in ("rps", "cpu_ms_per_request", "cpu_percent", "startup_s", "send_lag_p99_ms")}
        clocks = [r.clock_s for r in runs if r.clock_s is not None]
        clock = f"{statistics.median(clocks) * 1000:.2f} ms" if clocks else "-"
        medians[name] = m
        print(f"{name:<13} {m['rps']:>9.0f} {m['cpu_ms_per_request']:>11.3f} {m['cpu_percent']:>10.0f} "
              f"{m['startup_s']:>11.1f} {m['send_lag_p99_ms']:>10.2f} {clock:>9}")
    ray2, proc2, ray1 = medians["ray x2"], medians["processes x2"], medians["ray x1"]
    print(f"\nratio: ray x2 / ray x1 req/s {ray2['rps'] / ray1['rps']:.2f}; "
          f"ray x2 / processes x2: req/s {ray2['rps'] / proc2['rps']:.2f}, "
          f"CPU per request {ray2['cpu_ms_per_request'] / proc2['cpu_ms_per_request']:.2f}, "
          f"start-up +{ray2['startup_s'] - proc2['startup_s']:.1f} s")


if __name__ == "__main__":
    main()
