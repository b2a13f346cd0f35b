"""Which points of a grid to measure: smart.py (the whole grid, or smart search by hill climbing),
batch_model.py (the fitted batch-latency model), fit.py (what the fitted searches share),
by_model.py (model search), simulate.py (a simulation of the queue) and by_simulation.py (simulator search).
Design: docs/design/search-points-verdicts.md."""
