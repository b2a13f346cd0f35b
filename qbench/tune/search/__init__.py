"""Which points of a grid to measure: the whole grid, smart search, or a fitted model or simulation that
measures only the best predicted few.

    search.py        the whole grid or smart search (coordinate hill climbing)
    batch_model.py   a fitted batch-latency model and its predictions
    search_fit.py    what the model and simulator searches share: observations, design points, state
    search_model.py  model search: fit a few points, measure only the best predicted ones
    simulate.py      a discrete-event simulation of the queue (the reference server's rules)
    search_sim.py    simulator search: fit, simulate the whole grid, measure the best predicted few
"""
