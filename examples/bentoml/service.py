"""A BentoML service written as BentoML's docs show: an adaptive-batching API (`batchable=True`) that
takes a list of texts and returns one answer per text, costing 20 ms + 2 ms per row (so its best batch
size is known: at most 1 / 0.022 = 45 req/s one at a time, 4 / 0.028 = 143 in batches of 4,
16 / 0.052 = 307 in batches of 16). `bentoml serve service:Batched --port PORT` in a virtualenv with
bentoml (1.4). docs/bentoml.md drafts its scenario with `qbench init`."""

import time

import bentoml


@bentoml.service(workers=1, traffic={"timeout": 30})
class Batched:
    @bentoml.api(batchable=True, max_batch_size=16, max_latency_ms=1000)
    def predict(self, texts: list[str]) -> list[int]:
        time.sleep(0.02 + 0.002 * len(texts))
        return [len(text) for text in texts]
