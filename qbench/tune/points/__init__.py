"""One point measured: a run of the scenario under a point's overrides -> PointResult, and whether its
knobs took effect.

    point.py         one run (run_measured) -> its summary and records; repeats -> PointResult (runaway
                     queues stop early); every tuning stage's run goes through here
    knobcheck.py     did a point's knobs take effect? the hook's record and the point's records
    litserve_check.py    the same for a LitServe app: what LitServe held, the batches it handed the app
    bentoml_check.py     the same for a BentoML service: its settings, the batches, the workers that ran
    rayserve_check.py    the same for a Ray Serve app: its batch and deployment settings, the batches,
                         the replicas that ran them, a max_batch_size its max_ongoing_requests caps
    torchserve_check.py  the same for TorchServe: each model as its management API describes it, the
                         batches its frontend handed the handler, the workers that ran them
"""
