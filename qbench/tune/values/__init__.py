"""The values every later stage shares, and the files that hold them: what a point and a probe measured
(each a qbench.run.results.figures.Figures with its own fields), the constraints they are held to, and
point.json, capacity.json and sweep.json as data (what the commands write and `qbench report` reads).

    result.py        PointResult: one grid point's figures, status, memory, capacity and knob check
    constraints.py   the SLO and constraints (Constraints), read from a scenario and the command line
    capacity.py      Probe, Capacity and the short forms a point and capacity.json carry
    point_file.py    points/<id>/point.json as data: PointFile, read_point_file (tolerant)
    capacity_file.py capacity.json as data: what `qbench capacity` writes and `qbench report` reads
    sweep_info.py    sweep.json as data: what `qbench sweep` writes and `qbench report` reads
"""
