"""The servers a tuning stage measures: launched, reconfigured, balanced, watched, let settle.

    server_process.py  a server in a child process: spawn, readiness, log, stop; the reference server
    preloaded.py       a preloaded interpreter that starts Python servers by forking (imports paid once)
    balancer.py        replicas behind a local nginx: `serve --replicas`, `balance`
    app_process.py     the user's own app, one process per point (`--launch CMD`, `--app FILE`)
    resources.py       peak RSS of a point's server process tree; memory from its /status
    settle.py          between two runs: wait until the queue the first one left has drained
    apphook/           the startup hook that puts a point's knobs into the user's unmodified app
"""
