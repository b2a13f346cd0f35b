"""`qbench plan`: a capacity plan from one replica's capacity.

    replicas.py      replicas, users per replica, cost for a peak of users (arithmetic)
    command.py       `qbench plan`: one replica's capacity folder -> the plan -> plan.json
    console.py       what `qbench plan` shows
"""
