"""Tune server settings: the pipeline behind `qbench sweep`, `capacity`, `plan` and `serve --replicas`.

Rooms, bottom first; each imports only run/ and the rooms before it (tests/test_layout.py keeps the
order; docs/development.md draws it):

    knobs/      the settings being tuned: Gradio's knobs per release, the grid, the server's settings
    verdicts/   what a run's records say beyond its figures: overload, degradation, metastability
    values/     what every later stage shares: a point's result, a probe, the constraints, and the files
                (point.json, capacity.json, sweep.json) as data
    ranking/    point results + constraints -> the recommendation and the code to paste
    servers/    launching, reconfiguring, balancing and watching the servers measured; the app hook
    points/     one point measured (every stage's run goes through here), and its knob check
    search/     which points to measure: the whole grid, smart, model or simulator search
    capacity/   `qbench capacity`: the capacity search against a live server
    sweep/      `qbench sweep`: the orchestration, its config, the confirmation, its console
    plan/       `qbench plan`: replicas, users and cost from one replica's capacity

Every value that carries a run's figures (throughput, goodput, p50-p99, mean, error rate) is a
qbench.run.results.figures.Figures with its own fields: the figures are declared once.
"""
