"""How the load is sent: plan x payloads x protocol -> one RequestRecord per request.

    loadgen.py        the load generator: open and closed loop, journeys, live stats and stop hooks
    waker.py          the open-loop dispatcher's clock: wake at an exact instant without polling
    mix.py            several endpoints in one run (`mix:`, multi-endpoint traces); journeys' lengths
    executor.py       one interface for where the generator runs: split the plan, run a part, merge parts,
                      account for a lost worker; LocalExecutor (this process)
    processes.py      the same parts in several processes of this machine (load.processes)
    ray_executor.py   the same parts in Ray actors, one per node (load.executor: ray)
    clocksync.py      NTP-style clock offset of a remote node (min round trip of several)
"""
