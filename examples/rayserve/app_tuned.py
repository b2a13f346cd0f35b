"""examples/rayserve/app.py with the settings `qbench sweep` advised there (docs/rayserve.md):
`@serve.batch(max_batch_size=16)`, `@serve.deployment(max_ongoing_requests=32, max_queued_requests=57)`
(at most 57 requests wait at the proxy; a 503 past them). The model is the same, 20 ms + 2 ms per row
(307 req/s in full batches of 16). `python app_tuned.py [PORT]` in a virtualenv with `ray[serve]`;
docs/rayserve.md finds its capacity with `qbench capacity --app`."""

import sys
import time

from ray import serve
from starlette.requests import Request


@serve.deployment(max_ongoing_requests=32, max_queued_requests=57)
class BatchedModel:
    def __init__(self) -> None:
        self.base_s, self.per_row_s = 0.02, 0.002

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.01)
    async def predict(self, inputs: list[str]) -> list[int]:
        time.sleep(self.base_s + self.per_row_s * len(inputs))  # the model: it holds the replica
        return [len(str(row)) for row in inputs]

    async def __call__(self, request: Request) -> dict[str, int]:
        body = await request.json()
        return {"output": await self.predict(body["input"])}


app = BatchedModel.bind()

if __name__ == "__main__":
    serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[1]) if len(sys.argv) > 1 else 8000})
    serve.run(app, blocking=True)
