"""The servers a tuning stage measures: launched, reconfigured, balanced, watched, let settle.

    server_process.py  a server in a child process: spawn, readiness, log, stop; the reference server's
                     one subprocess starter (start_reference_server), live reconfiguration
    preloaded.py     a preloaded interpreter that starts Python servers by forking (imports paid once),
                     which spawn uses where QBENCH_PRELOADED names one (the test suite's)
    balancer.py      replicas behind a local nginx (session affinity, ip_hash or none): `serve --replicas`
    app_process.py   the user's own app per point (`--launch CMD`): knobs as placeholders, env, the hook
    resources.py     peak RSS of a point's server process tree; memory from its /status
    settle.py        between two runs: wait until the queue the first one left has drained
    apphook/         the startup hook that puts a point's knobs into the user's unmodified Gradio app
"""
