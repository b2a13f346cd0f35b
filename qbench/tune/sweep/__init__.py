"""`qbench sweep`: the run pipeline once per server configuration, then a recommendation.

    config.py          CLI options + the scenario's sweep: section -> SweepConfig
    point_runs.py      a sweep's point as a run: its overrides (client knobs, duration, warm-up, SLO)
    confirm.py         the sustained confirmation of a sweep's capacity (winner, re-ranked when it fails)
    point_capacity.py  one point's capacity search on its own server (and one read back from point.json)
    evaluate.py        each point on its server (by mode): its repeats, knob check, resources, point.json
    winner.py          the winner's capacity after the ranking (saved, confirmed or measured now)
    advice.py          what the recommendation says beside the ranking: code, paired comparison, notes
    outputs.py         the sweep's files as data: sweep.json, --resume's points, sweep.parquet, recommendation
    command.py         run_sweep: the orchestration, and the sweep directory's layout
    console.py         what `qbench sweep` shows: progress, the ranked table, the answer
"""
