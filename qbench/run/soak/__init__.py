"""Over hours: `qbench soak`, a long run with the server's health sampled and a verdict per signal.

    command.py the soak run: the scenario held for a duration, samples, verdicts, soak.json
    health.py  the sampler (process tree, /status, file cache, qbench itself) and the stuck-queue test
    drift.py   does a series drift? flat, growing, bounded or can't tell yet, from its trend's interval"""
