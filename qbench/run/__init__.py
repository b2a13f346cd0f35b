"""Run one load test: the pipeline behind `qbench run`, in data-flow order.

    scenario.py    Scenario: YAML -> validated config (target, endpoint, payload, load, slo)
    schedule.py    load section -> Plan: intended send offsets (open loop) or user loops (closed loop)
    trace.py       recorded schedules: a trace file or a past run's intended times (load.trace/replay)
    trace_formats.py  nginx/uvicorn logs, HAR, Mooncake -> trace files; a trace's shape
    payloads.py    payload section -> seeded request inputs (text, image, audio, files...)
    protocols/     one module per wire protocol (gradio queue over SSE, plain http, openai)
    payload_specs.py  generators for a form's inputs (choices, chat history, generated files)
    mix.py         several endpoints in one run (`mix:`, multi-endpoint traces); journeys' lengths
    credentials.py the scenario's `auth:` section: environment references, a run's Secrets
    loadgen.py     the load generator: plan x payloads x protocol -> one RequestRecord per request
    waker.py       the open-loop dispatcher's clock: wake at an exact instant without polling
    executor.py    one interface for where the generator runs: split the plan, run a part, merge parts,
                   account for a lost worker; LocalExecutor (this process)
    processes.py   the same parts in several processes of this machine (load.processes)
    ray_executor.py  the same parts in Ray actors, one per node (load.executor: ray)
    clocksync.py   NTP-style clock offset of a remote node (min round trip of several)
    failfast.py    stop a run whose opening requests all fail the same way, and say why
    control.py     the control plane over httpx: /config, /status, /admin/config, readiness probes
    runner.py      run_scenario: discovery, executor, run directory (run.json, records, summary.json)
    run_info.py    RunInfo: run.json as data (writer's field names, tolerant reader for old folders)
    outcome.py     RunOutcome: how a run ended (stop, failed opening, lost workers, SLO); its exit code
    options.py     `qbench run` as a library call: RunOptions -> overrides -> the scenario, run
    soak.py        `qbench soak`: a long run with the server's health sampled, a verdict per signal
    health.py      the soak's sampler (process tree, /status, file cache, qbench itself) and stuck test
    drift.py       does a series drift? slope per 1,000 requests and per hour with its interval, bounds
    files.py       output folders' names (runs, sweeps, capacity) and the one masked, atomic JSON writer
    records.py     RequestRecord, the flat contract with every later stage; JSONL and Parquet files
    server_phases.py  the server's own phase timings (Gradio's profiling traces, /monitoring/summary)
                   read during and after the run and joined onto the records by event_id
    summary.py     records -> Summary: percentiles per phase, goodput, error kinds, SLO verdict
    steady.py      did the server keep up? steady state from records, and the same test live
    finding.py     Finding: one sentence about where the limit was
    diagnose.py    where was the limit: records (+ the server's settings, usage, phases) -> findings
    diagnose_phases.py  where the time went inside the server: its phase medians -> findings
    diagnose_mix.py  the same per function, for a mix of endpoints
    app_errors.py  an app that raised on most requests, or events still running at the end, explained
    alongside.py   a mix entry that starts later: the others' latency before and after it joined
    paired.py      two runs on one schedule, request by request (block bootstrap, Wilcoxon)
    run_console.py the live progress line and the summary table
    init.py        `qbench init`: a scenario drafted from the app's own API
    init_yaml.py   the commented YAML `qbench init` writes
"""
