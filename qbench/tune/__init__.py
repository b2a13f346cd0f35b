"""Tune server settings: the pipeline behind `qbench sweep`, run once per configuration.

    config.py        CLI options + the scenario's sweep: section -> SweepConfig
    grid.py          knob axes and linked variables -> the points to measure
    launch.py        a server per point: relaunch, live reconfigure, the user's own app, or a fixed target
    point.py         one point: overrides -> qbench.run -> PointResult (runaway queues stop early)
    search.py        which points to measure: the whole grid or smart search; capacity bisection
    batch_model.py   a fitted batch-latency model and its predictions
    search_model.py  model search: fit a few points, measure only the best predicted ones
    simulate.py      a discrete-event simulation of the queue (the reference server's rules)
    search_sim.py    simulator search: fit, simulate the whole grid, measure the best predicted few
    recommend.py     point results + constraints -> Recommendation with Gradio code
    sweep.py         run_sweep: orchestration and the sweep directory
    console.py       the sweep's progress bar and result tables
"""
