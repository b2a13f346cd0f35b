"""A Ray Serve app written as Ray Serve's docs show: one deployment (`max_ongoing_requests=5`, Ray Serve's
default) whose `__call__` reads `request.json()["input"]` and awaits a method batched with
`@serve.batch(max_batch_size=4, batch_wait_timeout_s=0.01)`; the batch runs a model of 20 ms + 2 ms per row
that holds the replica while it runs (a synchronous model call, as most are), so its best settings are
known: at most 1 / 0.022 = 45 req/s one at a time, 4 / 0.028 = 143 in batches of 4, 16 / 0.052 = 307 in
batches of 16, when enough requests reach the replica to fill them (max_ongoing_requests caps that).

`python app.py [PORT]` (8000 by default) in a virtualenv with `ray[serve]`, or `serve run app:app`.
docs/rayserve.md tunes it with `qbench sweep --app`."""

import sys
import time

from ray import serve
from starlette.requests import Request


@serve.deployment(max_ongoing_requests=5)
class BatchedModel:
    def __init__(self) -> None:
        self.base_s, self.per_row_s = 0.02, 0.002

    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.01)
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
