"""`qbench sweep`: the run pipeline once per server configuration, then a recommendation.

    config.py        CLI options + the scenario's sweep: section -> SweepConfig
    point_runs.py    a sweep's point as a run: its overrides (client knobs, duration, warm-up, SLO)
    confirm.py       the sustained confirmation of a sweep's capacity (winner, re-ranked when it fails)
    sweep.py         run_sweep: orchestration and the sweep directory
    console.py       what `qbench sweep` shows: progress, the ranked table, the answer
"""
