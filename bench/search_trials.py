"""How many grid points do smart and model search measure to find the full grid's winner?

Evaluator: the closed-form sleep workload of tests/tune/search/test_smart.py (a batch of b costs
(t0 + a*b) * (1 + contention*(k-1)) s on k = min(concurrency_limit, max_threads) workers, 2*k*B users,
memory 300 + 20*k*B + 2*threads MB under a 2000 MB ceiling) over its 240-point grid, for each of its
models. No server: this measures the search strategies, not the machine.

    .venv/bin/python bench/search_trials.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.tune.knobs.grid import Point
from qbench.tune.ranking.recommend import recommend
from qbench.tune.search.batch_model import PointLoad
from qbench.tune.search.by_model import model_search
from qbench.tune.search.smart import full_search, smart_search
from qbench.tune.values.constraints import Constraints
from tests.tune.search.test_smart import GRID, MODELS, SleepModel  # noqa: E402


def describe(point: Point) -> PointLoad:
    c, b, t = (int(point.knobs[k]) for k in ("concurrency_limit", "max_batch_size", "max_threads"))
    k = min(c, t)
    return PointLoad(workers=k, max_batch=b, users=2 * k * b, threads=t)


def main() -> None:
    models = [*MODELS, SleepModel(t0=0.1, a=0.05, contention=0.1, slo_s=0.5)]
    print(f"grid: {GRID.size} points; goodput of each search's winner / the full grid's winner")
    print(f"{'evaluator':<40} {'smart trials':>12} {'goodput':>8} {'model trials':>12} {'goodput':>8}")
    for m in models:
        constraints = Constraints(slo={"p95_latency_s": m.slo_s}, max_memory_mb=2000)
        best = recommend(full_search(GRID, m).results, constraints).winner
        assert best is not None
        row = f"{f't0={m.t0} a={m.a} contention={m.contention} slo={m.slo_s}':<40}"
        for search in (smart_search(GRID, m, constraints), model_search(GRID, m, constraints, describe)):
            winner = recommend(search.results, constraints).winner
            ratio = winner.goodput_rps / best.goodput_rps if winner else 0.0
            row += f" {search.trials:>5} ({search.trials / GRID.size:4.0%}) {ratio:>8.2f}"
        print(row)


if __name__ == "__main__":
    raw_help = argparse.RawDescriptionHelpFormatter
    argparse.ArgumentParser(description=__doc__, formatter_class=raw_help).parse_args()
    main()
