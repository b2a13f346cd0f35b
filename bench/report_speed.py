"""How long `qbench report` takes, by run size: reading records, summarising, each chart, the whole report.

Runs are fabricated (Poisson arrivals on a 2-worker FIFO queue with a bounded queue and some failures,
the generator of the report tests, `tests/report/report_synth.py`) and written as a run folder
(records.parquet + run.json), then reported with `qbench.report.build.build_report`. Times are wall-clock
seconds on this (shared, noisy) machine, after one unmeasured warm-up report;
"whole report" is `build_report` (read + summary + every chart + summary.md + report.html).

Usage:
    .venv/bin/python bench/report_speed.py                 # 1,000 / 10,000 / 50,000 records
    .venv/bin/python bench/report_speed.py --sizes 10000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "report"))

from report_synth import simulate, write_run  # noqa: E402

from qbench.report.build import build_report  # noqa: E402
from qbench.report.chart_columns import RunColumns  # noqa: E402
from qbench.report.charts import RUN_CHARTS  # noqa: E402
from qbench.run.records.schema import read_records  # noqa: E402
from qbench.run.results.summary import summarize  # noqa: E402


def measure(n: int, root: Path) -> dict[str, float]:
    records = simulate(n=n, rate_rps=22, service_s=0.09, max_queue=30, fail_every=50)
    run = write_run(root / f"run-{n}", records)
    times: dict[str, float] = {}
    start = time.perf_counter()
    records = read_records(run)
    times["read"] = time.perf_counter() - start
    start = time.perf_counter()
    summarize(records)
    times["summary"] = time.perf_counter() - start
    data = RunColumns.from_records(records)
    for spec in RUN_CHARTS:
        start = time.perf_counter()
        spec.draw(data).savefig(root / f"{spec.name}.png", dpi=100)
        times[spec.name] = time.perf_counter() - start
    start = time.perf_counter()
    build_report(run)
    times["whole report"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(200, Path(tmp))  # warm-up, not shown: imports, font cache, template loading
        rows = {n: measure(n, Path(tmp)) for n in args.sizes}
    names = list(next(iter(rows.values())))
    print(f"{'records':>8} " + " ".join(f"{name[:12]:>12}" for name in names))
    for n, times in rows.items():
        cells = " ".join(f"{times[name]:12.3f}" for name in names)
        print(f"{n:>8} {cells}")


if __name__ == "__main__":
    main()
