"""The values every later stage shares and the files that hold them: result.py (PointResult), constraints.py
(the SLO and constraints), ceiling.py (Probe, Capacity, their short forms); point_file.py, capacity_file.py
and sweep_info.py: point.json, capacity.json and sweep.json as data. Design:
docs/design/search-points-verdicts.md."""
