"""A TorchServe handler written as TorchServe's docs show (a BaseHandler with preprocess, inference and
postprocess): each request's JSON body {"input": "..."}, a batched inference of 20 ms + 2 ms per row (so
its best batch size is known: at most 1 / 0.022 = 45 req/s one at a time, 4 / 0.028 = 143 in batches of 4,
16 / 0.052 = 307 in batches of 16, per worker). config.properties beside the model store serves it;
docs/torchserve.md tunes it with `qbench sweep --app`."""

import time

from ts.torch_handler.base_handler import BaseHandler


class BatchedHandler(BaseHandler):
    def initialize(self, context):
        self.base_s, self.per_row_s = 0.02, 0.002
        self.initialized = True

    def preprocess(self, data):
        rows = []
        for row in data:  # one dict per request of the batch: its JSON body under "body" (or "data")
            body = row.get("body") or row.get("data") or {}
            rows.append(body.get("input", "") if isinstance(body, dict) else body)
        return rows

    def inference(self, rows, *args, **kwargs):
        time.sleep(self.base_s + self.per_row_s * len(rows))
        return [len(str(row)) for row in rows]

    def postprocess(self, lengths):
        return [{"output": length} for length in lengths]
