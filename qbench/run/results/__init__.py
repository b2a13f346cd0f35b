"""What came back: records -> summaries, the server's own view, and how the run ended.

    summary.py        records -> Summary: percentiles per phase, goodput, error kinds, SLO verdict
    figures.py        Figures: the run's headline figures (rates, latency percentiles, error rate) that
                      every tuning stage's value embeds, declared once
    server_phases.py  the server's own phase timings (Gradio's profiling traces, /monitoring/summary)
                      read during and after the run and joined onto the records by event_id
    device.py         the served rate beside what the forward passes could serve, and the GPU's busy share
    batches.py        which requests a client saw start together (one batch)
    steady.py         did the server keep up? steady state from records, and the same test live
    serial_trend.py   a straight-line trend with a 95% interval that holds for autocorrelated samples
    failfast.py       stop a run whose opening requests all fail the same way, and say why
    run_info.py       RunInfo: run.json as data (writer's field names, tolerant reader for old folders)
    outcome.py        RunOutcome: how a run ended (stop, failed opening, lost workers, SLO); its exit code
    alongside.py      a mix entry that starts later: the others' latency before and after it joined
    paired.py         two runs on one schedule, request by request (block bootstrap, Wilcoxon)
    files.py          output folders' names (runs, sweeps, capacity) and the one masked, atomic JSON writer
"""
