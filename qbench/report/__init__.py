"""Report on what `run` and `tune` wrote: everything here starts from folders on disk.

    rundir.py        run and sweep folders -> LoadedRun (summary.json read back, records as columns)
    columns.py       a run's records as numpy columns for charts (a stated sample for scatters)
    charts.py        run charts (latency distributions, over time, in flight, errors, ETA, send lag)
    phase_chart.py   where the time went: a stacked bar of the server's phases per endpoint
    sweep_charts.py  sweep charts (heatmaps, Pareto front, per-point distributions)
    capacity_charts.py  capacity charts: the knee and what happened past the capacity
    soak_charts.py   a soak run's "over time" charts: each signal's series, trend line and verdict
    build.py         build_report: charts + summary.md + a self-contained report.html
    compare.py       compare two runs (or sweeps' winners) and flag regressions
    templates/       the jinja2 templates of summary.md and report.html
"""
