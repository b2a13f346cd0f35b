"""The qbench command line: a thin shell over the library, one module per command.

Each command is a dataclass of its options and a handler taking one value of it (app.command); the
handler builds the library's config, calls one library function, renders the result with rich, and a
QbenchError becomes `error: <message>` and its exit code (app.exits_on_error). No logic lives here.

    app.py       the Typer app, the one QbenchError handler, commands declared by their options' type
    shared.py    options several commands take (credentials, --api, --set, --slo...), a scenario from
                 the app
    serve.py     qbench serve (the reference server, or replicas behind nginx), qbench balance
    init.py      qbench init: a scenario from the app's own API
    run.py       qbench run, and a finished run's rendering
    soak.py      qbench soak: hours of steady load, the server's health judged
    sweep.py     qbench sweep: knobs swept, points ranked, settings recommended
    capacity.py  qbench capacity: the highest rate meeting the SLO
    plan.py      qbench plan: replicas for a peak
    report.py    qbench report, qbench compare
    demo.py      qbench demo
    trace.py     qbench trace import / show

Each handler imports its library inside it, the only imports in functions here: for start-up time,
`qbench --help` takes 0.14 s, 1.8 s with every command's library imported (measured 2026-11-28 on the
2-core box: pandas, matplotlib, aiohttp, pyarrow, torch for serve).
"""

from __future__ import annotations

from qbench.cli import capacity, demo, init, plan, report, run, serve, soak, sweep, trace
from qbench.cli.app import app

__all__ = ["app", "capacity", "demo", "init", "plan", "report", "run", "serve", "soak", "sweep", "trace"]
