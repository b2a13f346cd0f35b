"""Reports on what `run` and `tune` wrote, from folders on disk.

rundir.py reads run and sweep folders, chart_columns.py a run's records as numpy columns for charts;
charts.py, phase_chart.py, sweep_charts.py, capacity_charts.py and soak_charts.py draw the charts;
build.py writes summary.md and report.html (templates/); compare.py compares two runs. Design:
docs/design/load-diagnosis-reports.md."""
