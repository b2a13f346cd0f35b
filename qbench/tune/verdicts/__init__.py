"""What a run's records say beyond its figures, each a value with the analysis that makes it (imports only
run/): overload.py (past the capacity: does throughput hold; the ETA's truth), degradation.py (did the server
slow down during a capacity search) and metastable.py (service rising with the queue: the rate a burst cannot
tip). Design: docs/design/search-points-verdicts.md."""
