"""Tune server settings: the pipeline behind `qbench sweep`, run once per configuration.

    config.py        CLI options + the scenario's sweep: section -> SweepConfig
    grid.py          knob axes and linked variables -> the points to measure
    server_process.py  a server in a child process: spawn, readiness, log, stop; the reference server's
                     one subprocess starter (start_reference_server), live reconfiguration
    balancer.py      replicas behind a local nginx (session affinity, ip_hash or none): `serve --replicas`
    app_process.py   the user's own app per point (`--launch CMD`): knobs as placeholders, env, the hook
    server_knobs.py  a point's knobs -> reference server settings (relaunch) or an /admin/config body (live)
    resources.py     peak RSS of a point's server process tree; memory from its /status
    apphook/         the startup hook that puts a point's knobs into the user's unmodified Gradio app
    knobcheck.py     did a point's knobs take effect? the hook's record and the point's records
    settle.py        between two runs: wait until the queue the first one left has drained
    versions.py      Gradio's queue knobs per release, their equivalents, the code to paste
    point.py         one point: overrides -> qbench.run -> PointResult (runaway queues stop early)
    search.py        which points to measure: the whole grid or smart search
    capacity.py      capacity: the highest rate that is steady and meets the SLO (bracket and bisect)
    capacity_run.py  capacity probes against a live server; `qbench capacity` and its folder
    capacity_file.py capacity.json as data: what `qbench capacity` writes and `qbench report` reads
    confirm.py       the sustained confirmation of a sweep's capacity (winner, re-ranked when it fails)
    plan.py          a capacity plan: replicas, users per replica, cost for a peak of users (arithmetic)
    plan_run.py      `qbench plan`: one replica's capacity folder -> the plan -> plan.json
    overload.py      past the capacity: does throughput hold as the queue grows; the ETA's truth
    degradation.py   did the server get slower during a capacity search? the first rate measured again
    metastable.py    service time rising with the queue: the rate a burst cannot tip, and its max_size
    batch_model.py   a fitted batch-latency model and its predictions
    search_fit.py    what the model and simulator searches share: observations, design points, state
    search_model.py  model search: fit a few points, measure only the best predicted ones
    simulate.py      a discrete-event simulation of the queue (the reference server's rules)
    search_sim.py    simulator search: fit, simulate the whole grid, measure the best predicted few
    recommend.py     point results + constraints -> Recommendation with Gradio code
    sweep.py         run_sweep: orchestration and the sweep directory
    point_file.py    points/<id>/point.json as data: PointFile, read_point_file (tolerant)
    sweep_info.py    sweep.json as data: what `qbench sweep` writes and `qbench report` reads
    tune_console.py  what `qbench sweep`, `capacity` and `plan` show: progress, tables, the answer
"""
