"""A LitServe app written as LitServe's docs show: an untyped `decode_request` reading
`request["input"]`, a batched `predict` of 20 ms + 2 ms per row (so its best batch size is known: at most
1 / 0.022 = 45 req/s one at a time, 4 / 0.028 = 143 in batches of 4, 16 / 0.052 = 307 in batches of 16).
`python app.py [PORT]` (8000 by default) in a virtualenv with litserve; its batch size from MAX_BATCH_SIZE
(4 when unset). docs/litserve.md tunes it with `qbench sweep --app`."""

import os
import sys
import time

import litserve as ls


class BatchedAPI(ls.LitAPI):
    def setup(self, device):
        self.base_s, self.per_row_s = 0.02, 0.002

    def decode_request(self, request):
        return request["input"]

    def predict(self, x):
        rows = x if isinstance(x, list) else [x]
        time.sleep(self.base_s + self.per_row_s * len(rows))
        lengths = [len(str(row)) for row in rows]
        return lengths if isinstance(x, list) else lengths[0]

    def encode_response(self, output):
        return {"output": output}


if __name__ == "__main__":
    api = BatchedAPI(max_batch_size=int(os.environ.get("MAX_BATCH_SIZE", "4")), batch_timeout=0.01)
    server = ls.LitServer(api, accelerator="cpu")
    server.run(port=int(sys.argv[1]) if len(sys.argv) > 1 else 8000)
