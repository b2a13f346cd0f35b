"""qbench: load-test and tune queued inference servers (Gradio apps first, plain HTTP second).

The pipeline, one folder a stage (imports flow down the list; `report` reads what `run` and `tune` wrote):

    run/       scenario -> schedule -> payloads -> protocols -> load generator -> records -> summary
    tune/      grid -> search (grid, smart, model) -> launch a server per point -> sweep -> recommendation
    report/    run and sweep folders on disk -> charts, HTML/markdown report, compare
    analysis.py  pandas views of runs and sweeps for notebooks (load_run, load_sweep)
    errors.py    the user-facing failures (per-request problems are error kinds on records)
    cli/       the `qbench` command line: a thin shell over the library, one module per command
    demo.py      `qbench demo`: the main job end to end on an embedded default

The few public entry points are importable from here; they load lazily, so `import qbench` is cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_scenario": "qbench.run.scenario.scenario",
    "run_scenario": "qbench.run.runner",
    "run_sweep": "qbench.tune.sweep.sweep",
    "build_report": "qbench.report.build",
    "compare": "qbench.report.compare",
    "load_run": "qbench.analysis",
    "load_sweep": "qbench.analysis",
}

__all__ = [
    "__version__", "build_report", "compare", "load_run", "load_scenario", "load_sweep", "run_scenario",
    "run_sweep",
]

if TYPE_CHECKING:
    from qbench.analysis import load_run, load_sweep
    from qbench.report.build import build_report
    from qbench.report.compare import compare
    from qbench.run.runner import run_scenario
    from qbench.run.scenario.scenario import load_scenario
    from qbench.tune.sweep.sweep import run_sweep


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qbench' has no attribute {name!r}")
    return getattr(import_module(module), name)
