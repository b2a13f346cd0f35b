"""What it means: where the limit was, as findings (one sentence each).

    finding.py          Finding: one sentence about where the limit was
    diagnose.py         records (+ the server's settings, usage, phases) -> findings
    diagnose_phases.py  where the time went inside the server: its phase medians -> findings
    diagnose_mix.py     the same per function, for a mix of endpoints
    app_errors.py       an app that raised on most requests, or events still running at the end, explained
"""
