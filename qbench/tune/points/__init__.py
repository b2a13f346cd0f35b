"""One point measured: measure.py runs the scenario under a point's overrides -> PointResult (every tuning
stage's run goes through it); knobcheck.py checks that a Gradio point's knobs took effect, and
litserve_check.py, bentoml_check.py, rayserve_check.py and torchserve_check.py the same for those frameworks.
Design: docs/design/search-points-verdicts.md."""
