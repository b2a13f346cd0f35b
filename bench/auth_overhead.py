"""What do credentials cost the load generator? Client CPU per request and latency, with none, a bearer
token, and a login cookie plus a bearer and two headers (every request goes through the credentials
middleware, qbench.run.protocols.login).

Two reference servers in subprocesses (echo, unlimited concurrency): one open, one with
`auth: {users, tokens}`; the cases alternate within each repeat, so they share the host's noise.
Prints per case the medians over the repeats of client CPU per request (the generator process only)
and latency p50, and the ratio to "none".

    .venv/bin/python bench/auth_overhead.py [--repeats 5] [--rate 100] [--duration 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.run.pipeline import run_scenario  # noqa: E402
from qbench.run.scenario.schema import parse_scenario  # noqa: E402
from qbench.tune.servers.server_process import start_reference_server

FUNCTIONS = {"functions": [{"api_name": "echo", "workload": "echo", "concurrency_limit": None}]}
CASES: dict[str, dict[str, Any] | None] = {
    "none": None,
    "bearer": {"bearer": "tok"},
    "login+bearer+2 headers": {
        "login": {"username": "alice", "password": "pw"},
        "bearer": "tok",
        "headers": {"X-Api-Key": "k", "X-Tenant": "t"},
    },
}


def one_run(
    url: str, auth: dict[str, Any] | None, rate: float, duration: float, out: Path
) -> tuple[float, float]:
    """(client CPU per request in us, latency p50 in ms) of one run; every request must succeed."""
    raw = {
        "endpoint": {"api_name": "echo"},
        "payload": {"inputs": [{"value": "hi"}]},
        "load": {"rate": rate, "duration": duration, "timeout": 10},
        **({"auth": auth} if auth else {}),
    }
    result = run_scenario(parse_scenario(raw), target=url, out_dir=out, live=False)
    failed = [r.error_message for r in result.records if not r.ok]
    if failed or not result.records:
        raise SystemExit(f"{len(failed)} request(s) failed, e.g. {failed[:1]}")
    generator = result.run_info.generator
    assert generator is not None and generator.cpu_s is not None  # written at the end of every run
    cpu_us = generator.cpu_s / len(result.records) * 1e6
    p50 = result.summary.phase("latency_s").p50
    return cpu_us, (p50 or 0.0) * 1e3


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=3.0)
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    locked = {**FUNCTIONS, "auth": {"users": {"alice": "pw"}, "tokens": ["tok"]}}
    with (
        start_reference_server(FUNCTIONS) as open_url,
        start_reference_server(locked) as locked_url,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for i in range(args.repeats):
            for k, (name, auth) in enumerate(CASES.items()):
                url = open_url if auth is None else locked_url
                results[name].append(one_run(url, auth, args.rate, args.duration, Path(tmp) / f"{i}-{k}"))
    base = statistics.median(v[0] for v in results["none"])
    requests = int(args.rate * args.duration)
    print(f"{args.repeats} repeats x {requests} requests at {args.rate:g} req/s (medians)")
    print(f"{'case':<24} {'client CPU/request':>19} {'ratio':>6} {'latency p50':>12}")
    for name, values in results.items():
        cpu = statistics.median(v[0] for v in values)
        p50 = statistics.median(v[1] for v in values)
        print(f"{name:<24} {cpu:>16.0f} us {cpu / base:>6.2f} {p50:>9.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
