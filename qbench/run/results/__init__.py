"""What came back: records -> summaries, the server's own view, and how the run ended.

    summary.py        records -> Summary: percentiles per phase, goodput, error kinds, SLO verdict
    figures.py        Figures: the headline figures every tuning stage's value embeds, declared once
    server_phases.py  the server's own phase timings, read during and after the run, joined onto the records
    device.py         the served rate beside what the forward passes could serve; the GPU's busy share
    batches.py        which requests a client saw start together (one batch)
    steady.py         did the server keep up? from the records, and the same test live
    serial_trend.py   a straight-line trend with a 95% interval that holds for autocorrelated samples
    failfast.py       stop a run whose opening requests all fail the same way, and say why
    run_info.py       RunInfo: run.json as data
    outcome.py        RunOutcome: how a run ended; its exit code
    alongside.py      a mix entry that starts later: the others before and after it joined
    paired.py         two runs on one schedule, compared request by request
    files.py          output folders' names and the one masked, atomic JSON writer
    words.py          the summary in words, said alike by the console and the report
"""
