"""The qbench command line: a thin shell over the library, one module per command (run.py, serve.py,
init.py, soak.py, sweep.py, capacity.py, plan.py, report.py, demo.py, trace.py), each declared by a dataclass
of its options (app.py); shared.py holds shared options. Handlers import their library inside them."""

from __future__ import annotations

from qbench.cli import capacity, demo, init, plan, report, run, serve, soak, sweep, trace
from qbench.cli.app import app

__all__ = ["app", "capacity", "demo", "init", "plan", "report", "run", "serve", "soak", "sweep", "trace"]
