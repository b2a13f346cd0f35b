"""What a run means: where the limit was, as findings (one sentence each).

finding.py holds the Finding; limits.py records (+ the server's settings, usage, phases) -> findings;
phases.py the server's phase timings -> findings; per_endpoint.py the same per function of a mix;
app_errors.py the app's own errors explained. Design: docs/design/load-diagnosis-reports.md."""
