"""What a run's records say beyond its figures, each a value with the analysis that makes it (imports
only run/).

    overload.py      past the capacity: does throughput hold as the queue grows; the ETA's truth
    degradation.py   did the server get slower during a capacity search? the first rate measured again
    metastable.py    service time rising with the queue: the rate a burst cannot tip, and its max_size
"""
