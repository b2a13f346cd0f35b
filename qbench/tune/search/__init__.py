"""Which points of a grid to measure: search.py (the whole grid, or smart search by hill climbing),
batch_model.py (the fitted batch-latency model), search_fit.py (what the fitted searches share),
search_model.py (model search), simulate.py (a simulation of the queue) and search_sim.py (simulator search).
Design: docs/design/search-points-verdicts.md."""
