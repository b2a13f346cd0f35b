"""qbench: load-test and tune queued inference servers (Gradio apps first, plain HTTP second).

One folder a stage, imports flowing down: run/ (scenario -> records -> summary), tune/ (sweeps, capacity,
recommendations), report/ (charts, reports, compare, from folders on disk); beside them analysis.py (pandas
views), errors.py (user-facing failures), cli/ (the command line), demo.py. Entry points here load lazily."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_scenario": "qbench.run.scenario.schema",
    "run_scenario": "qbench.run.pipeline",
    "run_sweep": "qbench.tune.sweep.command",
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
    from qbench.run.pipeline import run_scenario
    from qbench.run.scenario.schema import load_scenario
    from qbench.tune.sweep.command import run_sweep


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's `__getattr__` (PEP 562) for its face: each public name imported from its module
    (`homes`: name -> module) on each use, never cached, so a test that patches the module is seen."""

    def attribute(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return attribute


__getattr__ = lazy_names("qbench", _EXPORTS)
