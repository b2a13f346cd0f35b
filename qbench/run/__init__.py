"""Run one load test: the pipeline behind `qbench run`, one room per question, in data-flow order.

    scenario/      what is sent: the scenario file, its payloads, schedule and recorded traces
    protocols/     how one request goes on the wire (gradio queue over SSE, plain http, openai, mcp...)
    load/          how the load is sent: the generator, the mix of endpoints, where it runs
    results/       what came back: summaries, the server's own phases, steadiness, run.json, outcome
    diagnose/      what it means: where the limit was, in sentences
    soak/          over hours: the server's health sampled, drift judged

    records.py     RequestRecord, the flat contract with every later stage; JSONL and Parquet files
    record_spill.py  records.parquet written as the run goes: spilled as records finish, sealed at the end
    columns.py     the records as numpy columns, from the records or read from disk a few at a time
    gap_histogram.py  a record's inter-token gaps as a compact, mergeable log-bucket histogram
    json_values.py the one tolerant reader of each kind of JSON value read back (run.json, /status...)
    control.py     the control plane over httpx: /config, /status, /admin/config, readiness probes
    summary_file.py  summary.json as one typed value: its one writer and its one reader
    runner.py      run_scenario: discovery, executor, run directory (run.json, records, summary.json)
    options.py     `qbench run` as a library call: RunOptions -> overrides -> the scenario, run
    run_console.py the live progress line and the summary table
    init.py        `qbench init`: a scenario drafted from the app's own API
    init_yaml.py   the commented YAML `qbench init` writes

Imports point one way: scenario <- protocols <- results <- load <- diagnose <- soak, with json_values.py,
records.py and control.py below them all and the shells (runner, options, init, run_console) above
(tests/test_layout.py holds this).
"""
